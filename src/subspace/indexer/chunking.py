"""Turning pages, file text and mail into the chunks that get embedded. Pure: no I/O.

Refs name a chunk for its whole life: `node:<id>`, `page:<id>`, `file:<id>:<n>`, `mail:<id>`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

MAIL_CHUNK_CHARS = 8_000  # subject, snippet and the start of the body


@dataclass(frozen=True)
class Chunk:
    """One piece of text to embed, and where search results will point."""

    ref: str
    kind: str  # page, node, memory, file or mail
    kb_id: UUID
    item_id: UUID  # the page, file or mail the chunk belongs to
    target_id: UUID  # what a result shows: the node, page, file or mail
    text: str
    source_at: datetime  # when the source text last changed; older never overwrites newer

    @property
    def text_hash(self) -> str:
        return text_hash(self.text)


def text_hash(text: str) -> str:
    """md5 of the text: decides whether an embedding is still current."""
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class NodeText:
    id: UUID
    text: str
    is_memory: bool
    updated_at: datetime


def page_chunks(
    page_id: UUID, kb_id: UUID, title: str, updated_at: datetime, nodes: Iterable[NodeText]
) -> list[Chunk]:
    """One chunk for the title (if any) and one per non-empty node."""
    chunks = []
    if title.strip():
        chunks.append(Chunk(f"page:{page_id}", "page", kb_id, page_id, page_id, title, updated_at))
    for node in nodes:
        if node.text.strip():
            kind = "memory" if node.is_memory else "node"
            chunks.append(
                Chunk(f"node:{node.id}", kind, kb_id, page_id, node.id, node.text, node.updated_at)
            )
    return chunks


def file_chunks(
    file_id: UUID, kb_id: UUID, pieces: Iterable[tuple[int, str]], extracted_at: datetime
) -> list[Chunk]:
    """One chunk per stored piece of the file's text (see `split_text`)."""
    return [
        Chunk(f"file:{file_id}:{n}", "file", kb_id, file_id, file_id, text, extracted_at)
        for n, text in pieces
        if text.strip()
    ]


def mail_chunk(
    mail_id: UUID, kb_id: UUID, subject: str, snippet: str, body: str, updated_at: datetime
) -> Chunk | None:
    """Subject, snippet and body as one chunk, capped; None for an empty message.

    The snippet is the start of the body, so it is only used when there is no body.
    """
    text = "\n".join(p for p in (subject.strip(), body.strip() or snippet.strip()) if p)
    if not text:
        return None
    return Chunk(
        f"mail:{mail_id}", "mail", kb_id, mail_id, mail_id, text[:MAIL_CHUNK_CHARS], updated_at
    )
