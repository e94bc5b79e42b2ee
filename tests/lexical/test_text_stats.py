"""The BM25 statistics kept by triggers always equal a recount from the tables."""

from __future__ import annotations

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.ingest.worker import extract_pending
from tests.search_helpers import source_documents_sql

RECOUNT = f"""
select source, lexeme, count(*)::bigint as ndoc from ({source_documents_sql()}) d
cross join lateral unnest(tsvector_to_array(d.tsv)) lexeme group by 1, 2 order by 1, 2
"""
LENGTHS = f"""
select source, count(*) filter (where len > 0)::bigint as ndocs, sum(len)::bigint as total
from ({source_documents_sql()}) d group by 1 order by 1
"""


def assert_stats_match(database: Database) -> None:
    with database.pool.connection() as conn:
        kept = conn.execute(
            "select source, lexeme, ndoc from search.term_stats where ndoc > 0 order by 1, 2"
        ).fetchall()
        assert kept == conn.execute(RECOUNT).fetchall()
        sources = conn.execute(
            "select source, ndocs, total_len as total from search.source_stats "
            "where ndocs > 0 or total_len > 0 order by 1"
        ).fetchall()
        assert sources == [r for r in conn.execute(LENGTHS).fetchall() if r["total"]]


def test_stats_follow_every_kind_of_write(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Ferry timetable")
    a = commands.add_node(cx, page.id, "The ferry leaves at nine, the ferry returns at noon")
    b = commands.add_node(cx, page.id, "Buy tickets at the pier")
    commands.add_node(cx, page.id, "Pier cafe", position=0)  # shifts the others' positions
    commands.upload_file(cx, "notes.txt", b"Ferry notes for the pier")
    commands.add_mail(cx, message_id="<s@x>", subject="Ferry", body_text="Pier at nine")
    extract_pending(database, cx.settings)
    assert_stats_match(database)
    with database.pool.connection() as conn:
        ferry = conn.execute(
            "select ndoc from search.term_stats where source = 'node' and lexeme = 'ferri'"
        ).fetchone()
        node = conn.execute(
            "select ndocs, total_len from search.source_stats where source = 'node'"
        ).fetchone()
    assert ferry == {"ndoc": 1}
    assert node == {"ndocs": 3, "total_len": 6 + 3 + 2}
    commands.edit_node(cx, b.id, "Tickets sold out")
    commands.rename_page(cx, page.id, "Boat timetable")
    commands.delete_node(cx, a.id)
    assert_stats_match(database)
