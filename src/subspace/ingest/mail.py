"""Parse RFC 5322 messages (`.eml`) and mailboxes (`.mbox`) into mail and attachments.

Pure functions of the bytes and the limits: `ingest.importer` runs them in the extraction
child process (`ingest.isolation`), so a hostile message cannot stall or crash the server.
"""

from __future__ import annotations

import hashlib
import mailbox
import mimetypes
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.message import EmailMessage, Message
from email.utils import parsedate_to_datetime
from pathlib import Path

from subspace.ingest.encoding import decode_text
from subspace.ingest.failures import ExtractionFailed
from subspace.ingest.html import html_text
from subspace.ingest.replies import split_reply
from subspace.text import clean_text

MAX_HTML_DEPTH_FOR_MAIL = 512  # mail bodies get the same protection as HTML files
MAX_MIME_DEPTH = 100  # the standard library's parser recurses per level: 1,500 levels overflow
# Longest header (folded lines together) the parser is given; the rest is cut. A To of a few
# hundred recipients fits; parsing one this long takes about 0.1 s.
MAX_HEADER_BYTES = 32 * 1024

_CONTENT_TYPE = b"content-type:"
_ENCLOSED = b""  # the level of a message/rfc822 part (no boundary is empty)
_NESTING_TYPE = re.compile(rb"\s*(multipart|message)/([a-z0-9.+-]+)", re.IGNORECASE)
_BOUNDARY = re.compile(rb"""boundary\s*=\s*(?:"([^"]*)"|([^\s;]+))""", re.IGNORECASE)


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
    body_text: str  # what the message says itself
    raw: bytes  # as received, whatever was cut for the parser
    attachments: list[Attachment] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was cut to keep the message
    quoted_text: str = ""  # what it quotes, and its signature (ingest/replies.py)


class MalformedMessage(ExtractionFailed):
    """The bytes are not a message that can be stored; `reason` says why."""


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


def _body_text(msg: EmailMessage, max_html_depth: int) -> str:
    body = msg.get_body(preferencelist=("plain", "html"))
    if body is None:
        return ""
    text = _decoded_part(body)
    if body.get_content_type() == "text/html":
        try:
            text = html_text(text, max_html_depth)
        except Exception:
            text = ""
    return clean_text(text)


def _attachments(msg: EmailMessage) -> list[Attachment]:
    found = []
    for index, part in enumerate(msg.iter_attachments(), start=1):
        data = _part_bytes(part)
        if not data:
            continue
        content_type = part.get_content_type()
        name = clean_text(part.get_filename() or _unnamed(part, index, content_type))
        found.append(Attachment(name=name, content_type=content_type, data=data))
    return found


def _part_bytes(part: EmailMessage) -> bytes:
    """An attachment's bytes. A forwarded or bounced message (message/rfc822) is the message
    itself, an .eml of its own; a delivery report's fields (message/delivery-status) are its
    header blocks, as text."""
    if part.get_content_maintype() != "message":
        data = part.get_payload(decode=True)
        return data if isinstance(data, bytes) else b""
    inner = part.get_payload()
    blocks = inner if isinstance(inner, list) else [inner]
    return b"\n".join(block.as_bytes() for block in blocks if isinstance(block, Message))


def _unnamed(part: EmailMessage, index: int, content_type: str) -> str:
    """A name for an attachment that has none: its description, else `attachment-N`, with the
    extension its type has (`.txt` for any text)."""
    stem = str(part.get("content-description") or "").strip()
    if content_type == "message/rfc822":
        inner = part.get_payload()
        first = inner[0] if isinstance(inner, list) and inner else inner
        subject = str(first.get("subject") or "") if isinstance(first, Message) else ""
        return f"{(stem or subject or f'message-{index}')[:150]}.eml"
    extension = mimetypes.guess_extension(content_type) or ""
    if content_type.startswith(("text/", "message/")) and not extension:
        extension = ".txt"
    return f"{(stem or f'attachment-{index}')[:150]}{extension}"


def derived_message_id(raw: bytes) -> str:
    """A Message-ID made from the message's bytes, for one without a usable one: the same
    message imported twice still gets the same id, so it is found a duplicate."""
    return f"<{hashlib.sha256(raw).hexdigest()}@subspace.invalid>"


