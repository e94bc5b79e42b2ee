"""Explain's reasons and the legs cannot disagree: for every reason every kind declares, an item
hidden by it is found by neither leg, and explain names that reason and no other."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.db.pool import Conn
from subspace.ingest.worker import extract_pending
from subspace.outbox.append import append_event
from subspace.outbox.events import Event, declared
from subspace.providers.fake import FakeProvider
from subspace.search import registry
from subspace.search.explaining import ASKED_BY_RUN
from subspace.search.filters import TagFilter
from subspace.search.request import SearchRequest, SearchResponse
from subspace.search.service import search
from tests.search_helpers import ids, index, run


@dataclass
class Made:
    """One target made to be hidden: its word, its id and its item's id."""

    word: str
    target_id: UUID
    item_id: UUID


def _page(cx: Context, word: str) -> Made:
    page = commands.create_page(cx, f"The {word} ledger")
    return Made(word, page.id, page.id)


def _node(memory: bool) -> Callable[[Context, str], Made]:
    def make(cx: Context, word: str) -> Made:
        page = commands.create_page(cx, "Notes")
        node = commands.add_node(cx, page.id, f"The {word} hangar opens at dawn",
                                 props={"memory": True} if memory else None)  # fmt: skip
        return Made(word, node.id, page.id)

    return make


def _file(cx: Context, word: str) -> Made:
    file = commands.upload_file(cx, "route.txt", f"Notes on the {word} route.".encode())
    return Made(word, file.id, file.id)


def _file_name(cx: Context, word: str) -> Made:
    file = commands.upload_file(cx, f"{word}.txt", b"Notes on the route.")
    return Made(word, file.id, file.id)


def _mail(cx: Context, word: str) -> Made:
    mail = commands.add_mail(cx, message_id=f"<{word}@x>", subject=f"{word} tickets",
                             body_text="Two seats.")  # fmt: skip
    return Made(word, mail.id, mail.id)


# How to make a target of each kind; a kind added to the registry needs a maker here.
MAKERS: dict[str, Callable[[Context, str], Made]] = {
    "page": _page, "node": _node(False), "memory": _node(True), "file": _file, "mail": _mail,
    "file_name": _file_name, "mail_subject": _mail,
}  # fmt: skip

# How to hide a row by each reason: what to set on its table (the item's, or the row's own
# for a row reason); a reason added to the registry needs a way here.
HIDE: dict[str, str] = {
    "archived": "archived_at = now()", "deleted": "deleted_at = now()",
    "disabled": "enabled = false", "processing": "status = 'processing'",
    "chunk_disabled": "enabled = false", "excluded": "",  # a row of kb.exclusions instead
}  # fmt: skip


def _hide(conn: Conn, cx: Context, spec: registry.KindSpec, reason: registry.Reason,
          made: Made) -> None:  # fmt: skip
    params = {"ws": cx.actor.workspace_id, "user": cx.actor.user_id}
    if reason.name == "excluded":
        conn.execute(
            "insert into kb.exclusions (workspace_id, user_id, target_kind, target_id) "
            "values (%(ws)s, %(user)s, %(item)s, %(id)s)",
            params | {"item": spec.item.name, "id": made.item_id},
        )
        return
    if reason in spec.item.reasons:
        table, key, ident = spec.item.table, spec.item.key, made.item_id
    else:
        table, key, ident = spec.table, spec.key, made.target_id
    conn.execute(
        f"update {table} set {HIDE[reason.name]} where workspace_id = %(ws)s and {key} = %(id)s",
        params | {"id": ident},
    )
    # As a command would: an event naming the item, which the lexical index follows.
    hidden = Event(f"{spec.item.name}.hidden", spec.item.name, (f"{spec.item.name}_id",))
    with declared(hidden):
        append_event(conn, cx.actor.workspace_id, hidden.name, **{hidden.payload[0]: made.item_id})


def _word(n: int) -> str:
    return "zq" + "".join(chr(ord("a") + int(d)) for d in f"{n:03d}") + "x"  # zqaabx...


def _modes(spec: registry.KindSpec) -> tuple[str, ...]:
    """The legs that find a row of `spec`: a field of another kind has no embeddings."""
    return ("lexical", "vector") if spec.embedded else ("lexical",)


