"""`subspace import`: a file or a folder of notes, documents and mail into a knowledge base."""

from __future__ import annotations

import codecs
import hashlib
import logging
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import psycopg

from subspace import commands
from subspace.commands import sources
from subspace.commands.files import check_upload_size
from subspace.commands.retry import retried
from subspace.commands.sources import Known, SourceKind
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db import queries
from subspace.db.pool import Conn
from subspace.errors import Conflict, SubspaceError, TooLarge
from subspace.ingest.encoding import decode_text
from subspace.ingest.extract import HTML_SUFFIXES, MARKDOWN_SUFFIXES
from subspace.ingest.failures import ExtractionFailed
from subspace.ingest.front_matter import FrontMatterTag, fit_tags, front_matter_text
from subspace.ingest.mail import ParsedMail, derived_message_id, parse_message, split_mbox
from subspace.ingest.markdown import parse_markdown
from subspace.ingest.outline import Outline, OutlineItem, parse_plain_text
from subspace.ingest.wikilinks import link_outline, page_key
from subspace.ingest.worker import extract_pending
from subspace.models import Mail, TagDefinition

log = logging.getLogger(__name__)
T = TypeVar("T")

PAGE_SUFFIXES = MARKDOWN_SUFFIXES | {".txt", ".text"}
FILE_SUFFIXES = {".pdf", ".docx"} | HTML_SUFFIXES
MAIL_SUFFIXES = {".eml"}
MAILBOX_SUFFIXES = {".mbox"}
CONTENT_TYPES = {
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".html": "text/html",
    ".htm": "text/html",
    ".xhtml": "application/xhtml+xml",
}


@dataclass
class ImportRow:
    """What happened to one file (or one message of a mailbox)."""

    source: str
    kind: str  # page, file, mail, or "" when skipped
    outcome: str  # added, updated, moved, unchanged, missing, failed, skipped
    detail: str = ""
    file_id: UUID | None = None


@dataclass
class ImportReport:
    rows: list[ImportRow] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return dict(Counter(row.outcome for row in self.rows))


def importable_files(root: Path) -> list[Path]:
    """The files under `root` in a stable order, without hidden files and folders."""
    if root.is_file():
        return [root]
    return sorted(
        path
        for path in root.rglob("*")
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(root).parts)
    )


def cut_name(name: str, limit: int) -> str:
    """`name` within `limit` characters, its extension kept: a long attachment name is
    shortened in the middle, never refused with its message.

    >>> cut_name("minutes-" + "x" * 20 + ".pdf", 16)
    'minutes-xxx….pdf'
    """
    if len(name) <= limit:
        return name
    stem, dot, suffix = name.rpartition(".")
    if not dot or len(suffix) > 16 or not stem:
        return name[: limit - 1] + "…"
    return stem[: limit - len(suffix) - 2] + "…." + suffix


def _fitted(parsed: ParsedMail, limit: int) -> tuple[ParsedMail, list[str]]:
    """The message with each field within its limit, and a note for each field cut: an
    imported message is kept whatever its headers hold."""
    notes = list(parsed.notes)
    fields: dict[str, str] = {}
    for name, most in (("subject", limit), ("sender", limit), ("recipients", 10 * limit)):
        value = " ".join(getattr(parsed, name).split())
        if len(value) > most:
            fields[name] = value[: most - 1] + "…"
            notes.append(f"the {name} was cut to {most:,} characters")
    if len(parsed.message_id) > limit:
        fields["message_id"] = derived_message_id(parsed.raw)
        notes.append(f"its Message-ID is over {limit:,} characters; one from its bytes is used")
    attachments = []
    for attachment in parsed.attachments:
        name = " ".join(attachment.name.split())
        if len(name) > limit:
            notes.append(f"an attachment's name was cut to {limit:,} characters")
            attachment = replace(attachment, name=cut_name(name, limit))
        attachments.append(attachment)
    fitted = replace(parsed, attachments=attachments)
    for name, value in fields.items():
        setattr(fitted, name, value)
    return fitted, notes


