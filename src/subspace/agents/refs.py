"""Reading one item by the ref that search and grep print: `page:<id>`, `node:<id>`,
`file:<id>` or `file:<id>:<n>`, `mail:<id>`, or a bare page id. Hidden items are NotFound."""

from __future__ import annotations

import re
from uuid import UUID

from subspace.agents.tools import kb_node_read, kb_read
from subspace.context import Context
from subspace.errors import NotFound
from subspace.search.filters import file_visible, mail_visible

_UUID = r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
_REF = re.compile(rf"^(?:(page|node|mem|memory|file|mail):)?({_UUID})(?::(\d+))?$")


def parse_ref(spec: str) -> tuple[str, UUID, int | None] | None:
    """(kind, id, chunk number) when `spec` is a ref or a bare id (a page), else None.

    >>> parse_ref("file:6f1c0a4e-2b9d-4c53-9a51-0d6f3c1e8b27:3")[2]
    3
    """
    match = _REF.match(spec.strip())
    if match is None:
        return None
    kind, ident, chunk = match.groups()
    kind = kind or "page"
    if chunk is not None and kind != "file":
        return None
    return kind, UUID(ident), None if chunk is None else int(chunk)


def read_ref(cx: Context, kind: str, item_id: UUID, chunk: int | None = None) -> str:
    """The item as text with a heading line that ends in its ref."""
    if kind == "page":
        return kb_read(cx, item_id)
    if kind in ("node", "mem", "memory"):
        return kb_node_read(cx, item_id)
    if kind == "file":
        return _read_file(cx, item_id, chunk)
    return _read_mail(cx, item_id)


def _read_file(cx: Context, file_id: UUID, chunk: int | None) -> str:
    params = {"ws": cx.actor.workspace_id, "user": cx.actor.user_id, "id": file_id, "n": chunk}
    with cx.transaction() as conn:
        if chunk is None:
            row = conn.execute(
                "select f.name, t.text from kb.files f join search.file_text t "
                "on t.workspace_id = f.workspace_id and t.file_id = f.id "
                f"where f.workspace_id = %(ws)s and f.id = %(id)s and {file_visible('f')}",
                params,
            ).fetchone()
        else:
            row = conn.execute(
                "select f.name, c.text from kb.files f join search.file_chunks c "
                "on c.workspace_id = f.workspace_id and c.file_id = f.id "
                "where f.workspace_id = %(ws)s and f.id = %(id)s and c.n = %(n)s and c.enabled "
                f"and {file_visible('f')}",
                params,
            ).fetchone()
    if row is None:
        if chunk is None:
            raise NotFound("file", file_id)
        raise NotFound("file chunk", f"{file_id}:{chunk}")
    return f"# {row['name']} ({_ref('file', file_id, chunk)})\n{row['text']}"


def _read_mail(cx: Context, mail_id: UUID) -> str:
    with cx.transaction() as conn:
        row = conn.execute(
            "select subject, sender, recipients, sent_at, body_text from kb.mail m "
            f"where m.workspace_id = %(ws)s and m.id = %(id)s and {mail_visible('m')}",
            {"ws": cx.actor.workspace_id, "user": cx.actor.user_id, "id": mail_id},
        ).fetchone()
    if row is None:
        raise NotFound("mail", mail_id)
    sent = "" if row["sent_at"] is None else row["sent_at"].isoformat()
    return "\n".join(
        [
            f"# {row['subject'] or '(no subject)'} (mail:{mail_id})",
            f"From: {row['sender']}",
            f"To: {row['recipients']}",
            f"Date: {sent}",
            "",
            row["body_text"],
        ]
    )


def _ref(kind: str, item_id: UUID, chunk: int | None) -> str:
    return f"{kind}:{item_id}" if chunk is None else f"{kind}:{item_id}:{chunk}"
