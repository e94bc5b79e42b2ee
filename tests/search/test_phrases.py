"""Quoted phrases mean phrases, in every mode: on real Rust book chapters, "fearless
concurrency" finds the chapter holding those words in that order, and nothing that holds
"concurrency" alone, whatever the vector leg finds near it."""

from __future__ import annotations

from pathlib import Path

import pytest

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.ingest.worker import extract_pending
from subspace.search.fusion import Fused
from subspace.search.phrases import identifiers_first
from subspace.search.query import parse_query
from tests.search_helpers import index, run

BOOK = Path(__file__).parents[1] / "relevance" / "real" / "workspace" / "files"
CHAPTERS = ("ch16-00-concurrency.html", "ch16-01-threads.html", "ch04-01-what-is-ownership.html",
            "ch14-02-publishing-to-crates-io.html")  # fmt: skip


@pytest.fixture
def book(database: Database, cx: Context) -> dict[str, object]:
    ids = {
        name: commands.upload_file(
            cx, name, (BOOK / name).read_bytes(), content_type="text/html"
        ).id
        for name in CHAPTERS
    }
    page = commands.create_page(cx, "Reading notes")
    commands.add_node(cx, page.id, "Concurrency in Rust is fearless, the book says.")
    extract_pending(database, cx.settings)
    index(database, cx)
    return dict(ids)


def test_a_quoted_phrase_is_parsed_as_one_that_limits_the_rows() -> None:
    assert parse_query('"fearless concurrency" rust').quoted == ("fearless concurrency",)
    assert parse_query('"fearless concurrency" OR threads').quoted == ()  # an OR limits nothing
    assert parse_query('"single"').quoted == ()
    assert parse_query("fearless concurrency").quoted == ()


@pytest.mark.parametrize("mode", ["hybrid", "vector", "lexical"])
def test_every_row_holds_the_phrase_in_every_mode(
    book: dict[str, object], database: Database, cx: Context, mode: str
) -> None:
    # No floor: the fake provider's trigram vectors put a long chapter far from two words.
    quoted = run(database, cx, '"fearless concurrency"', mode=mode, min_similarity=0.0)
    assert [row.id for row in quoted.rows] == [book["ch16-00-concurrency.html"]], [
        (r.type, r.title, r.passage[:80]) for r in quoted.rows
    ]
    loose = run(database, cx, "fearless concurrency", mode=mode, min_similarity=0.0)
    assert len(loose.rows) > 1  # without quotes the words apart count too


def test_a_phrase_no_item_holds_says_so(book: dict[str, object], database: Database,
                                        cx: Context) -> None:  # fmt: skip
    # Near enough by meaning to be shown (no floor), but holding the words apart.
    response = run(database, cx, '"fearless threads"', mode="vector", min_similarity=0.0)
    assert response.rows == []
    (note,) = response.notes
    assert note.startswith("No item holds “fearless threads” word for word;")


def test_gibberish_finds_nothing_and_a_real_typo_is_still_corrected(
    book: dict[str, object], database: Database, cx: Context
) -> None:
    """A correction is applied only when every word no document holds has one."""
    typo = run(database, cx, "ownrship", mode="lexical")
    assert typo.corrections == {"ownrship": "ownership"}
    assert [row.id for row in typo.rows][:1] == [book["ch04-01-what-is-ownership.html"]]
    for gibberish, said in (
        ("zqxwv ownrship", "“zqxwv” is like"),
        ("zqxwv flurbo", "“zqxwv” and “flurbo” are like"),
    ):
        response = run(database, cx, gibberish, mode="lexical")
        assert (response.rows, response.corrections) == ([], {}), gibberish
        (note,) = response.notes
        assert f"{said} no word here, so no spelling was corrected" in note
    # A word too short to correct ("hte") does not stop the others being corrected.
    typed = run(database, cx, "hte ownrship", mode="lexical")
    assert typed.corrections == {"ownrship": "ownership"}
    assert [row.id for row in typed.rows][:1] == [book["ch04-01-what-is-ownership.html"]]


