"""/api/sources: the folders and mailboxes kept in sync, their status and their last round.

A mailbox's password is written, never read back. A folder is read with the server's rights,
so one is added here only under SUBSPACE_FOLDER_ROOTS (the command line adds any)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field, StrictInt, WithJsonSchema

from subspace.api.auth import require_context
from subspace.api.bodies import RequestBody
from subspace.api.openapi import KEYED, error_responses
from subspace.context import Context
from subspace.sources import model

router = APIRouter(prefix="/api/sources", tags=["sources"], responses=error_responses(*KEYED))
CX = Annotated[Context, Depends(require_context)]
SHORT = Field(max_length=model.MAX_FIELD_CHARS)
PATTERNS: Any = Field(default_factory=list, max_length=model.MAX_PATTERNS)


class FolderSourceIn(RequestBody):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"kind": "folder", "name": "Notes", "path": "/srv/notes", "exclude": ["drafts/*"]}
    ]})  # fmt: skip

    kind: Literal["folder"]
    name: str = Field(max_length=model.MAX_NAME_CHARS)
    path: str = Field(max_length=4096, description="The folder's absolute path on the server.")
    kb_id: UUID | None = None
    include: list[str] = PATTERNS
    exclude: list[str] = PATTERNS
    types: list[Literal["page", "file", "mail"]] = Field(default_factory=list, max_length=3)


class ImapSourceIn(RequestBody):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"kind": "imap", "name": "Work mail", "host": "imap.example.org", "user": "me@example.org",
         "password": "an app token", "folders": ["INBOX", "Projects"]}
    ]})  # fmt: skip

    kind: Literal["imap"]
    name: str = Field(max_length=model.MAX_NAME_CHARS)
    host: str = SHORT
    port: StrictInt | None = Field(default=None, ge=1, le=65_535)
    tls: Literal["tls", "starttls", "none"] = "tls"
    user: str = SHORT
    password: str = Field(max_length=model.MAX_PASSWORD_CHARS, description="Kept encrypted.")
    folders: list[str] = Field(default_factory=lambda: ["INBOX"], max_length=model.MAX_FOLDERS)
    kb_id: UUID | None = None


SourceIn = Annotated[
    FolderSourceIn | ImapSourceIn,
    Field(discriminator="kind"),
    WithJsonSchema({
        "oneOf": [{"$ref": "#/components/schemas/FolderSourceIn"},
                  {"$ref": "#/components/schemas/ImapSourceIn"}],
        "discriminator": {"propertyName": "kind"},
        "examples": [
            {"kind": "folder", "name": "Notes", "path": "/srv/notes", "exclude": ["drafts/*"]},
            {"kind": "imap", "name": "Work mail", "host": "imap.example.org",
             "user": "me@example.org", "password": "an app token", "folders": ["INBOX"]},
        ],
    }),
]  # fmt: skip


class PasswordIn(RequestBody):
    model_config = ConfigDict(json_schema_extra={"examples": [{"password": "a new app token"}]})

    password: str = Field(max_length=model.MAX_PASSWORD_CHARS)


class SourceOut(BaseModel):
    id: UUID
    name: str
    kind: str
    kb_id: UUID
    config: dict[str, Any]
    has_password: bool
    status: str = Field(description="waiting (not synced yet), ok, failed (retried), paused "
                        "(needs a person: status_reason says what)")  # fmt: skip
    status_reason: str | None
    last_sync_at: datetime | None
    last_counts: dict[str, int]
    failed_items: int = Field(description="Its items that failed, listed by GET /{id}.")
    created_at: datetime


class ItemErrorOut(BaseModel):
    item: str
    error: str


class SourceDetailOut(SourceOut):
    errors: list[ItemErrorOut] = Field(description="The items that failed, latest first.")


def _out(source: model.SyncedSource) -> SourceOut:
    return SourceOut(
        id=source.id, name=source.name, kind=source.kind, kb_id=source.kb_id,
        config=source.config, has_password=source.has_secret, status=source.status,
        status_reason=source.status_reason, last_sync_at=source.last_sync_at,
        last_counts=source.last_counts, failed_items=source.failed_items,
        created_at=source.created_at,
    )  # fmt: skip


@router.get("")
def list_sources(cx: CX) -> list[SourceOut]:
    with cx.transaction() as conn:
        return [_out(source) for source in model.list_sources(conn, cx.actor.workspace_id)]


@router.post("", status_code=201, responses=error_responses(403, 404, 409))
def add_source(body: SourceIn, cx: CX) -> SourceOut:
    """Add a watched folder or an IMAP mailbox; its first sync starts at once."""
    model.source_name(body.name)  # its faults first: the rest may be fine
    if isinstance(body, FolderSourceIn):
        config = model.folder_config(
            body.path, include=body.include, exclude=body.exclude, types=list(body.types),
            roots=cx.settings.folder_roots,
        )  # fmt: skip
        return _out(model.add_source(cx, body.name, "folder", config, kb_id=body.kb_id))
    config = model.imap_config(body.host, user=body.user, folders=body.folders, port=body.port,
                               tls=body.tls)  # fmt: skip
    source = model.add_source(
        cx, body.name, "imap", config, kb_id=body.kb_id, password=body.password
    )
    return _out(source)


@router.get("/{source_id}", responses=error_responses(404))
def get_source(source_id: UUID, cx: CX) -> SourceDetailOut:
    with cx.transaction() as conn:
        source = model.get_source(conn, cx.actor.workspace_id, source_id)
        errors = model.item_errors(conn, source)
    return SourceDetailOut(
        **_out(source).model_dump(),
        errors=[ItemErrorOut(item=e.key, error=e.error) for e in errors],
    )


@router.post("/{source_id}/sync", status_code=202, responses=error_responses(404))
def sync_source(source_id: UUID, cx: CX) -> SourceOut:
    """Ask for a round now; the source's status and counts say when it is done."""
    return _out(model.request_sync(cx, source_id))


@router.put("/{source_id}/password", responses=error_responses(404))
def set_password(source_id: UUID, body: PasswordIn, cx: CX) -> SourceOut:
    """Keep a new password for a mailbox (after a refusal, or a new SUBSPACE_SOURCES_KEY)."""
    return _out(model.set_password(cx, source_id, body.password))


@router.delete("/{source_id}", responses=error_responses(404))
def remove_source(source_id: UUID, cx: CX) -> SourceOut:
    """Stop following the source; what it brought in stays in the knowledge base."""
    return _out(model.remove_source(cx, source_id))
