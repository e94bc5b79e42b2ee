"""Parse RFC 5322 messages (`.eml`) and mailboxes (`.mbox`) into mail and attachments."""

from __future__ import annotations

import hashlib
import mailbox
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from email import message_from_bytes, policy
from email.message import EmailMessage, Message
from email.utils import parsedate_to_datetime
from pathlib import Path

from subspace.ingest.extract import decode_text, html_text
from subspace.text import clean_text

MAX_HTML_DEPTH_FOR_MAIL = 512  # mail bodies get the same protection as HTML files


@dataclass
class Attachment:
    name: str
    content_type: str
    data: bytes


@dataclass
class ParsedMail:
    message_id: str
    subject: str
    sender: str
    recipients: str
    sent_at: datetime | None
    body_text: str
    raw: bytes
    attachments: list[Attachment] = field(default_factory=list)


class MalformedMessage(Exception):
    """The bytes are not a message that can be stored."""


def _header(msg: Message, name: str) -> str:
    try:
        value = msg.get(name)
    except Exception:  # a malformed encoded-word can make the header parser raise
        value = msg.get_all(name, failobj=[""])[0] if hasattr(msg, "get_all") else ""
    return clean_text(str(value or ""))


def _decoded_part(part: Message) -> str:
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return ""
    charset = part.get_content_charset()
    if charset:
        try:
            return payload.decode(charset, errors="replace")
        except LookupError:
            pass
    return decode_text(payload)


def _body_text(msg: EmailMessage) -> str:
    body = msg.get_body(preferencelist=("plain", "html"))
    if body is None:
        return ""
    text = _decoded_part(body)
    if body.get_content_type() == "text/html":
        try:
            text = html_text(text, MAX_HTML_DEPTH_FOR_MAIL)
        except Exception:
            text = ""
    return clean_text(text)


def _attachments(msg: EmailMessage) -> list[Attachment]:
    found = []
    for index, part in enumerate(msg.iter_attachments(), start=1):
        data = part.get_payload(decode=True)
        if not isinstance(data, bytes) or not data:
            continue
        name = clean_text(part.get_filename() or f"attachment-{index}")
        found.append(Attachment(name=name, content_type=part.get_content_type(), data=data))
    return found


def parse_message(raw: bytes) -> ParsedMail:
    """Parse one message. A message without a Message-ID gets one derived from its bytes,
    so importing it twice still finds the duplicate."""
    if not raw.strip():
        raise MalformedMessage("the message is empty")
    msg = message_from_bytes(raw, policy=policy.default)
    assert isinstance(msg, EmailMessage)
    if not msg.keys():
        raise MalformedMessage("the message has no headers")
    message_id = _header(msg, "Message-ID").strip()
    if not message_id:
        message_id = f"<{hashlib.sha256(raw).hexdigest()}@subspace.invalid>"
    sent_at = None
    date = _header(msg, "Date")
    if date:
        try:
            sent_at = parsedate_to_datetime(date)
        except (TypeError, ValueError, IndexError):
            sent_at = None
        if sent_at is not None and sent_at.tzinfo is None:
            sent_at = None  # a date without a zone cannot be placed in time honestly
    return ParsedMail(
        message_id=message_id,
        subject=_header(msg, "Subject"),
        sender=_header(msg, "From"),
        recipients=_header(msg, "To"),
        sent_at=sent_at,
        body_text=_body_text(msg),
        raw=raw,
        attachments=_attachments(msg),
    )


def iter_mbox(data: bytes) -> Iterator[bytes]:
    """The raw bytes of each message in an mbox file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mailbox.mbox"
        path.write_bytes(data)
        box = mailbox.mbox(path, create=False)
        try:
            for key in box.iterkeys():
                yield box.get_bytes(key)
        finally:
            box.close()