OWNERSHIP_PASSAGE = (
    "Ownrship is a set of rules that govern how a Rust program manages memory. All programs "
    "have to manage the way they use a computer's memory while running. Some languages have "
    "garbage collection that regularly looks for no-longer-used memory as the program runs; "
    "in other languages, the programmer must explicitly allocate and free the memory."
)


def test_a_pasted_passage_is_searched_as_written(
    book: dict[str, object], database: Database, cx: Context
) -> None:
    """Forty words or more are a passage: its one unknown word is not corrected (looking
    for corrections of a long query's words cost most of its time), and its other words
    find the chapter it was copied from all the same."""
    assert parse_query(OWNERSHIP_PASSAGE).is_passage
    typed = run(database, cx, OWNERSHIP_PASSAGE.split(".")[0], mode="lexical")
    assert typed.corrections == {"Ownrship": "ownership"}
    pasted = run(database, cx, OWNERSHIP_PASSAGE, mode="lexical")
    assert pasted.corrections == {}
    assert [row.id for row in pasted.rows][:1] == [book["ch04-01-what-is-ownership.html"]]


def test_rows_holding_the_identifier_come_before_its_near_meanings(
    book: dict[str, object], database: Database, cx: Context
) -> None:
    """The issue's case: "E0382 borrow of moved value" put a release note ("Borrowed pointer
    functions moved…") above the chapter that prints error[E0382]."""
    page = commands.create_page(cx, "Release notes")
    # Near the query in words and meaning alike, but without the identifier.
    note = commands.add_node(cx, page.id, "Borrow of moved value")
    index(database, cx)
    assert parse_query("E0382 borrow of moved value").identifiers == ("E0382",)
    for mode in ("hybrid", "lexical"):
        rows = run(database, cx, "E0382 borrow of moved value", mode=mode, min_similarity=0.0).rows
        ids = [row.id for row in rows]
        assert ids[0] == book["ch04-01-what-is-ownership.html"], mode
        if note.id in ids:
            assert ids.index(note.id) > ids.index(book["ch04-01-what-is-ownership.html"])


def test_an_identifier_finds_the_longer_identifier_it_begins(
    database: Database, cx: Context
) -> None:
    """The query "draft-ietf-mboned-mix" found nothing by its words in the real set: the
    mail's subject holds "draft-ietf-mboned-mix-00.txt", which Postgres reads as one token (its
    parts are indexed after it), and the query asked for the hyphenated word whole."""
    page = commands.create_page(cx, "Drafts")
    draft = commands.add_node(cx, page.id, "I-D ACTION:draft-ietf-mboned-mix-00.txt")
    closure = commands.add_node(cx, page.id, "ffi_status ffi_prep_closure_loc (ffi_closure *)")
    commands.add_node(cx, page.id, "a mix of drafts from the ietf")
    index(database, cx)
    for query, wanted in (("draft-ietf-mboned-mix", draft), ("ffi_prep_closure", closure)):
        for mode in ("lexical", "hybrid"):
            rows = run(database, cx, query, mode=mode).rows
            assert rows and rows[0].id == wanted.id, (query, mode)
    lexical = run(database, cx, "draft-ietf-mboned-mix", mode="lexical").rows
    assert [row.id for row in lexical] == [draft.id]  # the loose words do not spell it


def test_identifiers_first_moves_the_rows_holding_the_identifier_whole_up(
    database: Database, cx: Context
) -> None:
    """Whatever the legs voted: a row holding only the identifier's parts ("CVE", "2022") or
    its meaning goes after every row holding it whole."""
    page = commands.create_page(cx, "Security notes")
    parts = commands.add_node(cx, page.id, "CVE-2022-0001 and CVE 2022 21658 in other words")
    whole = commands.add_node(cx, page.id, "Fixed CVE-2022-21658 in the file system walker")
    near = commands.add_node(cx, page.id, "A race in removing a directory tree")
    fused = [
        Fused(("node", i), 1.0 / n, {}) for n, i in enumerate((parts.id, near.id, whole.id), 1)
    ]
    with database.pool.connection() as conn:
        ordered = identifiers_first(conn, cx.actor.workspace_id, fused, ("CVE-2022-21658",))
    assert [f.target[1] for f in ordered] == [whole.id, parts.id, near.id]
