from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from subspace.indexer.chunking import (
    NodeText,
    file_chunks,
    mail_chunk,
    page_chunks,
    text_hash,
)
from subspace.splitting import split_text

NOW = datetime(2026, 11, 30, tzinfo=UTC)
KB, PAGE, A, B, C = (UUID(int=i) for i in range(1, 6))


def test_page_chunks_one_per_non_empty_node_and_the_title() -> None:
    nodes = [
        NodeText(A, "plain bullet", False, NOW),
        NodeText(B, "   ", False, NOW),
        NodeText(C, "remember the code", True, NOW),
    ]
    chunks = page_chunks(PAGE, KB, "Plan", NOW, nodes)
    assert [(c.ref, c.kind, c.item_id, c.target_id) for c in chunks] == [
        (f"page:{PAGE}", "page", PAGE, PAGE),
        (f"node:{A}", "node", PAGE, A),
        (f"node:{C}", "memory", PAGE, C),
    ]
    assert page_chunks(PAGE, KB, "", NOW, []) == []


def test_file_chunks_keep_their_numbers() -> None:
    chunks = file_chunks(A, KB, [(0, "first"), (1, " "), (2, "third")], NOW)
    assert [c.ref for c in chunks] == [f"file:{A}:0", f"file:{A}:2"]


def test_mail_chunk_joins_subject_and_body_and_caps_it() -> None:
    chunk = mail_chunk(A, KB, "Invoice", "Total due", "Total due: 40 EUR" + "x" * 9000, NOW)
    assert chunk is not None
    assert chunk.ref == f"mail:{A}"
    assert chunk.text.startswith("Invoice\nTotal due: 40 EUR")
    assert len(chunk.text) == 8000
    only_snippet = mail_chunk(A, KB, "", "short", "", NOW)
    assert only_snippet is not None
    assert only_snippet.text == "short"
    assert mail_chunk(A, KB, " ", "", "", NOW) is None


def test_split_text_on_paragraphs_then_sentences() -> None:
    paragraph = " ".join(f"Sentence number {i} is here." for i in range(100))
    text = "Short intro.\n\n" + paragraph + "\n\nClosing words."
    pieces = split_text(text)
    assert all(len(p) <= 1500 for p in pieces)
    assert all(len(p) >= 300 for p in pieces[:-1])
    assert pieces[0].startswith("Short intro.")
    assert all(p.rstrip().endswith(".") for p in pieces)  # cut between sentences
    assert "".join(pieces).replace("\n", "").replace(" ", "") == text.replace("\n", "").replace(
        " ", ""
    )
    assert split_text(text) == pieces  # stable


def test_a_sentence_without_boundaries_is_cut_at_words() -> None:
    pieces = split_text("word " * 2000)
    assert len(pieces) >= 9
    assert all(len(p) <= 1500 for p in pieces)
    assert split_text("") == []
    assert split_text(" \n\n ") == []


def test_text_hash_is_md5_of_utf8() -> None:
    assert text_hash("café") == "07117fe4a1ebd544965dc19573183da2"
