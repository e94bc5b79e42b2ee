"""The impact-ordered postings kept by triggers always equal a recomputation from the tables."""

from __future__ import annotations

import math
from typing import Any

from subspace import commands
from subspace.commands.knowledge_bases import create_knowledge_base
from subspace.context import Context
from subspace.indexer.impacts import refresh_drifted_impacts
from subspace.indexer.reindex import reextract_files
from subspace.ingest.worker import extract_pending
from subspace.runtime import Database
from subspace.search.kinds import is_memory
from subspace.search.lexical import BM25_B, BM25_K1

DOCUMENTS = f"""
select 'page' as source, 'page' as kind, workspace_id, id as doc_id, 0 as part, title_tsv as tsv,
       title_len as len
from kb.pages
union all select 'node', case when {is_memory("n")} then 'memory' else 'node' end, workspace_id,
                 id, 0, text_tsv, text_len from kb.nodes n
union all select 'file', 'file', workspace_id, file_id, n, text_tsv, text_len
          from search.file_chunks
union all select 'mail', 'mail', workspace_id, id, 0, mail_tsv, mail_len from kb.mail
union all select 'file_name', 'file_name', workspace_id, id, 0, name_tsv, name_len from kb.files
union all select 'mail_subject', 'mail_subject', workspace_id, id, 0, subject_tsv, subject_len
          from kb.mail
"""
RECOMPUTED = f"""
select d.source, d.kind, t.lexeme, d.doc_id, d.part,
       coalesce(array_length(t.positions, 1), 1) as tf, d.len, b.avgdl
from ({DOCUMENTS}) d
join search.impact_basis b on b.workspace_id = d.workspace_id and b.source = d.source
cross join lateral unnest(d.tsv) t
order by 1, 3, 4, 5
"""
KEPT = """
select source, kind, lexeme, doc_id, part, tf, len, impact from search.postings
order by 1, 3, 4, 5
"""


def impact(tf: int, length: int, avgdl: float) -> float:
    """The BM25 term-frequency part, as lexical.py scores it."""
    return tf / (tf + BM25_K1 * (1 - BM25_B + BM25_B * length / avgdl))


def assert_postings_match(database: Database) -> list[dict[str, Any]]:
    """Every stored text has exactly its postings, each with the impact its basis gives."""
    with database.pool.connection() as conn:
        kept = conn.execute(KEPT).fetchall()
        expected = conn.execute(RECOMPUTED).fetchall()
    columns = ("source", "kind", "lexeme", "doc_id", "part", "tf", "len")
    assert [tuple(r[c] for c in columns) for r in kept] == [
        tuple(r[c] for c in columns) for r in expected
    ]
    for row, want in zip(kept, expected, strict=True):
        assert math.isclose(
            row["impact"], impact(want["tf"], want["len"], want["avgdl"]), rel_tol=1e-6
        )
    return kept


def lexemes_of(rows: list[dict[str, Any]], doc_id: Any) -> set[str]:
    """The lexemes of a document's text (a file's chunks, not its name)."""
    return {r["lexeme"] for r in rows if r["doc_id"] == doc_id and r["source"] != "file_name"}


