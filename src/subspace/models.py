"""The rows Subspace hands back to callers of the Python API and the HTTP API."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

FileStatus = Literal["processing", "ready", "failed"]
TagType = Literal["text", "number", "date", "boolean"]
ItemKind = Literal["page", "file", "mail"]  # what tags and exclusions apply to


@dataclass(frozen=True)
class Actor:
    """Who is acting: every read and write is scoped to this workspace."""

    workspace_id: UUID
    user_id: UUID


@dataclass
class KnowledgeBase:
    id: UUID
    name: str
    is_default: bool
    created_at: datetime


@dataclass
class KnowledgeBaseOverview:
    """What a knowledge base holds, as the start view shows it: live pages, files and mail (not
    archived or deleted), the workspace's items still waiting for their embeddings, and while
    the workspace's texts lack vectors of the active model (a new model), how far they are."""

    pages: int
    files: int
    mail: int
    pending_embeddings: int
    embedding_progress: str = ""  # EmbeddingProgress.line of the workspace


@dataclass
class Node:
    """A bullet: one line of a page's outline, or a memory item."""

    id: UUID
    page_id: UUID
    parent_id: UUID | None
    position: int
    text: str
    props: dict[str, Any]
    created_at: datetime
    updated_at: datetime

    @property
    def is_memory(self) -> bool:
        """A node is a memory item when its `memory` prop is true."""
        return self.props.get("memory") is True


@dataclass
class TreeNode(Node):
    """A bullet with the bullets under it, in outline order: a page's tree is made of these."""

    children: list[TreeNode] = field(default_factory=list)


@dataclass
class PageSummary:
    """A page without its bullets. `version` counts the writes to the page and its bullets:
    send it back as `base_version` to have a write refused (409 `stale_page`) when another came
    first."""

    id: UUID
    kb_id: UUID
    title: str
    archived_at: datetime | None
    deleted_at: datetime | None
    created_at: datetime
    updated_at: datetime
    version: int
    # Where an imported page came from: its path from the imported folder's parent
    # ("notes/plans/q3.md"); None for a page made in the app.
    source_path: str | None = None


@dataclass
class Page(PageSummary):
    """A page with its bullets nested under `nodes`."""

    nodes: list[TreeNode] = field(default_factory=list)


@dataclass
class File:
    id: UUID
    kb_id: UUID
    name: str
    content_type: str
    size: int
    sha256: str
    status: FileStatus
    status_reason: str | None
    enabled: bool
    mail_id: UUID | None
    archived_at: datetime | None
    deleted_at: datetime | None
    created_at: datetime
    updated_at: datetime
    # The document's own title (HTML <title>, PDF metadata, its first heading) once its text
    # is extracted; None when it has none, and the name shows instead.
    title: str | None = None
    # Where an imported file came from (see PageSummary.source_path); an upload's is its name.
    source_path: str | None = None
    # True when the extracted text was cut at SUBSPACE_MAX_EXTRACTED_CHARS; None before extraction
    text_truncated: bool | None = None


@dataclass
class Mail:
    id: UUID
    kb_id: UUID
    message_id: str
    subject: str
    sender: str
    recipients: str
    sent_at: datetime | None
    snippet: str
    body_text: str  # what the message says itself: what search reads
    archived_at: datetime | None
    deleted_at: datetime | None
    created_at: datetime
    updated_at: datetime
    # What it quotes (a reply's "> …" lines, the original below it) and its signature.
    quoted_text: str = ""


@dataclass
class TagDefinition:
    id: UUID
    kb_id: UUID
    name: str
    type: TagType
    created_at: datetime


@dataclass
class ApiKey:
    id: UUID
    user_id: UUID
    name: str
    prefix: str  # the token's start: the workspace's, the same for all its keys
    ending: str  # the token's last characters, which tell keys apart ("" for older keys)
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    # an operator's key: it may also create workspaces and their keys (/api/admin)
    admin: bool = False


@dataclass
class Session:
    """A browser signed in: by a sign-in code (key_id None) or with an API key."""

    id: UUID
    user_id: UUID
    key_id: UUID | None
    user_agent: str  # the start of the browser's User-Agent, to tell sessions apart
    created_at: datetime
    last_used_at: datetime
    expires_at: datetime  # moved on as it is used
    ended_at: datetime | None