@retried
def store_mail(
    cx: Context, parsed: ParsedMail, kb_id: UUID | None
) -> tuple[Mail, list[UUID], list[str]]:
    """Store a parsed message and its attachments in one transaction; Conflict if present.
    Returns the mail, its attachments' file ids, and notes on what was cut to keep it."""
    parsed, notes = _fitted(parsed, cx.settings.max_title_chars)
    with cx.transaction() as conn:
        bound = cx.on(conn)
        mail = commands.add_mail(
            bound,
            message_id=parsed.message_id,
            subject=parsed.subject,
            sender=parsed.sender,
            recipients=parsed.recipients,
            sent_at=parsed.sent_at,
            body_text=parsed.body_text[: cx.settings.max_mail_body_chars],
            quoted_text=parsed.quoted_text,
            raw=parsed.raw,
            kb_id=kb_id,
        )
        file_ids = []
        for attachment in parsed.attachments:
            if len(attachment.data) > cx.settings.max_upload_bytes:
                notes.append(
                    f"the attachment {attachment.name!r} is over SUBSPACE_MAX_UPLOAD_BYTES and "
                    "was left out"
                )
                continue
            stored = commands.upload_file(
                bound,
                attachment.name,
                attachment.data,
                content_type=attachment.content_type,
                kb_id=kb_id,
                mail_id=mail.id,
            )
            file_ids.append(stored.id)
    return mail, file_ids, notes


def stored_mail_id(cx: Context, conn: Conn, parsed: ParsedMail) -> UUID | None:
    """The mail `store_mail` stored (or would store) this message as, if it is in."""
    fitted, _ = _fitted(parsed, cx.settings.max_title_chars)
    return commands.find_mail_id(cx, conn, fitted.message_id)


