"""The hybrid search on a real database: the review's hard cases, filters, rows, pages."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import replace

import psycopg
import pytest
from pgvector.psycopg import register_vector

from subspace import commands
from subspace.api.errors import http_status
from subspace.context import Context
from subspace.database import Database
from subspace.db.pool import connect
from subspace.errors import InvalidCursor, InvalidInput, NotFound, TooLarge
from subspace.ingest.worker import extract_pending
from subspace.providers.base import EmbedResult
from subspace.providers.fake import FakeProvider
from subspace.search import vector
from subspace.search.filters import TagFilter
from subspace.search.query import parse_query
from subspace.search.steps import SearchStep
from tests.samples import make_pdf
from tests.search_helpers import embed, follow, ids, index, run

# The review's fusion cases are about equal weights (the fake provider's default is lower).
EQUAL = {"lexical": 1.0, "vector": 1.0}

WORDS = (
    "harbour ledger quartz meadow copper lantern willow signal orbit canyon velvet prism "
    "falcon garnet timber cobalt saddle ember juniper marble thistle beacon ripple summit"
).split()


def filler(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def test_an_exact_token_the_vector_leg_misses_is_found_by_hybrid(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Release notes")
    rng = random.Random(1)
    for token in ("PROJ-1243", "PROJ-1324", "PROJ-2134", "PROJ-1235", "PROJ-12340", "PRJ-1234"):
        commands.add_node(cx, page.id, f"{token}")
    target = commands.add_node(
        cx, page.id, f"The release train stalled because of PROJ-1234 {filler(rng, 20)}"
    )
    index(database, cx)
    vector_only = run(database, cx, "PROJ-1234", mode="vector", limit=3)
    assert target.id not in ids(vector_only)
    hybrid = run(database, cx, "PROJ-1234", limit=3, weights=EQUAL)
    assert ids(hybrid)[0] == target.id
    assert hybrid.rows[0].legs["lexical"].rank == 1


def test_a_total_tie_at_limit_1_returns_the_lexical_exact_match(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Tie")
    look_alike = commands.add_node(cx, page.id, "kestrelz")
    index(database, cx)
    exact = commands.add_node(cx, page.id, "a kestrel flew over")  # not embedded yet
    response = run(database, cx, "kestrel", limit=1, weights=EQUAL)
    assert response.rows[0].legs.keys() == {"lexical"}
    assert ids(response) == [exact.id]
    assert run(database, cx, "kestrel", mode="vector", limit=1).rows[0].id == look_alike.id


def test_a_shared_rank_1_hit_keeps_the_lexical_only_row_at_limit_2(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Shared")
    both = commands.add_node(cx, page.id, "kestrel kestrel")
    vector_only = commands.add_node(cx, page.id, "kestrelz")
    index(database, cx)
    lexical_only = commands.add_node(cx, page.id, "a kestrel hovered")
    response = run(database, cx, "kestrel", limit=2, explain=True, weights=EQUAL)
    assert [row.legs.keys() for row in response.rows] == [{"lexical", "vector"}, {"lexical"}]
    assert ids(response) == [both.id, lexical_only.id]
    assert vector_only.id not in ids(response)
    assert response.rows[1].explain is not None
    assert response.rows[1].explain["tie"]["decided_by"].startswith("lexical leg")


def test_a_large_knowledge_base_cannot_take_every_slot(database: Database, cx: Context) -> None:
    big = commands.create_knowledge_base(cx, "Big")
    small = commands.create_knowledge_base(cx, "Small")
    rng = random.Random(2)
    from subspace.ingest.outline import OutlineItem

    items = [OutlineItem(f"ferry ferry ferry {filler(rng, 30)}") for _ in range(150)]
    commands.create_page_from_outline(cx, "Timetables", items, kb_id=big.id)
    quiet = commands.create_page(cx, "Quiet", kb_id=small.id)
    lone = commands.add_node(cx, quiet.id, "ferry")
    index(database, cx)
    response = run(
        database,
        cx,
        "ferry",
        limit=20,
        kb_ids=[big.id, small.id],
        explain_target=f"node:{lone.id}",
        weights=EQUAL,
    )
    assert response.legs["lexical"].candidates == 101  # the cap per base, plus the small base
    assert lone.id in ids(response)
    assert response.absent is not None
    assert response.absent["shown"]


def test_many_bases_share_two_windows_each_drawing_a_page(database: Database, cx: Context) -> None:
    from subspace.ingest.outline import OutlineItem
    from subspace.search.service import base_cap, window_for

    # One base draws a whole window; several share two, each at least a third of one: the
    # rows a page of that window can hold, so one base can still fill it.
    assert [base_cap(100, n) for n in (1, 2, 3, 6, 50)] == [100, 100, 67, 34, 34]
    assert base_cap(window_for(100), 10) == 100
    # The pages of one query share their caps, as they share their window.
    assert {base_cap(window_for(depth), 6) for depth in (1, 10, 33)} == {34}
    bases = [commands.create_knowledge_base(cx, f"Base {n}") for n in range(6)]
    for kb in bases:
        items = [OutlineItem(f"ferry timetable {n}") for n in range(50)]
        commands.create_page_from_outline(cx, "Timetables", items, kb_id=kb.id)
    index(database, cx)
    response = run(database, cx, "ferry", limit=10, kb_ids=[kb.id for kb in bases], weights=EQUAL)
    assert response.legs["lexical"].candidates == 6 * 34
    assert 0 < response.legs["vector"].candidates <= 6 * 34
    assert len(run(database, cx, "ferry", limit=33, kb_ids=[bases[0].id, bases[1].id]).rows) == 33


def test_results_are_deterministic(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Same")
    for i in range(30):
        commands.add_node(cx, page.id, f"lantern {i % 3} glow")
    index(database, cx)
    first = ids(run(database, cx, "lantern glow", limit=30))
    assert len(set(first)) == 30  # the limit, each bullet once
    assert all(ids(run(database, cx, "lantern glow", limit=30)) == first for _ in range(3))


def test_typed_rows(database: Database, settings: object, cx: Context) -> None:
    kb = commands.create_knowledge_base(cx, "Travel")
    page = commands.create_page(cx, "Lisbon trip", kb_id=kb.id)
    parent = commands.add_node(cx, page.id, "Day two")
    child = commands.add_node(cx, page.id, "Ride the ferry to Cacilhas", parent_id=parent.id)
    memory = commands.add_node(cx, page.id, "The ferry card is in the blue wallet",
                               props={"memory": True})  # fmt: skip
    pdf = commands.upload_file(cx, "guide.pdf", make_pdf(["Ferry times: every 20 minutes"]),
                               kb_id=kb.id)  # fmt: skip
    mail = commands.add_mail(cx, message_id="<f@x>", subject="Ferry tickets",
                             sender="ana@example.com", body_text="Two ferry tickets attached.",
                             kb_id=kb.id)  # fmt: skip
    extract_pending(database, cx.settings)
    index(database, cx)
    response = run(database, cx, "ferry", limit=10)
    rows = {row.id: row for row in response.rows}
    node = rows[child.id]
    assert (node.type, node.title, node.page_id) == ("node", "Lisbon trip", page.id)
    assert node.breadcrumb == ["Lisbon trip", "Day two"]
    assert node.knowledge_base == "Travel"
    assert node.kb_id == kb.id
    assert [node.passage[a:b] for a, b in node.highlights] == ["ferry"]
    assert rows[memory.id].type == "mem"
    file_row = rows[pdf.id]
    assert file_row.type == "file"
    assert file_row.title == "guide.pdf"
    assert file_row.ref == f"file:{pdf.id}:0"
    assert "Ferry times" in file_row.passage
    mail_row = rows[mail.id]
    assert (mail_row.type, mail_row.title, mail_row.sender) == (
        "mail",
        "Ferry tickets",
        "ana@example.com",
    )
    for found in (child.id, memory.id, pdf.id, mail.id):
        assert rows[found].legs["lexical"].rank >= 1
        assert rows[found].legs["vector"].rank >= 1
    assert all(row.created_at <= row.updated_at for row in response.rows)
    assert response.pending_embeddings == 0
    assert response.degraded == []


def test_group_by_page_counts_every_match(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Harbour log")
    for i in range(5):
        commands.add_node(cx, page.id, f"harbour entry {i}")
    other = commands.create_page(cx, "Elsewhere")
    commands.add_node(cx, other.id, "one harbour mention")
    response = run(database, cx, "harbour", mode="lexical", group_by_page=True, limit=10)
    by_page = {row.page_id: row.more_on_page for row in response.rows}
    assert by_page == {page.id: 5, other.id: 0}  # five bullets and the title, one shown


def test_pagination_concatenates_to_one_request(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Many")
    rng = random.Random(3)
    for _ in range(40):
        commands.add_node(cx, page.id, f"signal {filler(rng, 6)}")
    index(database, cx)
    whole = ids(run(database, cx, "signal orbit", limit=30))
    pages, cursor = [], None
    for _ in range(3):
        response = run(database, cx, "signal orbit", limit=10, cursor=cursor)
        pages.extend(ids(response))
        cursor = response.next_cursor
    assert pages == whole
    assert len(set(pages)) == 30
    with pytest.raises(InvalidCursor, match="another query"):
        run(database, cx, "different", limit=10, cursor=cursor)
    with pytest.raises(InvalidCursor, match="not valid"):
        run(database, cx, "signal", cursor="garbage!")


def test_a_one_percent_kind_filter_still_fills_the_limit(
    database: Database, cx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    from subspace.ingest.outline import OutlineItem

    rng = random.Random(4)
    items = [OutlineItem(f"note {filler(rng, 8)}") for _ in range(990)]
    page = commands.create_page_from_outline(cx, "Bulk", items)
    for i in range(10):
        commands.add_node(cx, page.id, f"memory {i} {filler(rng, 8)}", props={"memory": True})
    index(database, cx)
    monkeypatch.setattr(vector, "EXACT_SCAN_ROWS", 100)  # force the index path
    # No similarity floor: the filler's nearest neighbours are what fills the limit.
    response = run(
        database, cx, "timber marble", mode="vector", kinds=["memory"], limit=10, min_similarity=-1
    )
    assert response.legs["vector"].plan == "index"
    assert len(response.rows) == 10
    assert {row.type for row in response.rows} == {"mem"}
    monkeypatch.setattr(vector, "EXACT_SCAN_ROWS", 2_000)
    exact = run(
        database, cx, "timber marble", mode="vector", kinds=["memory"], limit=10, min_similarity=-1
    )
    assert exact.legs["vector"].plan == "exact"
    assert ids(exact) == ids(response)


def test_tag_filters_on_both_legs(database: Database, cx: Context) -> None:
    status = commands.create_tag(cx, "status", "text")
    due = commands.create_tag(cx, "due", "date")
    size = commands.create_tag(cx, "size", "number")
    done = commands.create_tag(cx, "done", "boolean")
    draft = commands.create_page(cx, "Draft plan")
    final = commands.create_page(cx, "Final plan")
    commands.add_node(cx, draft.id, "plan the quartz launch")
    commands.add_node(cx, final.id, "plan the quartz review")
    commands.set_tag(cx, status.id, "page", draft.id, "Draft")
    commands.set_tag(cx, status.id, "page", final.id, "final")
    commands.set_tag(cx, due.id, "page", draft.id, "2026-12-01")
    commands.set_tag(cx, due.id, "page", final.id, "2027-03-01")
    commands.set_tag(cx, size.id, "page", final.id, 8)
    commands.set_tag(cx, done.id, "page", final.id, True)
    index(database, cx)
    cases = [
        (TagFilter("status", "eq", "draft"), {draft.id}),
        (TagFilter("status", "neq", "draft"), {final.id}),
        (TagFilter("status", "contains", "INA"), {final.id}),
        (TagFilter("status", "not_contains", "ina"), {draft.id}),
        (TagFilter("status", "starts_with", "dr"), {draft.id}),
        (TagFilter("status", "ends_with", "al"), {final.id}),
        (TagFilter("due", "lt", "2027-01-01"), {draft.id}),
        (TagFilter("due", "between", "2027-01-01", "2027-06-30"), {final.id}),
        (TagFilter("size", "gte", 8), {final.id}),
        (TagFilter("size", "gt", "8"), set()),
        (TagFilter("done", "eq", True), {final.id}),
    ]
    for tag, expected in cases:
        for mode in ("lexical", "vector"):
            response = run(database, cx, "plan quartz", mode=mode, tags=[tag], limit=20)
            assert {row.page_id for row in response.rows} == expected, (tag, mode)
    with pytest.raises(InvalidInput, match="Unknown tag 'colour'"):
        run(database, cx, "plan", tags=[TagFilter("colour", "eq", "red")])
    with pytest.raises(InvalidInput, match="does not fit tag 'done' of type boolean"):
        run(database, cx, "plan", tags=[TagFilter("done", "gt", True)])
    with pytest.raises(InvalidInput, match="give a date"):
        run(database, cx, "plan", tags=[TagFilter("due", "eq", "soon")])
    with pytest.raises(InvalidInput, match="needs two values"):
        run(database, cx, "plan", tags=[TagFilter("due", "between", "2026-01-01")])


def test_knowledge_base_filter_and_isolation_on_both_legs(database: Database, cx: Context) -> None:
    from subspace.workspaces import create_workspace

    mine = commands.create_knowledge_base(cx, "Mine")
    other_kb = commands.create_knowledge_base(cx, "Other")
    a = commands.create_page(cx, "Canyon notes", kb_id=mine.id)
    b = commands.create_page(cx, "Canyon notes", kb_id=other_kb.id)
    with database.pool.connection() as conn:
        stranger = create_workspace(conn, "Stranger")
    theirs = database.context(stranger, cx.settings)
    foreign = commands.create_page(theirs, "Canyon notes")
    index(database, cx)
    for mode in ("lexical", "vector", "hybrid"):
        assert set(ids(run(database, cx, "canyon notes", mode=mode, kb_ids=[mine.id]))) == {a.id}
        everything = set(ids(run(database, cx, "canyon notes", mode=mode)))
        assert {a.id, b.id} <= everything
        assert foreign.id not in everything
        assert set(ids(run(database, theirs, "canyon notes", mode=mode))) == {foreign.id}
    with database.pool.connection() as conn:
        their_kb = conn.execute(
            "select id from kb.knowledge_bases where workspace_id = %s", (stranger.workspace_id,)
        ).fetchone()
    assert their_kb is not None
    with pytest.raises(NotFound):
        run(database, cx, "canyon", kb_ids=[their_kb["id"]])


@pytest.mark.parametrize(
    "query",
    [
        "') OR 1=1 --",
        "'",
        "\\",
        "fat:A!cat:B|rat:C<",
        "(()) )))) this ||| is && -fine",
        "a" * 2000,
        "null\x00byte",
        "OR OR OR",
        '"unclosed phrase',
        "-",
        "!!",
        "&",
        "<->",
        "🙂 emoji ☃",
        "\ud800 surrogate",
    ],
)
def test_hostile_queries_answer_or_refuse_clearly(
    database: Database, cx: Context, query: str
) -> None:
    page = commands.create_page(cx, "Anything")
    commands.add_node(cx, page.id, "this is fine, fat cat")
    index(database, cx)
    try:
        response = run(database, cx, query)
    except InvalidInput as exc:
        assert http_status(exc) == 422
        assert exc.message.endswith(".")
    else:
        assert response.degraded == []


def test_query_limits_and_empty_queries(database: Database, cx: Context) -> None:
    with pytest.raises(InvalidInput, match="SUBSPACE_MAX_QUERY_CHARS"):
        run(database, cx, "x" * 10_000)
    with pytest.raises(InvalidInput, match="empty"):
        run(database, cx, "   ")
    with pytest.raises(InvalidInput, match="only excludes"):
        run(database, cx, "-only-negation")
    with pytest.raises(InvalidInput, match="between 1 and 100"):
        run(database, cx, "x", limit=0)
    with pytest.raises(InvalidInput, match="Unknown kind"):
        run(database, cx, "x", kinds=["emails"])
    with pytest.raises(InvalidInput, match="Unknown mode"):
        run(database, cx, "x", mode="fuzzy")
    with pytest.raises(InvalidInput, match="weight"):
        run(database, cx, "x", weights={"vector": -1})
    many = [commands.create_knowledge_base(cx, f"kb{i}").id for i in range(3)]
    small = replace(cx, settings=replace(cx.settings, max_knowledge_bases=2))
    with pytest.raises(TooLarge, match="SUBSPACE_MAX_KNOWLEDGE_BASES"):
        run(database, small, "x", kb_ids=many)


def test_an_all_stopword_query_has_an_empty_lexical_leg(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Stop")
    commands.add_node(cx, page.id, "the and of")
    index(database, cx)
    response = run(database, cx, "the of and")
    assert response.legs["lexical"].ran
    assert response.legs["lexical"].candidates == 0
    assert response.degraded == []


def test_filters_without_a_query_browse_by_recency(database: Database, cx: Context) -> None:
    older = commands.create_page(cx, "Older")
    newer = commands.create_page(cx, "Newer")
    response = run(database, cx, "", kinds=["page"])
    assert ids(response)[:2] == [newer.id, older.id]
    assert response.notes


def test_negation_holds_on_both_legs(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Negation")
    keep = commands.add_node(cx, page.id, "jitter in the retries")
    drop = commands.add_node(cx, page.id, "jitter multiplied the load")
    index(database, cx)
    for mode in ("lexical", "vector", "hybrid"):
        # No similarity floor: what is checked is that the vector leg leaves out "load".
        found = ids(run(database, cx, "jitter -load", mode=mode, min_similarity=-1))
        assert keep.id in found, mode
        assert drop.id not in found, mode


def test_a_dash_in_pasted_prose_is_punctuation_not_an_exclusion(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Trial")
    trial = commands.add_node(cx, page.id, "Patients joined between May 2002 and July 2007")
    index(database, cx)
    pasted = (
        "We enrolled patients for the randomised trial of the new inhaler at four sites from "
        "May 2002 -July 2007 and followed them for two years"
    )
    assert parse_query(pasted).negated == ()
    assert trial.id in ids(run(database, cx, pasted, mode="lexical"))
    assert trial.id not in ids(run(database, cx, "patients -july", mode="lexical"))


def test_quotation_marks_in_pasted_prose_require_no_phrase() -> None:
    pasted = (
        'Critics say the plan will fail, but as the minister put it, "we cannot wait for a '
        'perfect deal" and the vote is next week after the summer recess ends in September'
    )
    parsed = parse_query(pasted)
    assert parsed.quoted == ()
    assert ("perfect",) in [c.alternatives for c in parsed.clauses]
    assert parse_query('deploy "staging cluster" now').quoted == ("staging cluster",)


def test_questions_are_flagged(database: Database, cx: Context) -> None:
    assert run(database, cx, "how do I rotate the staging keys").is_question
    assert run(database, cx, "why did checkout fail?").is_question
    assert not run(database, cx, "PROJ-1234").is_question
    assert not run(database, cx, "staging keys").is_question


def test_a_question_weighs_meaning_more_under_a_real_model(database: Database, cx: Context) -> None:
    class NamedOnnx(FakeProvider):  # the weights follow the provider's name, as configured
        name = "onnx"

    page = commands.create_page(cx, "Residuals")
    commands.add_node(cx, page.id, "A residual plot shows the errors of a regression model")
    index(database, cx)
    onnx = NamedOnnx()
    embed(database, cx, onnx)
    asked = run(database, cx, "how do you know if a residual plot is good", provider=onnx)
    claim = run(database, cx, "residual plots show the errors of regression models", provider=onnx)
    lookup = run(database, cx, "residual plot", provider=onnx)
    passage = " ".join(["A residual plot shows the errors of a regression model."] * 5)
    pasted = run(database, cx, passage, provider=onnx)  # 45 words: find what says the same
    assert asked.legs["vector"].weight == pasted.legs["vector"].weight == 1.0
    assert claim.legs["vector"].weight == lookup.legs["vector"].weight == 0.5
    assert parse_query("how do you know if a residual plot is good").asks
    assert not parse_query("residual plots show the errors of regression models").asks
    assert parse_query("residual plots show the errors of regression models").is_question
    # Trigram vectors know only spelling: a question does not make them count.
    assert (
        run(database, cx, "how do you know if a residual plot is good?").legs["vector"].weight
        == 0.01
    )


class SlowProvider(FakeProvider):
    def embed(self, texts: Sequence[str]) -> EmbedResult:
        time.sleep(2)
        return super().embed(texts)


class BrokenProvider(FakeProvider):
    def embed(self, texts: Sequence[str]) -> EmbedResult:
        raise RuntimeError("connection refused")


def test_a_slow_provider_degrades_to_lexical_within_the_timeout(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Degrade")
    node = commands.add_node(cx, page.id, "lexical still answers")
    follow(database, cx)
    quick = replace(cx, settings=replace(cx.settings, embed_timeout_ms=300))
    started = time.monotonic()
    response = run(database, quick, "lexical answers unique-slow-query", SlowProvider())
    assert time.monotonic() - started < 1.5
    assert response.degraded == ["vector: timeout"]
    assert ids(response) == [node.id]
    broken = run(database, cx, "lexical answers", BrokenProvider())
    assert broken.degraded == ["vector: error"]  # a message is not a refused connection
    assert ids(broken) == [node.id]


def test_a_failing_lexical_leg_degrades_to_vector(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Vector only")
    index(database, cx)
    node = commands.add_node(cx, page.id, "embedded words")  # the delta: read from Postgres
    embed(database, cx)
    with database.pool.connection() as conn:
        conn.execute("alter table kb.nodes rename column text_tsv to text_tsv_gone")
    response = run(database, cx, "embedded words")
    assert response.degraded
    assert response.degraded[0].startswith("lexical: failed")
    assert ids(response)[0] == node.id


def test_explain_says_why_a_target_is_absent(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Explain")
    first = commands.add_node(cx, page.id, "walrus sighting")
    second = commands.add_node(cx, page.id, "walrus colony")
    unmatched = commands.add_node(cx, page.id, "penguin")
    index(database, cx)
    shown_id = ids(run(database, cx, "walrus", mode="lexical", limit=1))[0]
    hidden = first if shown_id == second.id else second
    shown = second if hidden is first else first
    response = run(
        database, cx, "walrus", mode="lexical", limit=1, explain_target=f"node:{hidden.id}"
    )
    assert response.absent is not None
    assert not response.absent["shown"]
    assert any(r.startswith("cut by the limit") for r in response.absent["reasons"])
    assert any(r.startswith("lexical leg: rank") for r in response.absent["reasons"])
    miss = run(database, cx, "walrus", mode="lexical", explain_target=str(unmatched.id))
    assert miss.absent is not None
    assert "lexical leg: none of the query's words is in its text" in miss.absent["reasons"]
    commands.archive_page(cx, page.id)
    gone = run(database, cx, "walrus", explain_target=f"node:{shown.id}")
    assert gone.absent is not None
    assert "filtered: archived" in gone.absent["reasons"]
    memo = run(database, cx, "walrus", kinds=["memory"], explain_target=f"node:{shown.id}")
    assert memo.absent is not None
    assert "filtered: kind node not searched" in memo.absent["reasons"]
    nowhere = run(
        database, cx, "walrus", explain_target="node:00000000-0000-0000-0000-000000000009"
    )
    assert nowhere.absent == {
        "target": "node:00000000-0000-0000-0000-000000000009",
        "shown": False,
        "reasons": ["not found in this workspace"],
    }


def test_with_the_fake_provider_hybrid_keeps_the_lexical_rows_first(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Weights")
    rng = random.Random(9)
    for _ in range(30):
        commands.add_node(cx, page.id, f"{filler(rng, 5)} quartz {filler(rng, 3)}")
    commands.add_node(cx, page.id, "quarts")  # only the vector leg finds this one
    index(database, cx)
    lexical = ids(run(database, cx, "quartz meadow", mode="lexical", limit=40))
    hybrid = run(database, cx, "quartz meadow", limit=40)
    assert ids(hybrid)[:10] == lexical[:10]  # the lexical top ten, in its order
    assert set(ids(hybrid)[: len(lexical)]) == set(lexical)
    assert len(hybrid.rows) > len(lexical)  # what only the vector leg found comes after
    assert hybrid.legs["vector"].weight == 0.01


def test_the_vector_leg_runs_on_the_callers_connection_when_none_is_free(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Busy pool")
    node = commands.add_node(cx, page.id, "lantern signal")
    index(database, cx)
    held = [database.pool.getconn() for _ in range(3)]  # the pool has four
    try:
        response = run(database, cx, "lantern signal", weights=EQUAL)
    finally:
        for conn in held:
            database.pool.putconn(conn)
    assert response.legs["vector"].ran
    assert response.legs["lexical"].ran
    assert ids(response)[0] == node.id


def test_only_statements_of_a_fixed_text_are_prepared(cx: Context, database: Database) -> None:
    """A search prepares the statements it sends every time (its scope, the query's terms,
    hydration), never the vector leg's walk, whose plan must be made for the model's partial
    index and its filters' values; a search whose leg failed leaves them working."""
    page = commands.create_page(cx, "Plans")
    for i in range(30):
        commands.add_node(cx, page.id, f"common words in bullet {i}")
    index(database, cx)
    # A connection of its own, so that every statement prepared on it is a search's.
    with connect(database.dsn) as conn:
        register_vector(conn)
        bound = cx.on(conn)
        for word in ["common", "bullet", "words", "rare"] * 5:
            run(database, bound, word)
        prepared = conn.execute(
            "select statement, generic_plans, custom_plans from pg_prepared_statements"
        ).fetchall()
        statements = [r["statement"] for r in prepared]
        assert statements
        assert not any("<=>" in s for s in statements)
        assert any("phraseto_tsquery" in s for s in statements)
        # Hydration reads rows by their keys: planned once, not for each search's keys; and
        # the setting that asks for it ends with hydration, not with the caller's transaction.
        rows = [r for r in prepared if "ts_headline" in r["statement"]]
        assert rows
        assert all(r["custom_plans"] == 0 and r["generic_plans"] > 0 for r in rows)
        with conn.transaction():
            run(database, bound, "common")
            mode = conn.execute("select current_setting('plan_cache_mode') as m").fetchone()
            assert mode == {"m": "auto"}
        # A leg that fails (the delta's rows read from a column gone), then a search that
        # fails whole (a table gone): each rolled back, and the searches after them work.
        commands.add_node(cx, page.id, "common words written since")
        conn.commit()  # the searches' locks go: the tables can be altered
        with database.pool.connection() as other:
            other.execute("alter table kb.nodes rename column text_tsv to text_tsv_gone")
        assert run(database, bound, "common").degraded[0].startswith("lexical: failed")
        conn.commit()
        with database.pool.connection() as other:
            other.execute("alter table kb.nodes rename column text_tsv_gone to text_tsv")
            other.execute("alter table search.source_stats rename to source_stats_gone")
        with pytest.raises(psycopg.errors.UndefinedTable):
            run(database, bound, "common")
        conn.rollback()
        with database.pool.connection() as other:
            other.execute("alter table search.source_stats_gone rename to source_stats")
        assert len(ids(run(database, bound, "common bullet", mode="lexical"))) == 10
        assert run(database, bound, "common bullet").degraded == []


