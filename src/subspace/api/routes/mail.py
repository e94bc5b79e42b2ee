"""/api/mail"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from pydantic import BaseModel, ConfigDict, Field

from subspace import commands
from subspace.api.auth import require_context
from subspace.api.bodies import RequestBody
from subspace.api.openapi import BY_ID, error_responses
from subspace.api.routes.states import add_state_routes
from subspace.api.state import wake_extractor
from subspace.commands.files import check_upload_size
from subspace.commands.pages import resolve_kb
from subspace.context import Context
from subspace.db import queries
from subspace.errors import InvalidInput
from subspace.ingest.importer import Importer, ImportRow
from subspace.models import File as FileRow
from subspace.models import Mail

router = APIRouter(prefix="/api/mail", tags=["mail"], responses=error_responses(*BY_ID))
CX = Annotated[Context, Depends(require_context)]
# How long an upload waits for a mail parser (they are shared by every workspace, within
# SUBSPACE_PARSE_MEMORY_MB) before it answers 429 or 503 with Retry-After.
PARSER_WAIT_S = 5.0


class MailIn(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "message_id": "<launch-42@example.com>",
                    "subject": "Launch date",
                    "sender": "Ada <ada@example.com>",
                    "recipients": "team@example.com",
                    "sent_at": "2026-11-30T08:00:00Z",
                    "body_text": "We ship the beta on Friday.",
                }
            ]
        }
    )

    message_id: str
    subject: str = ""
    sender: str = Field("", description="The From header.")
    recipients: str = Field("", description="The To header.")
    sent_at: datetime | None = None
    body_text: str = ""
    kb_id: UUID | None = None


@router.post("", status_code=201)
def add_mail(body: MailIn, cx: CX) -> Mail:
    """Store a message; a Message-ID already stored answers 409."""
    return commands.add_mail(
        cx.niced(),
        message_id=body.message_id,
        subject=body.subject,
        sender=body.sender,
        recipients=body.recipients,
        sent_at=body.sent_at,
        body_text=body.body_text,
        kb_id=body.kb_id,
    )


class ImportedItem(BaseModel):
    source: str
    kind: str
    outcome: str = Field(
        description="added, unchanged (a message with this Message-ID is stored already), "
        "failed or skipped"
    )
    detail: str


class MailImport(BaseModel):
    counts: dict[str, int]
    rows: list[ImportedItem]


@router.post("/import")
def import_mail(
    request: Request,
    cx: CX,
    file: Annotated[
        UploadFile,
        File(description="An .eml message or an .mbox mailbox.", examples=["inbox.mbox"]),
    ],
    kb_id: Annotated[UUID | None, Form(examples=["3f2b9c1e-8d4a-4e57-9a0b-6c1d2e3f4a5b"])] = None,
) -> MailImport:
    """Import a message or a mailbox; duplicates (same Message-ID) are skipped."""
    cx = cx.niced()
    name = file.filename or "upload"
    data = file.file.read(cx.settings.max_upload_bytes + 1)
    check_upload_size(cx, len(data))
    with cx.transaction() as conn:
        kb = resolve_kb(cx, conn, kb_id)
    importer = Importer(cx, kb, parser_wait_s=PARSER_WAIT_S)
    if name.lower().endswith(".mbox") or data.startswith(b"From "):
        importer.add_mailbox(data, name, max_messages=cx.settings.max_mailbox_messages)
    else:
        importer.add_message(data, name)
    wake_extractor(request)
    outcomes = {r.outcome for r in importer.report.rows}
    if not outcomes & {"added", "unchanged"}:
        raise InvalidInput(_nothing_imported(name, importer.report.rows))
    rows = [
        ImportedItem(source=r.source, kind=r.kind, outcome=r.outcome, detail=r.detail)
        for r in importer.report.rows
    ]
    return MailImport(counts=importer.report.counts(), rows=rows)


def _nothing_imported(name: str, rows: list[ImportRow]) -> str:
    failed = [r for r in rows if r.outcome == "failed"]
    if not failed:
        why = "it holds no messages"
    elif len(failed) == 1:
        why = failed[0].detail
    else:
        why = f"none of its {len(failed)} messages could be read (the first: {failed[0].detail})"
    return (
        f"Nothing was imported from {name}: {why}. Mail import accepts one message "
        "(.eml, RFC 5322, with headers) or a mailbox (.mbox); other files go to /api/files."
    )


@router.get("")
def list_mail(cx: CX, kb_id: UUID | None = None) -> list[Mail]:
    with cx.transaction() as conn:
        return queries.list_mail(conn, cx.actor.workspace_id, kb_id=kb_id)


@router.get("/{mail_id}")
def get_mail(mail_id: UUID, cx: CX) -> Mail:
    with cx.transaction() as conn:
        return queries.get_mail(conn, cx.actor.workspace_id, mail_id)


@router.get("/{mail_id}/attachments")
def list_attachments(mail_id: UUID, cx: CX) -> list[FileRow]:
    """The files that came attached to the message (each one is also under /api/files)."""
    with cx.transaction() as conn:
        return queries.list_mail_attachments(conn, cx.actor.workspace_id, mail_id)


add_state_routes(
    router,
    "mail",
    Mail,
    archive=commands.archive_mail,
    delete=commands.delete_mail,
    restore=commands.restore_mail,
)