def test_every_declared_reason_hides_from_the_legs_and_explain_names_it(
    database: Database, cx: Context
) -> None:
    kinds = list(registry.registered())
    assert {spec.name for spec in kinds} == set(MAKERS)
    cases = []
    for spec in kinds:
        for reason in spec.reasons:
            assert reason.name in HIDE, f"no way to hide a {spec.name} by {reason.name}"
            made = MAKERS[spec.name](cx, _word(len(cases)))
            cases.append((spec, reason, made))
    extract_pending(database, cx.settings)
    index(database, cx)
    refs = {}
    for spec, reason, made in cases:
        for mode in _modes(spec):
            # No similarity floor: each made word is what its one row is nearest to.
            response = run(database, cx, made.word, mode=mode, kinds=[spec.filter_kind], limit=50,
                           min_similarity=-1)  # fmt: skip
            assert made.target_id in ids(response), (spec.name, reason.name, mode)
        lexical = run(database, cx, made.word, mode="lexical", kinds=[spec.filter_kind])
        refs[made.word] = next(r.ref for r in lexical.rows if r.id == made.target_id)
    with database.pool.connection() as conn:
        for spec, reason, made in cases:
            _hide(conn, cx, spec, reason, made)
    for spec, reason, made in cases:
        case = (spec.name, reason.name)
        for mode in _modes(spec):
            response = run(database, cx, made.word, mode=mode, kinds=[spec.filter_kind], limit=50)
            assert made.target_id not in ids(response), (*case, mode)
        explained = run(
            database, cx, made.word, kinds=[spec.filter_kind], explain_target=refs[made.word]
        )
        assert explained.absent is not None, case
        filtered = [r for r in explained.absent["reasons"] if r.startswith("filtered:")]
        assert filtered == [f"filtered: {reason.label}"], case


def test_a_tag_filter_hides_by_the_legs_condition_and_explain_names_the_failing_filter(
    database: Database, cx: Context
) -> None:
    status = commands.create_tag(cx, "status", "text")
    size = commands.create_tag(cx, "size", "number")
    draft = commands.create_page(cx, "Draft")
    memo = commands.add_node(cx, draft.id, "the kestrel hovers", props={"memory": True})
    mail = commands.add_mail(cx, message_id="<k@x>", subject="kestrel", body_text="Seen.")
    commands.set_tag(cx, status.id, "page", draft.id, "Draft")
    commands.set_tag(cx, size.id, "page", draft.id, 3)
    commands.set_tag(cx, status.id, "mail", mail.id, "final")
    index(database, cx)
    tags = [TagFilter("status", "eq", "draft"), TagFilter("size", "gt", 5)]
    for mode in ("lexical", "vector"):
        assert memo.id not in ids(run(database, cx, "kestrel", mode=mode, tags=tags, limit=20)), (
            mode
        )
    explained = run(database, cx, "kestrel", tags=tags, explain_target=f"mem:{memo.id}")
    assert explained.absent is not None
    assert explained.absent["reasons"] == ["filtered: tag size gt 5.0"]
    for_mail = run(database, cx, "kestrel", tags=tags, explain_target=f"mail:{mail.id}")
    assert for_mail.absent is not None
    assert for_mail.absent["reasons"] == [
        "filtered: tag status eq draft",
        "filtered: tag size gt 5.0",
    ]

    # Each leg's list explains its memory rows too (a memory's hit counts as its node).
    rows = run(database, cx, "kestrel", explain=True).leg_rows["lexical"]
    assert {(r.type, r.id) for r in rows} == {("mem", memo.id), ("mail", mail.id)}
    assert all(r.explain is not None for r in rows)


def test_a_search_for_sources_explains_the_bullets_of_answer_runs_it_leaves_out(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Beta")
    source = commands.add_node(cx, page.id, "the beta ships on friday")
    asked = commands.add_node(cx, page.id, "/rag beta ships", props={"run": str(uuid4())})
    index(database, cx)
    sources = database.searcher(FakeProvider()).for_answers()

    def for_sources(**options: Any) -> SearchResponse:
        return search(cx, sources, SearchRequest(query="beta ships", **options))

    for mode in ("lexical", "vector"):
        assert asked.id in ids(run(database, cx, "beta ships", mode=mode))
        assert asked.id not in ids(for_sources(mode=mode)), mode
    explained = for_sources(explain_target=f"node:{asked.id}")
    assert explained.absent is not None
    assert explained.absent["reasons"] == [f"filtered: {ASKED_BY_RUN}"]
    shown = for_sources(explain_target=f"node:{source.id}")
    assert shown.absent is not None
    assert shown.absent["shown"]
    everyone = run(database, cx, "beta ships", limit=1, explain_target=f"node:{asked.id}")
    assert everyone.absent is not None
    assert not [r for r in everyone.absent["reasons"] if r.startswith("filtered:")]
