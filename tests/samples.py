"""Documents built from scratch for tests (and for the demo assets): PDF, DOCX, mail."""

from __future__ import annotations

import io
import zipfile
import zlib
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime


def _pdf_string(text: str) -> bytes:
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return b"(" + escaped.encode("latin-1", "replace") + b")"


def make_pdf(pages: list[str], *, compress: bool = True) -> bytes:
    """A valid PDF with one Helvetica text page per item (lines split on newlines)."""
    objects: list[bytes] = []
    page_ids = [4 + 2 * i for i in range(len(pages))]
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = b" ".join(b"%d 0 R" % pid for pid in page_ids)
    objects.append(b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(pages)))
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for page_id, text in zip(page_ids, pages, strict=True):
        lines = [b"BT /F1 11 Tf 14 TL 72 760 Td"]
        for line in text.splitlines():
            lines.append(_pdf_string(line) + b" Tj T*")
        lines.append(b"ET")
        content = b"\n".join(lines)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (page_id + 1)
        )
        objects.append(_stream(content, compress))
    return _assemble(objects)


def _stream(content: bytes, compress: bool, filters: int = 1) -> bytes:
    if not compress:
        return b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content)
    for _ in range(filters):
        content = zlib.compress(content, 9)
    names = b" ".join([b"/FlateDecode"] * filters)
    return b"<< /Length %d /Filter [%s] >>\nstream\n%s\nendstream" % (len(content), names, content)


def _assemble(objects: list[bytes]) -> bytes:
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def make_pdf_bomb(inflated_bytes: int, layers: int = 2) -> bytes:
    """A one-page PDF whose content stream is compressed `layers` times over a run of
    `inflated_bytes` spaces: tiny on disk, huge when decoded."""
    # Built in chunks at level 1 so the test never holds the inflated bytes in memory.
    inner = zlib.compressobj(1)
    parts = [inner.compress(b"BT /F1 11 Tf 72 760 Td (boom) Tj ET\n")]
    chunk = b" " * (1 << 20)
    for _ in range(inflated_bytes // len(chunk)):
        parts.append(inner.compress(chunk))
    parts.append(inner.flush())
    content = b"".join(parts)
    for _ in range(layers - 1):
        content = zlib.compress(content, 9)
    names = b" ".join([b"/FlateDecode"] * layers)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>",
        b"<< /Length %d /Filter [%s] >>\nstream\n%s\nendstream" % (len(content), names, content),
    ]
    return _assemble(objects)


def make_encrypted_pdf(text: str, password: str = "secret") -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf([text]))))
    writer.encrypt(user_password=password, owner_password="owner", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_docx(
    paragraphs: list[str], table: list[list[str]] | None = None, after: str = ""
) -> bytes:
    """A DOCX with paragraphs, then an optional table, then an optional closing paragraph."""
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                grid.cell(r, c).text = value
    if after:
        document.add_paragraph(after)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_zip_bomb(inflated_bytes: int, entries: int = 1) -> bytes:
    """A zip named like a DOCX whose members inflate to `inflated_bytes` in total."""
    out = io.BytesIO()
    chunk = b"\0" * (1 << 20)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        per_entry = inflated_bytes // entries
        for index in range(entries):
            with archive.open(f"word/part{index}.xml", "w", force_zip64=True) as member:
                left = per_entry
                while left > 0:
                    member.write(chunk[: min(left, len(chunk))])
                    left -= len(chunk)
    return out.getvalue()


def make_email(
    subject: str,
    body: str,
    *,
    message_id: str | None = "<m1@example.com>",
    sender: str = "Ana Lima <ana@example.com>",
    to: str = "team@example.com",
    html: str | None = None,
    attachments: list[tuple[str, str, bytes]] = (),  # type: ignore[assignment]
    date: datetime | None = datetime(2026, 11, 2, 9, 30, tzinfo=UTC),
) -> bytes:
    msg = EmailMessage()
    if message_id:
        msg["Message-ID"] = message_id
    msg["Subject"] = subject
    msg["From"] = sender
    msg["To"] = to
    if date is not None:
        msg["Date"] = format_datetime(date)
    if html is not None and not body:
        msg.set_content(html, subtype="html")
    else:
        msg.set_content(body)
        if html is not None:
            msg.add_alternative(html, subtype="html")
    for name, ctype, data in attachments:
        maintype, subtype = ctype.split("/")
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return msg.as_bytes()


def make_mbox(messages: list[bytes]) -> bytes:
    """An mbox: each message after a From_ line, body lines starting with From quoted."""
    out = io.BytesIO()
    for raw in messages:
        out.write(b"From sender@example.com Mon Nov  2 09:30:00 2026\n")
        for line in raw.replace(b"\r\n", b"\n").split(b"\n"):
            out.write((b">" + line if line.startswith(b"From ") else line) + b"\n")
        out.write(b"\n")
    return out.getvalue()