class Importer:
    """Imports files one by one; each file is its own transaction, so one failure stays one.

    Mail is parsed in a child process of the database's parser pool, under the extraction
    limits; a message waits `parser_wait_s` at most for one (None: as long as it takes), then
    raises TooMany or Busy.
    """

    def __init__(
        self,
        cx: Context,
        kb_id: UUID,
        *,
        parser_wait_s: float | None = None,
        base: Path | None = None,
    ) -> None:
        self.cx = cx
        self.kb_id = kb_id
        # Source paths are relative to `base`; a file whose path is gone from under it moved.
        self.base = base or Path.cwd()
        self._pages: dict[str, UUID] | None = None  # page_key → page, read at the first link
        # Pages whose wikilinks named pages not in yet: (page, outline, sha256, source path).
        self._unlinked: list[tuple[UUID, Outline, str, str, int]] = []
        self.report = ImportReport()
        self.parser_wait_s = parser_wait_s

    def _parse(self, function: Callable[..., T], args: tuple[Any, ...], **options: Any) -> T:
        """`function(*args)` in a parser child (its keywords: kwargs, task)."""
        pools = self.cx.parsers
        assert pools is not None, "a Context from Database.context() carries the parser pools"
        settings = self.cx.settings
        pool = pools.get(settings.extract_memory_mb, settings.parse_memory_mb)
        with pool.lease(self.cx.actor.workspace_id, self.parser_wait_s) as parser:
            return parser.run(function, args, self.cx.settings.extract_timeout_s, **options)

    def add(self, path: Path, label: str) -> None:
        suffix = path.suffix.lower()
        try:
            if suffix in PAGE_SUFFIXES:
                self._page(path, label)
            elif suffix in FILE_SUFFIXES:
                self._file(path, label)
            elif suffix in MAIL_SUFFIXES:
                self.add_message(path.read_bytes(), label)
            elif suffix in MAILBOX_SUFFIXES:
                self.add_mailbox(path.read_bytes(), label)
            elif not suffix and _is_text(path):  # README, LICENSE, NEWS: read as plain text
                self._page(path, label)
            else:
                kind = f"{suffix} files" if suffix else "binary files without an extension"
                self.report.rows.append(ImportRow(label, "", "skipped", f"{kind} are not read"))
        except SubspaceError as exc:
            self.report.rows.append(ImportRow(label, _kind(suffix), "failed", exc.message))
        except OSError as exc:
            self.report.rows.append(ImportRow(label, _kind(suffix), "failed", exc.strerror or ""))
        except psycopg.Error as exc:
            # One item the database refused (a lost connection, a statement cancelled) fails
            # alone; importing the folder again skips what is already in and retries it.
            log.warning("importing %s failed: %s", label, exc)
            detail = f"the database refused it ({type(exc).__name__}); import again to retry"
            self.report.rows.append(ImportRow(label, _kind(suffix), "failed", detail))

    def _page(self, path: Path, label: str) -> None:
        data = path.read_bytes()
        sha256 = hashlib.sha256(data).hexdigest()
        found = self._identify("page", label, sha256)
        if found is None:
            return
        parse = parse_markdown if path.suffix.lower() in MARKDOWN_SUFFIXES else parse_plain_text
        try:
            # In a parser child: a pathological or huge document meets the parsing budget
            # (memory, SUBSPACE_EXTRACT_TIMEOUT_S) and fails alone.
            options = {"fallback_title": path.stem}
            outline = self._parse(
                parse, (decode_text(data),), kwargs=options, task="reading the page"
            )
        except ExtractionFailed as exc:
            self.report.rows.append(ImportRow(label, "page", "failed", exc.reason))
            return
        tags = self._fit_front_matter(outline)
        unlinked = link_outline(outline.items, self._find_page)
        if isinstance(found, Known):
            page = sources.update_page_from_outline(
                self.cx, found.id, outline.title, outline.items,
                source_sha256=sha256, source_path=label,
            )  # fmt: skip
            outcome = "updated"
        else:
            page = commands.create_page_from_outline(
                self.cx,
                outline.title,
                outline.items,
                kb_id=self.kb_id,
                source_sha256=sha256,
                source_path=label,
            )
            outcome = "added"
        self._set_tags(page.id, tags)
        self._known_page(page.id, page.title, label)
        if unlinked:
            self._unlinked.append((page.id, outline, sha256, label, unlinked))
        self.report.rows.append(ImportRow(label, "page", outcome))

    def _find_page(self, key: str) -> UUID | None:
        """The page a wikilink names, by title or file name, among the knowledge base's."""
        if self._pages is None:
            self._pages = {}
            with self.cx.transaction() as conn:
                for page in queries.list_pages(conn, self.cx.actor.workspace_id, kb_id=self.kb_id):
                    self._known_page(page.id, page.title, page.source_path)
        return self._pages.get(key)

    def _known_page(self, page_id: UUID, title: str, path: str | None) -> None:
        if self._pages is None:
            return  # read whole at the first link
        names = [title, Path(path).name] if path else [title]
        for name in names:
            self._pages.setdefault(page_key(name), page_id)

    def link_pending(self) -> None:
        """Link the wikilinks that named pages imported after theirs, now that all are in."""
        pending, self._unlinked = self._unlinked, []
        for page_id, outline, sha256, path, unlinked in pending:
            if link_outline(outline.items, self._find_page) == unlinked:
                continue  # none of its targets arrived
            sources.update_page_from_outline(
                self.cx, page_id, outline.title, outline.items,
                source_sha256=sha256, source_path=path,
            )  # fmt: skip

    def _fit_front_matter(self, outline: Outline) -> list[FrontMatterTag]:
        """The tags the page's front matter fits in this knowledge base; the keys that fit
        none stay on the page, as YAML, in its first bullet."""
        if not outline.properties:
            return []
        defined = self._defined_tags()
        tags, rest = fit_tags(outline.properties, {n: tag.type for n, tag in defined.items()})
        if rest:
            outline.items.insert(0, OutlineItem(front_matter_text(rest)))
        return tags

    def _set_tags(self, page_id: UUID, tags: list[FrontMatterTag]) -> None:
        defined = self._defined_tags() if tags else {}
        for wanted in tags:
            tag = defined.get(wanted.name)
            if tag is None:
                try:
                    tag = commands.create_tag(self.cx, wanted.name, wanted.type, kb_id=self.kb_id)
                except Conflict:  # defined meanwhile by another writer
                    tag = self._defined_tags()[wanted.name]
            if tag.type == wanted.type:
                commands.set_tag(self.cx, tag.id, "page", page_id, wanted.value)

    def _defined_tags(self) -> dict[str, TagDefinition]:
        with self.cx.transaction() as conn:
            tags = queries.list_tags(conn, self.cx.actor.workspace_id, kb_id=self.kb_id)
        return {tag.name: tag for tag in tags}

    def _identify(self, kind: SourceKind, path: str, sha256: str) -> Known | bool | None:
        """What importing the file at `path` with these bytes does to the knowledge base.

        Reports and returns None when there is nothing to write: the item at `path` holds
        these bytes already, someone archived or deleted it, the bytes moved here from a path
        that is gone (the item follows them), or they are a copy of an item imported from a
        path that is still there. Otherwise returns the item to update, or True for a new one.
        """
        ws = self.cx.actor.workspace_id
        with self.cx.transaction() as conn:
            at_path = sources.find_by_path(conn, ws, self.kb_id, kind, path)
            same = [] if at_path else sources.find_by_content(conn, ws, self.kb_id, kind, sha256)
        if at_path is not None:
            if at_path.put_away:
                detail = "archived or deleted in Subspace; restore it to update it from its file"
                self.report.rows.append(ImportRow(path, kind, "skipped", detail))
                return None
            if at_path.sha256 == sha256:
                # Stored before, but its text still cannot be read: that is what to report.
                failure = at_path.failure
                outcome = "unchanged" if failure is None else "failed"
                self.report.rows.append(ImportRow(path, kind, outcome, failure or ""))
                return None
            return at_path
        # A file moves only within its folder (paths start with the folder's name): the same
        # bytes from another folder (another source) are a copy of that item while it lives,
        # and an item of their own once it was put away.
        folder = path.split("/", 1)[0]
        same = [k for k in same if k.source_path is None or k.source_path.split("/")[0] == folder
                or not k.put_away]  # fmt: skip
        for known in same:
            moved_here = known.source_path is None or (
                known.source_path.split("/")[0] == folder
                and not (self.base / known.source_path).exists()
            )
            if moved_here:
                # Its file is gone from where it was (or was imported before paths were
                # kept): these bytes are that file, moved here.
                sources.set_source_path(self.cx, kind, known.id, path)
                outcome = "unchanged" if known.source_path is None else "moved"
                detail = "" if known.source_path is None else f"from {known.source_path}"
                self.report.rows.append(ImportRow(path, kind, outcome, detail))
                return None
        if same:
            detail = f"the same bytes as {same[0].source_path}, imported already"
            self.report.rows.append(ImportRow(path, kind, "unchanged", detail))
            return None
        return True

    def _file(self, path: Path, label: str) -> None:
        size = path.stat().st_size
        check_upload_size(self.cx, size)
        data = path.read_bytes()
        sha256 = hashlib.sha256(data).hexdigest()
        found = self._identify("file", label, sha256)
        if found is None:
            return
        content_type = CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream")
        if isinstance(found, Known):
            stored = sources.replace_file_content(
                self.cx, found.id, data, content_type=content_type, source_path=label
            )
            self.report.rows.append(ImportRow(label, "file", "updated", file_id=stored.id))
            return
        stored = commands.upload_file(
            self.cx,
            path.name,
            data,
            content_type=content_type,
            kb_id=self.kb_id,
            source_path=label,
        )
        self.report.rows.append(ImportRow(label, "file", "added", file_id=stored.id))

    def report_missing(self, folder: str) -> None:
        """Add a row for each live page or file imported from under `folder` before whose file
        this import did not see: a one-shot import lists them and leaves them be."""
        seen = [row.source for row in self.report.rows]
        prefix = folder.rstrip("/") + "/" if folder else ""
        for kind, path in sources.missing_sources(self.cx, self.kb_id, prefix, seen):
            detail = "its file is gone from the folder; archive it if it is no longer wanted"
            self.report.rows.append(ImportRow(path, kind, "missing", detail))

    def read_message(self, raw: bytes) -> ParsedMail:
        """Parse one message in a parser child; ExtractionFailed says why it cannot be."""
        settings = self.cx.settings
        return self._parse(
            parse_message,
            (raw,),
            kwargs={
                "max_html_depth": settings.max_html_depth,
                "max_mime_depth": settings.max_mime_depth,
            },
            task="reading the message",
        )

    def add_message(self, raw: bytes, label: str) -> None:
        """Import one message (.eml bytes) and its attachments."""
        try:
            parsed = self.read_message(raw)
        except ExtractionFailed as exc:
            self.report.rows.append(ImportRow(label, "mail", "failed", exc.reason))
            return
        try:
            _, attachment_ids, notes = store_mail(self.cx, parsed, self.kb_id)
        except Conflict:
            self.report.rows.append(ImportRow(label, "mail", "unchanged"))
            return
        self.report.rows.append(ImportRow(label, "mail", "added", "; ".join(notes)))
        for file_id in attachment_ids:
            self.report.rows.append(
                ImportRow(f"{label} (attachment)", "file", "added", file_id=file_id)
            )

    def add_mailbox(self, data: bytes, label: str, *, max_messages: int | None = None) -> None:
        """Import every message of an mbox; a malformed one fails alone. Over `max_messages`,
        raise TooLarge before importing any."""
        try:
            messages = self._parse(split_mbox, (data,), task="reading the mailbox")
        except ExtractionFailed as exc:
            self.report.rows.append(ImportRow(label, "mail", "failed", exc.reason))
            return
        if max_messages is not None and len(messages) > max_messages:
            raise TooLarge(
                f"{label} holds {len(messages):,} messages; the limit for one upload is "
                f"{max_messages:,} (SUBSPACE_MAX_MAILBOX_MESSAGES). Split the mailbox, import it "
                "with `subspace import`, or raise the limit."
            )
        for index, raw in enumerate(messages, start=1):
            try:
                self.add_message(raw, f"{label}#{index}")
            except SubspaceError as exc:
                self.report.rows.append(
                    ImportRow(f"{label}#{index}", "mail", "failed", exc.message)
                )


