"""Mail commands: add a message, archive, delete and restore."""

from __future__ import annotations

from datetime import UTC, datetime
from email.errors import HeaderParseError
from email.message import EmailMessage
from email.policy import default as default_policy
from email.utils import format_datetime
from uuid import UUID

from subspace.commands.blobs import put_blob
from subspace.commands.pages import resolve_kb
from subspace.commands.retry import retried
from subspace.commands.states import ARCHIVE, DELETE, RESTORE, set_state
from subspace.context import Context
from subspace.db import queries
from subspace.db.pool import Conn
from subspace.errors import Conflict, InvalidInput
from subspace.models import Mail
from subspace.outbox.append import append_event
from subspace.text import bounded, clean_text, single_line

SNIPPET_CHARS = 200  # enough for a one-line preview in a mail list
UTF8_POLICY = default_policy.clone(utf8=True)


def make_snippet(body_text: str) -> str:
    """The first words of the body on one line, cut at a word boundary."""
    flat = " ".join(body_text.split())
    if len(flat) <= SNIPPET_CHARS:
        return flat
    return flat[:SNIPPET_CHARS].rsplit(" ", 1)[0] + "…"


def _set_header(msg: EmailMessage, name: str, value: str, what: str, example: str) -> None:
    try:
        msg[name] = value
    except (IndexError, ValueError, HeaderParseError):
        # The standard library's header parser fails on some stray quotes and brackets.
        raise InvalidInput(
            f"{what} {value!r} cannot be written as a mail header. Write it like {example}."
        ) from None


def _synthesize_raw(
    message_id: str,
    subject: str,
    sender: str,
    recipients: str,
    sent_at: datetime | None,
    body_text: str,
) -> bytes:
    # A message added from fields still gets a raw blob, so every mail can be exported and
    # re-parsed the same way as an imported one. UTF-8 headers (RFC 6532), because a
    # Message-ID cannot be written in encoded words.
    msg = EmailMessage(policy=UTF8_POLICY)
    _set_header(msg, "Message-ID", message_id, "The Message-ID", "<id@example.com>")
    msg["Subject"] = subject
    if sender:
        _set_header(msg, "From", sender, "The sender", "Ada <ada@example.com>")
    if recipients:
        _set_header(
            msg, "To", recipients, "The recipients", "Ada <ada@example.com>, bo@example.com"
        )
    if sent_at is not None:
        msg["Date"] = format_datetime(sent_at)
    msg.set_content(body_text or "")
    return msg.as_bytes()


@retried
def add_mail(
    cx: Context,
    *,
    message_id: str,
    subject: str,
    sender: str = "",
    recipients: str = "",
    sent_at: datetime | None = None,
    body_text: str = "",
    quoted_text: str = "",
    raw: bytes | None = None,
    kb_id: UUID | None = None,
) -> Mail:
    """Store one message: `body_text` is what it says (searched), `quoted_text` what it quotes
    and its signature (kept, not searched). A Message-ID already in the workspace raises
    Conflict."""
    limit = cx.settings.max_title_chars
    setting = "SUBSPACE_MAX_TITLE_CHARS"
    message_id = _message_id(cx, message_id)
    subject = single_line(subject, what="A subject", limit=limit, setting=setting, required=False)
    sender = single_line(sender, what="A sender", limit=limit, setting=setting, required=False)
    recipients = single_line(
        recipients, what="The recipients", limit=10 * limit, setting=setting, required=False
    )
    body_text = bounded(
        body_text,
        what="A mail body",
        limit=cx.settings.max_mail_body_chars,
        setting="SUBSPACE_MAX_MAIL_BODY_CHARS",
        fix="Shorten the body or raise the limit.",
    )
    # Quotes are kept as far as the body's limit allows; they are never a reason to refuse.
    quoted_text = clean_text(quoted_text)[: cx.settings.max_mail_body_chars]
    if sent_at is not None:
        try:
            # Postgres stores later instants, but they cannot be read back into Python.
            sent_at.astimezone(UTC)
        except OverflowError:
            raise InvalidInput(
                f"The date {sent_at.isoformat()} falls outside the years 1 to 9999 in UTC. "
                "Send a date within that range, or none."
            ) from None
    if raw is None:
        raw = _synthesize_raw(message_id, subject, sender, recipients, sent_at, body_text)
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        kb = resolve_kb(cx, conn, kb_id)
        sha256 = put_blob(conn, cx.actor, raw)
        row = conn.execute(
            "insert into kb.mail (workspace_id, kb_id, message_id, subject, sender, recipients, "
            "sent_at, snippet, body_text, quoted_text, raw_sha256) "
            "values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "on conflict (workspace_id, message_id) do nothing returning id",
            (
                ws,
                kb,
                message_id,
                subject,
                sender,
                recipients,
                sent_at,
                make_snippet(body_text),
                body_text,
                quoted_text,
                sha256,
            ),
        ).fetchone()
        if row is None:
            raise Conflict(f"A message with Message-ID {message_id} is already stored.")
        append_event(conn, cx.actor.workspace_id, "mail.added", mail_id=row["id"])
        return queries.get_mail(conn, ws, row["id"])


def _message_id(cx: Context, message_id: str) -> str:
    """The Message-ID as stored: one line, within SUBSPACE_MAX_TITLE_CHARS."""
    return single_line(message_id, what="A Message-ID", limit=cx.settings.max_title_chars,
                       setting="SUBSPACE_MAX_TITLE_CHARS", required=True)  # fmt: skip


def find_mail_id(cx: Context, conn: Conn, message_id: str) -> UUID | None:
    """The workspace's mail with this Message-ID (as `add_mail` would store it), if any."""
    row = conn.execute(
        "select id from kb.mail where workspace_id = %s and message_id = %s",
        (cx.actor.workspace_id, _message_id(cx, message_id)),
    ).fetchone()
    return None if row is None else row["id"]


def archive_mail(cx: Context, mail_id: UUID) -> Mail:
    return set_state(cx, "mail", mail_id, ARCHIVE, "mail.archived", queries.get_mail)


def delete_mail(cx: Context, mail_id: UUID) -> Mail:
    return set_state(cx, "mail", mail_id, DELETE, "mail.deleted", queries.get_mail)


def restore_mail(cx: Context, mail_id: UUID) -> Mail:
    return set_state(cx, "mail", mail_id, RESTORE, "mail.restored", queries.get_mail)
