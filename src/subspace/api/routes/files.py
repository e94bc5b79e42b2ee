"""/api/files"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from typing import Annotated
from urllib.parse import quote
from uuid import UUID

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from subspace import commands
from subspace.api.auth import require_context
from subspace.api.bodies import RequestBody
from subspace.api.openapi import BY_ID, error_responses
from subspace.api.routes.states import add_state_routes
from subspace.api.state import wake_extractor
from subspace.commands.files import check_upload_size, upload_file_once
from subspace.context import Context
from subspace.db import queries
from subspace.models import File as FileRow

router = APIRouter(prefix="/api/files", tags=["files"], responses=error_responses(*BY_ID))
CX = Annotated[Context, Depends(require_context)]


class FilePatch(RequestBody):
    model_config = ConfigDict(json_schema_extra={"examples": [{"enabled": False}]})

    enabled: bool


class FileChunk(BaseModel):
    n: int = Field(description="The chunk's number: search refs name it as file:<id>:<n>.")
    text: str
    enabled: bool = Field(description="False when this chunk alone is hidden from search.")


@dataclass
class UploadedFile(FileRow):
    # True when the knowledge base already held these bytes: that file is returned instead.
    already_stored: bool = False
    # True when a file uploaded before under this name got these bytes (same id, new text).
    updated: bool = False


@router.post(
    "",
    status_code=201,
    responses={
        200: {
            "model": UploadedFile,
            "description": "The knowledge base already held these bytes: the file stored "
            "before, with `already_stored: true`; or a file uploaded before under the same "
            "name now holds these bytes, with `updated: true`.",
        }
    },
)
def upload_file(
    request: Request,
    response: Response,
    cx: CX,
    file: Annotated[
        UploadFile, File(description="The document to store and index.", examples=["report.pdf"])
    ],
    kb_id: Annotated[UUID | None, Form(examples=["3f2b9c1e-8d4a-4e57-9a0b-6c1d2e3f4a5b"])] = None,
) -> UploadedFile:
    """Store a file; its text is extracted in the background (status `processing`).

    Bytes the knowledge base already holds are not stored twice: the answer is 200 with
    the existing file and `already_stored: true`. A file of the same name uploaded before is
    updated in place (same id, its text extracted again): 200 with `updated: true`.
    """
    cx = cx.niced()
    if file.size is not None:
        check_upload_size(cx, file.size)
    # Read one byte past the limit so an oversized body is caught without reading it all.
    data = file.file.read(cx.settings.max_upload_bytes + 1)
    check_upload_size(cx, len(data))
    stored, what = upload_file_once(
        cx, file.filename or "", data, content_type=file.content_type or "", kb_id=kb_id
    )
    if what != "added":
        response.status_code = 200
    if what != "existing":
        wake_extractor(request)
    return UploadedFile(
        **asdict(stored), already_stored=what == "existing", updated=what == "updated"
    )


@router.get("")
def list_files(cx: CX, kb_id: UUID | None = None) -> list[FileRow]:
    with cx.transaction() as conn:
        return queries.list_files(conn, cx.actor.workspace_id, kb_id=kb_id)


@router.get("/{file_id}")
def get_file(file_id: UUID, cx: CX) -> FileRow:
    with cx.transaction() as conn:
        return queries.get_file(conn, cx.actor.workspace_id, file_id)


@router.get("/{file_id}/chunks")
def list_chunks(file_id: UUID, cx: CX) -> list[FileChunk]:
    """The extracted text as the indexer chunked it, in order; empty until extraction ends."""
    with cx.transaction() as conn:
        rows = queries.list_file_chunks(conn, cx.actor.workspace_id, file_id)
    return [FileChunk(**row) for row in rows]


# Types a browser shows without running anything. Any other type, whatever the uploader
# claimed (text/html, image/svg+xml, application/xhtml+xml, scripts...), is served as
# application/octet-stream so a stored file can never run as a page of this origin.
SAFE_DOWNLOAD_TYPES = frozenset(
    {
        "text/plain",
        "text/csv",
        "text/markdown",
        "application/pdf",
        "application/json",
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "audio/mpeg",
        "video/mp4",
    }
)


def download_type(content_type: str) -> str:
    """The media type a download is served as: the stored one when it is safe, else
    application/octet-stream. Parameters such as charset are dropped.

    >>> download_type("text/html; charset=utf-8")
    'application/octet-stream'
    """
    base = content_type.split(";", 1)[0].strip().lower()
    return base if base in SAFE_DOWNLOAD_TYPES else "application/octet-stream"


def download_name(name: str) -> str:
    """The name a download is saved under: the stored name's last path part, without
    control characters or leading dots, so that `../../etc/passwd` saves as `passwd` and no
    name hides itself or climbs out of the downloads folder."""
    last = re.split(r"[/\\]", name)[-1]
    visible = "".join(c for c in last if unicodedata.category(c)[0] != "C").strip()
    return visible.lstrip(".").strip() or "download"


@router.get(
    "/{file_id}/content",
    response_class=Response,
    responses={
        200: {
            "description": "The bytes, as an attachment named like the file.",
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                **{t: {"schema": {"type": "string", "format": "binary"}}
                   for t in sorted(SAFE_DOWNLOAD_TYPES)},
            },
        }
    },
)  # fmt: skip
def download_file(file_id: UUID, cx: CX) -> Response:
    """The file's bytes as uploaded, always as an attachment; types a browser could run
    (HTML, SVG, scripts) come as application/octet-stream."""
    with cx.transaction() as conn:
        row = queries.get_file(conn, cx.actor.workspace_id, file_id)
        data = queries.read_blob(conn, cx.actor.workspace_id, row.sha256)
    name = download_name(row.name)
    ascii_name = "".join(c if 32 <= ord(c) < 127 and c != '"' else "_" for c in name)
    disposition = f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name)}"
    return Response(
        data,
        media_type=download_type(row.content_type),
        headers={"content-disposition": disposition, "x-content-type-options": "nosniff"},
    )


@router.patch("/{file_id}")
def set_enabled(file_id: UUID, body: FilePatch, cx: CX) -> FileRow:
    """Enable or disable the file; a disabled file is hidden everywhere until enabled."""
    return commands.set_file_enabled(cx, file_id, body.enabled)


add_state_routes(
    router,
    "file",
    FileRow,
    archive=commands.archive_file,
    delete=commands.delete_file,
    restore=commands.restore_file,
)