def parse_message(
    raw: bytes,
    *,
    max_html_depth: int = MAX_HTML_DEPTH_FOR_MAIL,
    max_mime_depth: int = MAX_MIME_DEPTH,
) -> ParsedMail:
    """Parse one message. A message without a Message-ID gets one derived from its bytes,
    so importing it twice still finds the duplicate. A Date that cannot be placed in time
    (no zone, or outside the years 1 to 9999 in UTC) leaves the mail without a date."""
    if not raw.strip():
        raise MalformedMessage("the message is empty")
    scan = scan_message(raw, max_mime_depth)
    if scan.too_deep:
        raise MalformedMessage(
            f"the message nests MIME parts more than {max_mime_depth} levels deep "
            "(SUBSPACE_MAX_MIME_DEPTH)"
        )
    msg = message_from_bytes(scan.bounded, policy=policy.default)
    assert isinstance(msg, EmailMessage)
    if not msg.keys():
        raise MalformedMessage("the message has no headers")
    message_id = _header(msg, "Message-ID").strip()
    if not message_id:
        message_id = derived_message_id(raw)
    body, quoted = split_reply(_body_text(msg, max_html_depth))
    return ParsedMail(
        message_id=message_id,
        subject=_header(msg, "Subject"),
        sender=_header(msg, "From"),
        recipients=_header(msg, "To"),
        sent_at=_sent_at(_header(msg, "Date")),
        body_text=body,
        quoted_text=quoted,
        raw=raw,
        attachments=_attachments(msg),
        notes=[
            f"the {name} header was cut to {MAX_HEADER_BYTES // 1024} KB"
            for name in dict.fromkeys(scan.cut)
        ],
    )


def _sent_at(date: str) -> datetime | None:
    if not date:
        return None
    try:
        sent_at = parsedate_to_datetime(date)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if sent_at.tzinfo is None:
        return None  # a date without a zone cannot be placed in time honestly
    try:
        # Postgres stores later instants, but they cannot be read back into Python.
        sent_at.astimezone(UTC)
    except OverflowError:
        return None
    return sent_at


@dataclass
class Scan:
    """What one pass over a message's lines found before the parser sees it."""

    too_deep: bool  # MIME parts nest deeper than allowed
    bounded: bytes  # the message with every header cut to MAX_HEADER_BYTES
    cut: list[str]  # the names of the headers cut, in order


def scan_message(raw: bytes, max_depth: int, max_header_bytes: int = MAX_HEADER_BYTES) -> Scan:
    """One pass over the lines: whether multipart and message/* parts nest deeper than
    `max_depth`, and the message with each header (of the message and of every part) cut to
    `max_header_bytes`.

    The parser's headers cost more than linear time in their length (a Subject of 100,000
    encoded words took 3.7 s and 800 MB; a To of 50,000 addresses 15.6 s), so none reaches it
    longer than a real one gets. The boundaries are followed the way the parser will, so an
    over-deep message is refused before the recursive parser sees it.
    """
    # Open levels, innermost last: a multipart's boundary, or _ENCLOSED for a message/rfc822.
    levels: list[bytes] = []
    in_headers = True
    content_type: list[bytes] = []  # the current header block's, unfolded
    folding = False  # the header being read is Content-Type, continued on indented lines
    out: list[bytes] = []
    cut: list[str] = []
    header_bytes = 0  # of the header being read
    header_name = ""
    for line in raw.splitlines(keepends=True):
        bare = line.rstrip(b"\r\n")
        if in_headers:
            if bare.strip():
                continued = bare[:1] in (b" ", b"\t")
                if continued:
                    if folding:
                        content_type.append(bare)
                else:
                    header_bytes = 0
                    header_name = bare.split(b":", 1)[0].decode("ascii", "replace").strip()
                    folding = bare[: len(_CONTENT_TYPE)].lower() == _CONTENT_TYPE
                    if folding:
                        content_type = [bare[len(_CONTENT_TYPE) :]]
                room = max_header_bytes - header_bytes
                header_bytes += len(bare)
                if len(bare) <= room:
                    out.append(line)
                    continue
                if room > 0:  # the line that crosses the bound: its start is kept
                    out.append(bare[:room] + line[len(bare) :])
                    cut.append(header_name or "a header")
                continue
            # The blank line that ends a header block.
            out.append(line)
            in_headers = folding = False
            nested = _nested_level(b" ".join(content_type))
            content_type = []
            if nested is not None:
                levels.append(nested)
                if len(levels) > max_depth:
                    return Scan(too_deep=True, bounded=b"", cut=cut)
                # An enclosed message's own headers follow at once.
                in_headers = nested == _ENCLOSED
            continue
        out.append(line)
        if not bare.startswith(b"--") or not levels:
            continue
        for index in range(len(levels) - 1, -1, -1):
            boundary = levels[index]
            if boundary != _ENCLOSED and bare.startswith(b"--" + boundary):
                closing = bare[len(boundary) + 2 :].startswith(b"--")
                del levels[index + (0 if closing else 1) :]
                in_headers = not closing
                break
    return Scan(too_deep=False, bounded=b"".join(out), cut=cut)


def _nested_level(content_type: bytes) -> bytes | None:
    """A multipart's boundary, _ENCLOSED for an enclosed message, None for a leaf part."""
    match = _NESTING_TYPE.match(content_type)
    if match is None:
        return None
    if match[1].lower() == b"message":
        return _ENCLOSED if match[2].lower() in (b"rfc822", b"global") else None
    found = _BOUNDARY.search(content_type, match.end())
    boundary = None if found is None else (found[1] if found[1] is not None else found[2])
    return boundary or None


def split_mbox(data: bytes) -> list[bytes]:
    """The raw bytes of each message in an mbox file (a list, to cross from the child)."""
    return list(iter_mbox(data))


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
