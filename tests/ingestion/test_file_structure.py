"""A file's structure reaches search: its own title names its rows, and each chunk carries the
headings above it (the passage's breadcrumb) and its page."""

from __future__ import annotations

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.ingest.worker import extract_pending
from subspace.splitting import Block, split_blocks
from tests.search_helpers import index, run

CHAPTER = b"""<html><head><title>Moorings - The Harbour Handbook</title></head><body>
<nav><h1>The Harbour Handbook</h1><a href="/">Home</a></nav>
<main><h1>Moorings</h1><p>Every berth is booked a day ahead.</p>
<h2>Winter berths</h2><p>From November the east pier is closed for dredging.</p>
<h3>Electricity</h3><p>Shore power costs four euros a night.</p></main></body></html>"""


def test_a_file_is_titled_by_its_document_and_its_chunks_by_their_headings(
    database: Database, cx: Context
) -> None:
    stored = commands.upload_file(cx, "ch03.html", CHAPTER, content_type="text/html")
    extract_pending(database, cx.settings)
    index(database, cx)
    rows = run(database, cx, "dredging", mode="lexical").rows
    assert [(r.type, r.id, r.title) for r in rows] == [("file", stored.id, "Moorings")]
    assert rows[0].breadcrumb == ["Moorings"]  # the chunk starts under the title's heading
    with database.pool.connection() as conn:
        chunks = conn.execute(
            "select text, headings, page from search.file_chunks where file_id = %s order by n",
            (stored.id,),
        ).fetchall()
    assert chunks[0]["headings"] == ["Moorings"]
    assert "Shore power" in chunks[0]["text"]  # a short document is one chunk
    listed = run(database, cx, "moorings", mode="lexical").rows
    assert listed[0].title == "Moorings"


def test_pieces_end_at_sections_and_carry_their_headings() -> None:
    para = "The east pier takes boats up to twelve metres in length. " * 6  # 342 characters
    blocks = [
        Block("Moorings", ("Moorings",), is_heading=True),
        Block(para, ("Moorings",)),
        Block("Winter", ("Moorings", "Winter"), is_heading=True),
        Block("Closed in November.", ("Moorings", "Winter")),
        Block("Fees", ("Fees",), is_heading=True),
        Block("Twenty euros.", ("Fees",), page=3),
    ]
    pieces = split_blocks(blocks, target=1000)
    # The first section is long enough to stand alone; the short second shares with the next.
    assert [(p.headings, p.text.split("\n\n")[0]) for p in pieces] == [
        (("Moorings",), "Moorings"),
        (("Moorings", "Winter"), "Winter"),
    ]
    assert pieces[1].text.endswith("Fees\n\nTwenty euros.")
    long = [Block("word " * 700, ("Long",), page=2)]
    cut = split_blocks(long, target=1000)
    assert len(cut) > 1
    assert {(p.headings, p.page) for p in cut} == {(("Long",), 2)}