def test_a_base_that_grows_is_searched_through_the_index_at_once(
    database: Database, cx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    from subspace.ingest.outline import OutlineItem

    monkeypatch.setattr(vector, "EXACT_SCAN_ROWS", 5)
    page = commands.create_page(cx, "")
    first = [commands.add_node(cx, page.id, f"granite ledge {i}") for i in range(3)]
    index(database, cx)
    assert run(database, cx, "granite", mode="vector").legs["vector"].plan == "exact"
    bulk = commands.create_page_from_outline(
        cx, "", [OutlineItem(f"granite shelf {i}") for i in range(120)]
    )
    index(database, cx)
    grown = run(database, cx, "granite", mode="vector")
    assert grown.legs["vector"].plan == "index"
    assert len(grown.rows) == 10
    # Remembered as large while it fills its window; shrinking back still finds what is
    # left, and a walk that comes back short has the base counted again.
    for node in first:
        commands.delete_node(cx, node.id)
    commands.delete_page(cx, bulk.id)
    kept = commands.add_node(cx, page.id, "granite outcrop")
    index(database, cx)
    shrunk = run(database, cx, "granite", mode="vector")
    assert shrunk.legs["vector"].plan == "index"
    assert ids(shrunk) == [kept.id]
    assert run(database, cx, "granite", mode="vector").legs["vector"].plan == "exact"


def test_corrections_are_reported_as_the_words_typed(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Materials")
    target = commands.add_node(cx, page.id, "Biomaterials for bone studies")
    index(database, cx)
    response = run(database, cx, "biomateirals bone", mode="lexical")
    assert ids(response) == [target.id]
    assert response.corrections == {"biomateirals": "biomaterials"}
    # The key is the word as typed; the correction keeps the typed word's ending.
    assert run(database, cx, "Biomateirals", mode="lexical").corrections == {
        "Biomateirals": "biomaterials"
    }
    assert run(database, cx, "stuides", mode="lexical").corrections == {"stuides": "studies"}


def test_typo_corrections_come_from_the_callers_workspace_only(
    database: Database, cx: Context
) -> None:
    from subspace.workspaces import create_workspace

    mine = commands.create_page(cx, "Mine")
    commands.add_node(cx, mine.id, "Notes on sandstone")
    with database.pool.connection() as conn:
        stranger = create_workspace(conn, "Stranger")
    theirs = database.context(stranger, cx.settings)
    secret = commands.create_page(theirs, "Theirs")
    found = commands.add_node(theirs, secret.id, "The quarterly tamarind forecast")
    index(database, cx)
    # "tamarind" is only in the other workspace: never offered, never matched here.
    for query in ("tamarnid", "tamarindd", "tmarind"):
        response = run(database, cx, query, mode="lexical")
        assert response.corrections == {}
        assert response.rows == []
    # The owner of the word gets the correction (the test can fail).
    assert run(database, theirs, "tamarnid", mode="lexical").corrections == {"tamarnid": "tamarind"}
    assert ids(run(database, theirs, "tamarnid", mode="lexical")) == [found.id]


def test_explain_lists_each_legs_own_rows_beside_the_fused_ones(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Birds")
    texts = ("an osprey over the long grey lake at dawn", "the osprey carried a fish to the bay",
             "the old osprey nest on the radio mast")  # fmt: skip
    lexical = [commands.add_node(cx, page.id, t).id for t in texts]
    spelled_alike = commands.add_node(cx, page.id, "ospreyx").id  # no word of the query
    index(database, cx)
    response = run(database, cx, "osprey", limit=3, explain=True)
    assert set(ids(response)) == set(lexical)
    by_leg = response.leg_rows
    assert [r.legs["lexical"].rank for r in by_leg["lexical"]] == [1, 2, 3]
    assert {r.id for r in by_leg["lexical"]} == set(lexical)
    assert [r.legs["vector"].rank for r in by_leg["vector"]] == [1, 2, 3]
    assert spelled_alike in {r.id for r in by_leg["vector"]}  # in a leg's list, not in the rows
    assert all(r.explain is not None and r.explain["terms"] for r in by_leg["vector"])
    assert run(database, cx, "osprey", limit=3).leg_rows == {}


def test_every_step_of_a_search_is_named_and_timed(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Steps")
    commands.add_node(cx, page.id, "a timed step")
    searched = run(database, cx, "timed step", explain=True)
    assert list(searched.steps) == [
        "validate", "prepare", "scope", "legs", "fuse", "group", "hydrate", "explain", "cursor",
        "commit",
    ]  # fmt: skip
    assert all(ms >= 0 for ms in searched.steps.values())
    assert set(searched.steps) <= {step.value for step in SearchStep}
    browsed = run(database, cx, "", kinds=["node"])
    assert list(browsed.steps) == ["validate", "prepare", "scope", "browse"]


def test_a_commands_option_is_a_word_not_an_exclusion(database: Database, cx: Context) -> None:
    """From the real set: adduser's README says "adduser --system is idempotent"."""
    page = commands.create_page(cx, "adduser")
    said = commands.add_node(
        cx, page.id, "The most important thing: adduser --system is idempotent"
    )
    index(database, cx)
    assert parse_query("adduser --system is idempotent").negated == ()
    found = ids(run(database, cx, "adduser --system is idempotent", mode="lexical"))
    assert found[0] == said.id  # holding every word, "system" too, it comes first
