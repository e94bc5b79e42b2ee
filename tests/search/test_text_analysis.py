"""Text analysis of the lexical leg: accents folded, identifier parts, CJK bigrams, highlights.

Every case searches through the real `search()` in lexical mode with typo tolerance off, so
what finds the document is the analysis, not the vector leg or a typo correction.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg.rows import dict_row

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.db.migrate import available_migrations, migrate
from subspace.ingest.worker import extract_pending
from subspace.search.analysis import CJK, FOLD_FROM, FOLD_MULTI, fold, fold_with_offsets
from subspace.search.hydrate import SHORT_TEXT, _identifiers, unfold_headline
from tests.search_helpers import ids, run, source_documents_sql


@dataclass(frozen=True)
class Case:
    text: str  # what the document says
    query: str  # what a person types to find it


CASES = (
    # accents, both ways
    Case("Send me your résumé before Friday", "resume"),
    Case("Meet at the café on the corner", "cafe"),
    Case("A naïve approach to cache invalidation", "naive"),
    Case("Coffee at the cafe downstairs", "café"),
    Case("Die Straße am Hafen ist gesperrt", "strasse"),
    Case("Smørrebrød og øl til frokost", "smorrebrod"),
    Case("The Łódź office opens in March", "lodz"),
    Case("Cre\u0301me bru\u0302le\u0301e for dessert", "crème brûlée"),  # decomposed text
    # parts of identifiers the parser keeps whole
    Case("Deploy blocked by PROJ-1234 again", "1234"),
    Case("Upgrade the agent to v1.2.3 tonight", "v1"),
    Case("Roll back to v4.5.6 if it fails", "4.5.6"),
    Case("Access denied, see logs/0x80070005.txt", "0x80070005"),
    Case("The cache at foo.bar.com is stale", "foo"),
    Case("Write to grace@example.org for access", "grace"),
    Case("Renamed snake_case_name.py to match", "snake"),
    # Chinese, Japanese and Korean by their words
    Case("今天的会议记录已经上传", "会议"),
    Case("请把季度报告发给我", "季度报告"),
    Case("東京で新しいプロジェクトの説明会を開きます", "説明会"),
    Case("내일 회의록을 공유하겠습니다", "회의록"),
)


def _assert_found(database: Database, cx: Context, targets: dict[int, UUID]) -> None:
    missed = []
    for i, case in enumerate(CASES):
        response = run(database, cx, case.query, mode="lexical", typos=False)
        if targets[i] not in ids(response):
            missed.append(f"{case.query!r} did not find {case.text!r}")
    assert missed == []


def test_cases_in_bullets(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Notes")
    targets = {i: commands.add_node(cx, page.id, case.text).id for i, case in enumerate(CASES)}
    _assert_found(database, cx, targets)


def test_cases_in_titles(database: Database, cx: Context) -> None:
    targets = {i: commands.create_page(cx, case.text).id for i, case in enumerate(CASES)}
    _assert_found(database, cx, targets)


def test_cases_in_file_chunks(database: Database, cx: Context) -> None:
    targets = {
        i: commands.upload_file(cx, f"case{i}.txt", case.text.encode()).id
        for i, case in enumerate(CASES)
    }
    extract_pending(database, cx.settings)
    _assert_found(database, cx, targets)


def test_cases_in_mail(database: Database, cx: Context) -> None:
    targets = {
        i: commands.add_mail(cx, message_id=f"<case{i}@x>", subject=f"Note {i}",
                             body_text=case.text).id
        for i, case in enumerate(CASES)
    }  # fmt: skip
    _assert_found(database, cx, targets)


def test_mail_subject_and_sender_are_analysed(database: Database, cx: Context) -> None:
    mail = commands.add_mail(
        cx,
        message_id="<s@x>",
        subject="Réunion du comité",
        sender="Zoë Brontë <zoe.bronte@example.net>",
        body_text="ok",
    )
    for query in ("reunion comite", "zoe", "bronte", "example.net"):
        assert ids(run(database, cx, query, mode="lexical", typos=False)) == [mail.id], query


@pytest.mark.parametrize(
    ("exact", "look_alikes", "queries"),
    [
        ("PROJ-1234", ["PROJ-12345", "PROJ-1235", "PROJ-123", "PRJ-1234"], ["PROJ-1234"]),
        ("v1.2.3", ["v1.2.30", "v1.2.4", "v2.1.3", "v11.2.3"], ["v1.2.3", "1.2.3"]),
        ("build.eu.example.com", ["build.us.example.com", "build.eu.example.co"],
         ["build.eu.example.com"]),
        ("ops@example.com", ["ops@example.co", "dev@example.com"], ["ops@example.com"]),
    ],
)  # fmt: skip
def test_the_exact_identifier_ranks_above_its_look_alikes(
    database: Database, cx: Context, exact: str, look_alikes: list[str], queries: list[str]
) -> None:
    page = commands.create_page(cx, "Tickets")
    for token in look_alikes:
        commands.add_node(cx, page.id, f"{token} was closed")
    target = commands.add_node(cx, page.id, f"{exact} was closed")
    for query in queries:
        response = run(database, cx, query, mode="lexical", typos=False)
        assert ids(response)[0] == target.id, query


def test_typo_correction_reads_the_folded_vocabulary(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Hiring")
    target = commands.add_node(cx, page.id, "Résumé templates for the new hires")
    assert ids(run(database, cx, "reusme", mode="lexical")) == [target.id]  # reusm -> resum


def test_a_part_does_not_find_a_longer_number(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Tickets")
    target = commands.add_node(cx, page.id, "PROJ-1234 was closed")
    commands.add_node(cx, page.id, "PROJ-12345 was closed")
    assert ids(run(database, cx, "1234", mode="lexical", typos=False)) == [target.id]


def test_a_cjk_phrase_needs_its_bigrams_in_order(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "会议")
    target = commands.add_node(cx, page.id, "会议记录")
    commands.add_node(cx, page.id, "记录会议")  # the same characters, other words
    assert ids(run(database, cx, "会议记录", mode="lexical", typos=False)) == [target.id]


def _highlighted(row: Any) -> list[str]:
    return [row.passage[a:b] for a, b in row.highlights]


@pytest.mark.parametrize(
    ("text", "query", "shown"),
    [
        ("Send me your résumé before Friday", "resume", ["résumé"]),
        ("Coffee at the cafe downstairs", "café", ["cafe"]),
        ("Die Straße am Hafen, Øresund", "strasse oresund", ["Straße", "Øresund"]),
        ("Cre\u0301me bru\u0302le\u0301e", "creme", ["Cre\u0301me"]),
        ("今天的会议记录已经上传", "会议记录", ["会议记录"]),
        ("今天的会议 记录", "会议", ["会议"]),
        ("Deploy blocked by PROJ-1234 again", "1234", ["1234"]),
        ("Mail grace@example.org now", "grace", ["grace"]),
        # ts_headline drops what looks like a tag; the passage keeps a synopsis's placeholders
        (
            "npm access list packages [<user>|<scope>] [<package>]",
            "packages",
            ["packages", "package"],
        ),
        ("Set it to <implementations-keywords>, then run make", "run", ["run"]),
    ],
)
def test_highlights_point_at_the_original_words(
    database: Database, cx: Context, text: str, query: str, shown: list[str]
) -> None:
    page = commands.create_page(cx, "Highlights")
    commands.add_node(cx, page.id, text)
    row = run(database, cx, query, mode="lexical", typos=False).rows[0]
    assert row.passage == text
    assert _highlighted(row) == shown


def test_highlights_in_a_long_text_are_cut_from_the_original(
    database: Database, cx: Context
) -> None:
    rng = random.Random(3)
    words = "harbour ledger quartz meadow copper lantern willow signal orbit canyon".split()
    before = " ".join(rng.choice(words) for _ in range(80))
    after = " ".join(rng.choice(words) for _ in range(80))
    text = f"{before} Ærøskøbing café, 東京の説明会\nnext line {after}"
    assert len(text) > SHORT_TEXT
    page = commands.create_page(cx, "Long")
    commands.add_node(cx, page.id, text)
    row = run(database, cx, "aeroskobing cafe 説明会", mode="lexical", typos=False).rows[0]
    assert row.passage != text
    assert "Ærøskøbing café, 東京の説明会" in row.passage
    for fragment in row.passage.split(" … "):
        assert fragment in text
    assert _highlighted(row) == ["Ærøskøbing", "café", "説明会"]


def test_a_long_text_and_a_title_keep_their_angle_brackets(database: Database, cx: Context) -> None:
    filler = " ".join(["The registry keeps every version it was given."] * 12)
    text = f"{filler} Synopsis: npm access list packages [<user>|<scope>] [<package>]. {filler}"
    assert len(text) > SHORT_TEXT
    page = commands.create_page(cx, "The <access> command")
    commands.add_node(cx, page.id, text)
    row = run(database, cx, "synopsis", mode="lexical", typos=False).rows[0]
    assert "Synopsis: npm access list packages [<user>|<scope>] [<package>]." in row.passage
    assert _highlighted(row) == ["Synopsis"]
    titled = run(database, cx, "command", mode="lexical", kinds=["page"], typos=False).rows[0]
    assert titled.title == "The <access> command"
    assert [titled.title[a:b] for a, b in titled.title_highlights] == ["command"]


def test_identifier_parts_are_highlighted_for_the_lexemes_handed_over() -> None:
    # the lexical leg hands its lexemes over; nothing is read back out of the tsquery's text
    text = "Deploy blocked by PROJ-1234 again"
    shown, spans = unfold_headline(text, text, ["1234"])
    assert [shown[a:b] for a, b in spans] == ["1234"]
    assert unfold_headline(text, text, ["proj"])[1] == [(18, 22)]
    assert unfold_headline(text, text, ())[1] == []


def test_unfold_headline_keeps_an_unfound_fragment_as_printed() -> None:
    # ts_headline prints an XML tag as a space, so that fragment is not in the text
    text, spans = unfold_headline("a <b>café</b> z", "a  \ue000cafe\ue001  z")
    assert (text, [text[a:b] for a, b in spans]) == ("a  cafe  z", ["cafe"])


@pytest.mark.parametrize(
    "text",
    [
        "会",
        "会议",
        "会议记录",
        "x会 议y",
        "Maße 会议记录 ß 한국어",
        "e\u0301会议",
        "PROJ-1234 v1.2",
    ],
)
def test_every_folded_word_maps_back_to_its_original_characters(text: str) -> None:
    folded = fold_with_offsets(text)
    for word in folded.text.split():
        at = folded.text.index(word)
        start, end = folded.original_span(at, at + len(word))
        assert fold(text[start:end]).strip() == word, (word, text[start:end])
    assert folded.original_span(0, len(folded.text)) == (0, len(text))


def test_identifiers_are_the_runs_the_regular_expression_finds() -> None:
    # The definition: a run of non-space holding two letters or digits joined by a joiner.
    expression = re.compile(r"\S*[^\W_][-./@:_\\][^\W_]\S*")
    rng = random.Random(7)
    alphabet = "ab1_-./@:\\ \t\né会 xY9"
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        found = [(m.start(), m.group()) for m in expression.finditer(text)]
        assert _identifiers(text) == found, text


def test_the_sql_fold_and_its_python_mirror_agree(database: Database) -> None:
    rng = random.Random(5)
    han = "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(50))
    samples = [
        FOLD_FROM,
        "".join(FOLD_MULTI),
        " ".join(FOLD_FROM + "".join(FOLD_MULTI)),
        "e\u0301te\u0300 x\u0327",
        f"a{han}b {han[:1]} {han[:2]}, {han[:3]}。",
        "ひらがな カタカナ ﾊﾝｶｸ 한국어 ᄀᄁ ㄱㄲ 丽 \U00020000\U00020001 \U0002fa1d",
        "ASCII only, PROJ-1234 v1.2.3 user@example.com",
        "",
    ]
    samples.append(CJK.replace("-", ""))  # the edges of every CJK range
    # every letter of the Latin blocks and every combining mark, whatever the tables say
    for first, last in ((0xC0, 0x24F), (0x1E00, 0x1EFF), (0x300, 0x36F)):
        samples.append(" ".join(f"a{chr(c)}b" for c in range(first, last + 1)))
    with database.pool.connection() as conn:
        rows = conn.execute(
            "select search.fold(t) as f from unnest(%s::text[]) with ordinality u(t, i) order by i",
            (samples,),
        ).fetchall()
    assert [r["f"] for r in rows] == [fold(s) for s in samples]


def test_no_text_is_too_long_to_index(database: Database) -> None:
    """The longest bullet of CJK or of identifiers still fits in a tsvector."""
    rng = random.Random(7)
    cjk = "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(100_000))
    hosts = " ".join(f"a{i}.b{i % 97}.c{i % 89}.example.com" for i in range(5_000))[:100_000]
    with database.pool.connection() as conn:
        for text in (cjk, hosts):
            size = conn.execute(
                "select pg_column_size(search.document_tsvector(left(%s, 100000))) as n", (text,)
            ).fetchone()
            assert size is not None
            assert 0 < size["n"] < 1_000_000


# What the triggers keep against a count from the tsvector columns, both ways; and some
# lexemes only the analysis produces.
STATS_CHECK = """
with kept_terms as (
    select workspace_id, source, lexeme, ndoc from search.term_stats where ndoc <> 0
), counted_terms as (
    select workspace_id, source, lexeme, count(*) as ndoc from (DOCUMENTS) d
    cross join lateral unnest(tsvector_to_array(d.tsv)) u(lexeme) group by 1, 2, 3
), kept_lengths as (
    select workspace_id, source, ndocs, total_len from search.source_stats where ndocs <> 0
), counted_lengths as (
    select workspace_id, source, count(*) filter (where len > 0) as ndocs, sum(len) as total_len
    from (DOCUMENTS) d group by 1, 2
)
select
    (select count(*) from ((table kept_terms except table counted_terms)
        union all (table counted_terms except table kept_terms)) x) as stale_terms,
    (select count(*) from ((table kept_lengths except table counted_lengths)
        union all (table counted_lengths except table kept_lengths)) y) as stale_lengths,
    (select count(*) from kb.nodes where text_len <> search.lexeme_count(text_tsv))
        + (select count(*) from kb.mail where mail_len <> search.lexeme_count(mail_tsv))
        as wrong_lengths,
    (select array_agg(distinct lexeme order by lexeme) from search.term_stats
     where ndoc > 0 and lexeme in ('resum', '1234', '会议', 'v1', 'cafe')) as lexemes