TEXT_SNIFF_BYTES = 8192  # of a file without an extension, read to tell text from binary


def _is_text(path: Path) -> bool:
    """Whether a file without an extension holds text: its start is UTF-8 without NUL bytes."""
    with path.open("rb") as file:
        start = file.read(TEXT_SNIFF_BYTES)
    if not start.strip() or b"\0" in start:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(start, final=False)
    except UnicodeDecodeError:
        return False
    return True


def _kind(suffix: str) -> str:
    if suffix in PAGE_SUFFIXES or not suffix:
        return "page"
    if suffix in FILE_SUFFIXES:
        return "file"
    return "mail" if suffix in MAIL_SUFFIXES | MAILBOX_SUFFIXES else ""


def import_path(
    cx: Context,
    root: Path,
    *,
    kb_id: UUID,
    on_file: Callable[[Path], None] | None = None,
) -> ImportReport:
    """Import `root` (a file or a folder, recursively) into knowledge base `kb_id`.

    Each file is known by its path from the folder's parent ("notes/plans/q3.md"; a single
    file's starts with its folder's name too), so importing again updates what changed,
    follows what moved, and lists what is gone from an imported folder without archiving it.
    """
    root = root.resolve()
    base = root.parent if root.is_dir() else root.parent.parent
    importer = Importer(cx, kb_id, base=base)
    for path in importable_files(root):
        importer.add(path, path.relative_to(base).as_posix())
        if on_file is not None:
            on_file(path)
    importer.link_pending()
    if root.is_dir():
        importer.report_missing(root.relative_to(base).as_posix())
    return importer.report


def finish_extraction(db: Database, settings: Settings, report: ImportReport) -> None:
    """Extract the text of the files the import stored, and report the ones that failed."""
    by_id = {row.file_id: row for row in report.rows if row.file_id is not None}
    if not by_id:
        return
    extract_pending(db, settings, only=list(by_id), workers=os.cpu_count() or 1)
    with db.pool.connection() as conn:
        rows = conn.execute(
            "select f.id, f.status, f.status_reason, t.truncated from kb.files f "
            "left join search.file_text t on t.workspace_id = f.workspace_id and t.file_id = f.id "
            "where f.id = any(%s)",
            (list(by_id),),
        ).fetchall()
    for row in rows:
        if row["status"] == "failed":
            by_id[row["id"]].outcome = "failed"
            by_id[row["id"]].detail = row["status_reason"]
        elif row["truncated"]:
            by_id[row["id"]].detail = (
                f"its text was cut at {settings.max_extracted_chars:,} characters "
                f"(SUBSPACE_MAX_EXTRACTED_CHARS, or SUBSPACE_MAX_PDF_PAGES for a PDF)"
            )