def test_postings_follow_every_kind_of_write(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Ferry timetable")
    a = commands.add_node(cx, page.id, "The ferry leaves at nine, the ferry returns at noon")
    b = commands.add_node(cx, page.id, "Buy tickets at the pier")
    commands.add_node(cx, page.id, "Pier cafe", position=0)  # shifts the others: text unchanged
    file = commands.upload_file(cx, "notes.txt", b"Ferry notes for the pier")
    mail = commands.add_mail(cx, message_id="<s@x>", subject="Ferry", body_text="Pier at nine")
    extract_pending(database, cx.settings)
    rows = assert_postings_match(database)
    ferry = [r for r in rows if r["doc_id"] == a.id and r["lexeme"] == "ferri"]
    assert [(r["tf"], r["len"]) for r in ferry] == [(2, 6)]
    assert lexemes_of(rows, file.id) == {"ferri", "note", "pier"}
    assert "nine" in lexemes_of(rows, mail.id)

    commands.edit_node(cx, b.id, "Tickets sold out")
    commands.rename_page(cx, page.id, "Boat timetable")
    rows = assert_postings_match(database)
    assert lexemes_of(rows, b.id) == {"ticket", "sold"} and "boat" in lexemes_of(rows, page.id)

    # A move to another base, archive, restore and delete keep the postings of what stays
    # stored: visibility is checked when reading, so the lists never need rewriting for it.
    other = create_knowledge_base(cx, "Elsewhere")
    with database.pool.connection() as conn:
        conn.execute("update kb.pages set kb_id = %s where id = %s", (other.id, page.id))
    commands.archive_page(cx, page.id)
    commands.archive_file(cx, file.id)
    commands.restore_page(cx, page.id)
    commands.restore_file(cx, file.id)
    assert_postings_match(database)

    commands.delete_node(cx, a.id)
    commands.delete_mail(cx, mail.id)
    with database.pool.connection() as conn:
        conn.execute("delete from kb.mail where id = %s", (mail.id,))
        conn.execute("delete from kb.files where id = %s", (file.id,))  # cascades to chunks
    rows = assert_postings_match(database)
    assert not lexemes_of(rows, a.id) and not lexemes_of(rows, mail.id)
    assert not lexemes_of(rows, file.id)


def test_unchanged_text_keeps_its_postings(database: Database, cx: Context) -> None:
    """An update that leaves the text and kind alone (a move) rewrites nothing; a bullet
    made a memory moves to the memory lists."""
    page = commands.create_page(cx, "Harbour")
    node = commands.add_node(cx, page.id, "Ferries dock at the harbour")
    query = "select ctid::text as at, kind from search.postings where doc_id = %s order by lexeme"
    with database.pool.connection() as conn:
        before = conn.execute(query, (node.id,)).fetchall()
    commands.add_node(cx, page.id, "Second bullet", position=0)  # shifts the first one down
    with database.pool.connection() as conn:
        moved = conn.execute(query, (node.id,)).fetchall()
    commands.set_memory(cx, node.id, True)
    with database.pool.connection() as conn:
        remembered = conn.execute(query, (node.id,)).fetchall()
    assert before == moved and {r["kind"] for r in before} == {"node"}
    assert {r["kind"] for r in remembered} == {"memory"} and len(remembered) == len(before)
    assert_postings_match(database)


def test_reindexing_rebuilds_the_same_postings(database: Database, cx: Context) -> None:
    file = commands.upload_file(cx, "a.txt", b"Lighthouse keeper logbook")
    extract_pending(database, cx.settings)
    before = assert_postings_match(database)
    reextract_files(database, cx.settings, None, lambda _: None)
    after = assert_postings_match(database)
    assert lexemes_of(after, file.id) == {"lighthous", "keeper", "logbook"}
    assert [r | {"impact": 0} for r in after] == [r | {"impact": 0} for r in before]


def test_refreshing_the_basis_rewrites_impacts_with_the_current_average(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Tides")
    commands.add_node(cx, page.id, "Tide")
    for text in ["High tide at dawn over the long western sandbar"] * 3:
        commands.add_node(cx, page.id, text)
    with database.pool.connection() as conn:
        basis = conn.execute(
            "select avgdl from search.impact_basis where source = 'node'"
        ).fetchone()
        average = conn.execute(
            "select total_len::float8 / ndocs as a from search.source_stats where source = 'node'"
        ).fetchone()
        assert basis == {"avgdl": 1.0}  # the first bullet's length
        conn.execute("select search.refresh_impacts(%s, 'node')", (cx.actor.workspace_id,))
        refreshed = conn.execute(
            "select avgdl from search.impact_basis where source = 'node'"
        ).fetchone()
    assert refreshed == {"avgdl": average["a"]}
    assert_postings_match(database)


def test_the_indexer_refreshes_a_basis_the_collection_has_drifted_from(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Sandbar")
    commands.add_node(cx, page.id, "Sand")
    with database.pool.connection() as conn:
        assert refresh_drifted_impacts(conn) == []  # one bullet: its own length is the basis
    commands.add_node(cx, page.id, "Sand shifts with every tide")  # average 1 -> 2.5
    with database.pool.connection() as conn:
        assert refresh_drifted_impacts(conn, drift=3.0) == []
        assert refresh_drifted_impacts(conn) == [(cx.actor.workspace_id, "node")]
        basis = conn.execute(
            "select avgdl from search.impact_basis where source = 'node'"
        ).fetchone()
        assert refresh_drifted_impacts(conn) == []
    assert basis == {"avgdl": 2.5}
    assert_postings_match(database)