""".replace("DOCUMENTS", source_documents_sql())


def test_migration_reindexes_stored_text_and_recounts_the_statistics(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("create extension if not exists vector")
        conn.execute(
            "create table public.schema_migrations (version integer primary key,"
            " name text not null, applied_at timestamptz not null default now())"
        )
        for migration in available_migrations():
            if migration.version < 9:
                conn.execute(migration.sql)
                conn.execute(
                    "insert into public.schema_migrations (version, name) values (%s, %s)",
                    (migration.version, migration.name),
                )
        conn.execute(
            "with kb as (select workspace_id, id from kb.knowledge_bases), "
            "page as (insert into kb.pages (workspace_id, kb_id, title) "
            "  select workspace_id, id, 'Mon résumé' from kb returning workspace_id, id) "
            "insert into kb.nodes (workspace_id, page_id, position, text) "
            "select workspace_id, id, 0, 'PROJ-1234 会议记录 v1.2.3 café' from page"
        )
        conn.execute(
            "insert into kb.blobs (workspace_id, sha256, size, data) "
            "select workspace_id, 'x', 1, 'x' from kb.workspaces"
        )
        conn.execute(
            "insert into kb.mail (workspace_id, kb_id, message_id, subject, raw_sha256, "
            "body_text) select workspace_id, id, '<m@x>', 'Café', 'x', 'PROJ-1234' "
            "from kb.knowledge_bases"
        )
        before = conn.execute(
            "select count(*) as n from search.term_stats where ndoc > 0 "
            "and lexeme in ('resum', '1234', '会议', 'v1', 'cafe')"
        ).fetchone()
        assert before == {"n": 0}  # nothing folded yet
    applied = migrate(empty_dsn)
    assert 9 in [m.version for m in applied]
    with psycopg.connect(empty_dsn, row_factory=dict_row) as conn:
        after = conn.execute(STATS_CHECK).fetchone()
    assert after == {
        "stale_terms": 0,
        "stale_lengths": 0,
        "wrong_lengths": 0,
        "lexemes": ["1234", "cafe", "resum", "v1", "会议"],
    }


def test_statistics_follow_writes_of_analysed_text(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Résumé")
    node = commands.add_node(cx, page.id, "PROJ-1234 会议记录 v1.2.3 café")
    commands.add_mail(cx, message_id="<w@x>", subject="Café", body_text="PROJ-1234")
    commands.upload_file(cx, "a.txt", "會議 café résumé".encode())
    extract_pending(database, cx.settings)
    commands.edit_node(cx, node.id, "PROJ-1234 v1.2.3 only")
    with database.pool.connection() as conn:
        check = conn.execute(STATS_CHECK).fetchone()
    assert check is not None
    assert (check["stale_terms"], check["stale_lengths"], check["wrong_lengths"]) == (0, 0, 0)
    assert check["lexemes"] == ["1234", "cafe", "resum", "v1"]  # 会议 left with the edit


def test_a_bullet_is_searched_by_the_words_its_markdown_shows(
    database: Database, cx: Context
) -> None:
    """A link is its text; its URL is a word only when the link has no text. A row's passage
    reads as the bullet shows, and its highlights are offsets into that passage."""
    page = commands.create_page(cx, "Links")
    guide = commands.add_node(cx, page.id, "Read [the ferry guide](https://github.com/port/x).")
    bare = commands.add_node(cx, page.id, "Mirror: [](https://mirror.example.org/dl)")
    image = commands.add_node(cx, page.id, "![harbour map](https://img.example.org/lighthouse.png)")

    def found(query: str) -> list[Any]:
        return ids(run(database, cx, query, mode="lexical", typos=False))

    assert found("ferry guide") == [guide.id]
    assert found("github") == []
    assert found("lighthouse") == []
    assert found("harbour map") == [image.id]
    assert found("mirror.example.org") == [bare.id]
    (row,) = run(database, cx, "ferry", mode="lexical", typos=False).rows
    # The passage reads as the bullet shows: the link as its text; highlights are offsets in it.
    assert row.passage == "Read the ferry guide."
    start, end = row.highlights[0]
    assert row.passage[start:end] == "ferry"
    code = commands.add_node(cx, page.id, "```sh\ncargo publish --dry-run\n```")
    (row,) = run(database, cx, "cargo", mode="lexical", typos=False).rows
    assert (row.id, row.passage.strip()) == (code.id, "cargo publish --dry-run")
