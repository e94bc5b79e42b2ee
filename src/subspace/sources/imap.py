"""One round of an IMAP source's sync, and the wait for the next message (IDLE).

A folder is read from where the last round stopped: its UIDVALIDITY and the last UID taken
are the source's cursor, so nothing is fetched twice while UIDVALIDITY holds (when the server
changes it, its old UIDs mean nothing and the folder is read again; what is in already is
recognised by Message-ID and only listed). Each message is stored, listed and the cursor
moved past it in one transaction: a round killed at any point loses and duplicates nothing.

A message is one mail however many followed folders hold it (one Message-ID), listed under
each. What the server's moves and deletions do here: a message gone from a followed folder is
no longer listed under it; a mail no followed folder lists any more is archived, not deleted,
so a message deleted on the server, or moved to a folder not followed, leaves search but can
be restored, as a file gone from a watched folder is. A folder the server will not open is
reported and left as it was: a folder renamed on the server archives nothing.
"""

from __future__ import annotations

import imaplib
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any
from uuid import UUID

from imapclient import IMAPClient
from imapclient.exceptions import IMAPClientAbortError, IMAPClientError, LoginError
from psycopg.types.json import Jsonb

from subspace import commands
from subspace.context import Context
from subspace.db import queries
from subspace.db.pool import Conn
from subspace.errors import Conflict, SubspaceError
from subspace.ingest.failures import ExtractionFailed
from subspace.ingest.importer import Importer, store_mail, stored_mail_id
from subspace.sources.folder import SourceFailed
from subspace.sources.model import SyncedSource

TIMEOUT_S = 30.0  # for connecting and for each answer of the server
BATCH = 50  # messages whose sizes are asked in one command
FETCH_BYTES = 16 * 1024 * 1024  # of message bodies fetched in one command
IDLE_CHECK_S = 1.0  # how often a wait in IDLE looks at the stop flag
IDLE_MAX_S = 25 * 60  # RFC 2177: a client re-issues IDLE at least every 29 minutes
# Followed folders past the first (IDLE watches one folder a connection) are read this often.
MORE_FOLDERS_S = 10.0


def _error_of(exc: BaseException, config: dict[str, Any]) -> SourceFailed:
    where = f"{config['host']}:{config['port']}"
    if isinstance(exc, LoginError):
        return SourceFailed(
            f"{where} refused the user name or password ({exc}). Give the password again "
            "(`subspace sources password NAME`, or in the Sources view).",
            paused=True,
        )
    if isinstance(exc, ssl.SSLError):
        return SourceFailed(f"TLS with {where} failed: {exc}. Check the server's TLS mode.")
    if isinstance(exc, socket.timeout | TimeoutError):
        return SourceFailed(f"{where} did not answer within {TIMEOUT_S:.0f} s.")
    if isinstance(exc, OSError):
        return SourceFailed(f"Cannot reach {where}: {exc.strerror or exc}.")
    return SourceFailed(f"{where} answered something that is not IMAP as expected: {exc}")


@contextmanager
def speaking_to(config: dict[str, Any]) -> Iterator[None]:
    """Whatever the server does wrong becomes a SourceFailed that says what happened."""
    try:
        yield
    except (IMAPClientError, imaplib.IMAP4.error, OSError, ValueError, EOFError) as exc:
        raise _error_of(exc, config) from exc


def open_mailbox(config: dict[str, Any], password: str) -> IMAPClient:
    """A connection logged in to the source's server (TLS as its config says)."""
    with speaking_to(config):
        context = ssl.create_default_context()
        client = IMAPClient(
            config["host"],
            port=config["port"],
            ssl=config["tls"] == "tls",
            ssl_context=context,
            timeout=TIMEOUT_S,
        )
        try:
            if config["tls"] == "starttls":
                client.starttls(context)
            client.login(config["user"], password)
        except BaseException:
            _close(client)
            raise
    return client


def _close(client: IMAPClient) -> None:
    try:
        client.logout()
    except Exception:  # already gone: closing is all that is left to do
        with suppress(Exception):
            client.shutdown()


def close_mailbox(client: IMAPClient) -> None:
    _close(client)


def sync_mailbox(
    cx: Context, source: SyncedSource, client: IMAPClient, stop: threading.Event | None = None
) -> Counter[str]:
    """Fetch what arrived in each followed folder, then reflect what left them."""
    importer = Importer(cx, source.kb_id)
    counts: Counter[str] = Counter(fetched=0)
    opened: dict[str, int] = {}  # folder → its UIDVALIDITY, for the folders that opened
    with speaking_to(source.config):
        for folder in source.config["folders"]:
            if stop is not None and stop.is_set():
                return counts
            opened_at = _open(cx, source, client, folder, counts)
            if opened_at is None:
                continue
            validity, uidnext = opened_at
            opened[folder] = validity
            if _fetch_new(cx, source, client, importer, folder, validity, counts, stop):
                _pass_expunged(cx, source, folder, validity, uidnext)
        for folder, validity in opened.items():
            client.select_folder(folder, readonly=True)
            present = set(client.search("ALL"))
            _forget_gone(cx, source, folder, validity, present, counts)
    counts["messages"] = _listed(cx, source)
    return counts


def _open(
    cx: Context, source: SyncedSource, client: IMAPClient, folder: str, counts: Counter[str]
) -> tuple[int, int] | None:
    """Select the folder; its UIDVALIDITY and UIDNEXT, or None (reported) when the server
    refuses it."""
    try:
        info = client.select_folder(folder, readonly=True)
    except IMAPClientAbortError:
        raise  # the connection, not the folder: the round fails and reconnects
    except IMAPClientError as exc:
        counts["failed"] += 1
        with cx.transaction() as conn:
            _record(conn, source, folder, None, error=f"the server would not open it: {exc}")
        return None
    with cx.transaction() as conn:  # the folder opens again: no longer an error
        conn.execute(
            "delete from kb.source_items where workspace_id = %s and source_id = %s and key = %s",
            (source.workspace_id, source.id, folder),
        )
    return int(info[b"UIDVALIDITY"]), int(info.get(b"UIDNEXT", 0))


def _fetch_new(
    cx: Context,
    source: SyncedSource,
    client: IMAPClient,
    importer: Importer,
    folder: str,
    validity: int,
    counts: Counter[str],
    stop: threading.Event | None,
) -> bool:
    """Fetch and store the folder's messages past the cursor; False when stopped first."""
    with cx.transaction() as conn:
        place = _cursor(conn, source).get(folder) or {}
    last = int(place.get("last_uid", 0)) if place.get("uidvalidity") == validity else 0
    # "n:*" always matches the folder's last message, even below n: keep the new ones only.
    uids = sorted(uid for uid in client.search(["UID", f"{last + 1}:*"]) if uid > last)
    limit = cx.settings.max_upload_bytes
    for start in range(0, len(uids), BATCH):
        if stop is not None and stop.is_set():
            return False
        batch = uids[start : start + BATCH]
        sizes = client.fetch(batch, ["RFC822.SIZE"])
        size_of = {uid: int(sizes.get(uid, {}).get(b"RFC822.SIZE", 0)) for uid in batch}
        wanted = [uid for uid in batch if size_of[uid] <= limit]
        bodies: dict[int, Any] = {}
        for part in _by_bytes(wanted, size_of):
            bodies.update(client.fetch(part, ["BODY.PEEK[]"]))
        counts["fetched"] += len(wanted)
        for uid in batch:
            key = f"{folder}:{validity}:{uid}"
            raw = bodies.get(uid, {}).get(b"BODY[]")
            if raw is None:
                size = int(sizes.get(uid, {}).get(b"RFC822.SIZE", 0))
                why = (
                    f"{size:,} bytes, over SUBSPACE_MAX_UPLOAD_BYTES ({limit:,}): left out"
                    if size > limit
                    else "the server sent no body for it"
                )
                outcome = _keep(cx, source, folder, validity, uid, key, None, why)
            else:
                outcome = _store(cx, source, importer, folder, validity, uid, key, raw)
            counts[outcome] += 1
    return True


def _pass_expunged(
    cx: Context, source: SyncedSource, folder: str, validity: int, uidnext: int
) -> None:
    """Move the cursor up to the UIDs the folder had given when it was opened: those not
    fetched were expunged before they could be, and the wait for new mail compares the
    cursor with the folder's next UID."""
    with cx.transaction() as conn:
        place = _cursor(conn, source).get(folder) or {}
        last = int(place.get("last_uid", 0)) if place.get("uidvalidity") == validity else 0
        if uidnext - 1 > last or place.get("uidvalidity") != validity:
            _advance(conn, source, folder, validity, max(last, uidnext - 1))


def _by_bytes(uids: list[int], size_of: dict[int, int]) -> Iterator[list[int]]:
    """`uids` in runs of at most FETCH_BYTES of messages (one larger message alone), so a
    fetch never holds fifty of the largest messages at once."""
    run: list[int] = []
    held = 0
    for uid in uids:
        if run and held + size_of[uid] > FETCH_BYTES:
            yield run
            run, held = [], 0
        run.append(uid)
        held += size_of[uid]
    if run:
        yield run


def _store(
    cx: Context,
    source: SyncedSource,
    importer: Importer,
    folder: str,
    validity: int,
    uid: int,
    key: str,
    raw: bytes,
) -> str:
    try:
        parsed = importer.read_message(raw)
    except ExtractionFailed as exc:
        return _keep(cx, source, folder, validity, uid, key, None, exc.reason)
    except SubspaceError as exc:  # no parser child free in time: the next round tries again
        raise SourceFailed(f"reading a message failed: {exc.message}") from exc
    with cx.transaction() as conn:
        bound = cx.on(conn)
        mail_id: UUID | None
        error = None
        try:
            mail, _, _ = store_mail(bound, parsed, source.kb_id)
            mail_id, outcome = mail.id, "added"
        except Conflict:  # in already, from another folder, source or import
            mail_id, outcome = stored_mail_id(bound, conn, parsed), "listed"
            if mail_id is not None and _restore_if_ours(bound, conn, source, mail_id):
                outcome = "restored"
        except SubspaceError as exc:  # a field no mail may hold: this message fails alone
            mail_id, outcome, error = None, "failed", exc.message
        _record(conn, source, key, mail_id, error=error)
        _advance(conn, source, folder, validity, uid)
    return outcome


def _keep(
    cx: Context,
    source: SyncedSource,
    folder: str,
    validity: int,
    uid: int,
    key: str,
    mail_id: UUID | None,
    error: str,
) -> str:
    """Record a message that could not be stored, and move past it."""
    with cx.transaction() as conn:
        _record(conn, source, key, mail_id, error=error)
        _advance(conn, source, folder, validity, uid)
    return "failed"


def _record(
    conn: Conn, source: SyncedSource, key: str, mail_id: UUID | None, *, error: str | None = None
) -> None:
    conn.execute(
        "insert into kb.source_items (workspace_id, source_id, key, item_kind, item_id, error) "
        "values (%s, %s, %s, %s, %s, %s) on conflict (workspace_id, source_id, key) do update "
        "set item_kind = excluded.item_kind, item_id = excluded.item_id, error = "
        "excluded.error, archived = false, synced_at = now()",
        (source.workspace_id, source.id, key, "mail" if mail_id else None, mail_id,
         error[:2000] if error else None),
    )  # fmt: skip


def _cursor(conn: Conn, source: SyncedSource) -> dict[str, Any]:
    row = conn.execute(
        "select cursor from kb.sources where workspace_id = %s and id = %s",
        (source.workspace_id, source.id),
    ).fetchone()
    return {} if row is None else dict(row["cursor"])


def _advance(conn: Conn, source: SyncedSource, folder: str, validity: int, uid: int) -> None:
    conn.execute(
        "update kb.sources set cursor = jsonb_set(cursor, array[%s], %s) "
        "where workspace_id = %s and id = %s",
        (folder, Jsonb({"uidvalidity": validity, "last_uid": uid}), source.workspace_id,
         source.id),
    )  # fmt: skip


def _restore_if_ours(cx: Context, conn: Conn, source: SyncedSource, mail_id: UUID) -> bool:
    """Restore the mail when this source archived it (it left every followed folder) and it
    is back in one; one archived by a person stays archived."""
    row = conn.execute(
        "delete from kb.source_items where workspace_id = %s and source_id = %s "
        "and item_id = %s and archived returning key",
        (source.workspace_id, source.id, mail_id),
    ).fetchone()
    if row is None or queries.get_mail(conn, source.workspace_id, mail_id).deleted_at:
        return False  # deleted by a person since: theirs to restore
    commands.restore_mail(cx, mail_id)
    return True


def _forget_gone(
    cx: Context,
    source: SyncedSource,
    folder: str,
    validity: int,
    present: set[int],
    counts: Counter[str],
) -> None:
    """Unlist the messages gone from `folder`; archive the mail no followed folder holds."""
    with cx.transaction() as conn:
        rows = conn.execute(
            "select key, item_id from kb.source_items where workspace_id = %s and "
            "source_id = %s and starts_with(key, %s) and not archived",
            (source.workspace_id, source.id, f"{folder}:"),
        ).fetchall()
    for row in rows:
        held_validity, _, uid = row["key"].removeprefix(f"{folder}:").partition(":")
        if not uid.isdigit() or (held_validity == str(validity) and int(uid) in present):
            continue
        with cx.transaction() as conn:
            conn.execute(
                "delete from kb.source_items where workspace_id = %s and source_id = %s "
                "and key = %s",
                (source.workspace_id, source.id, row["key"]),
            )
            counts["unlisted"] += 1
            if row["item_id"] is None or _still_listed(conn, source, row["item_id"]):
                continue
            if queries.get_mail(conn, source.workspace_id, row["item_id"]).archived_at:
                continue  # put away by a person: theirs, never restored by the sync
            commands.archive_mail(cx.on(conn), row["item_id"])
            # Kept, marked: were the message to come back, the mail would be restored.
            conn.execute(
                "insert into kb.source_items (workspace_id, source_id, key, item_kind, "
                "item_id, archived) values (%s, %s, %s, 'mail', %s, true)",
                (source.workspace_id, source.id, row["key"], row["item_id"]),
            )
            counts["archived"] += 1


def _still_listed(conn: Conn, source: SyncedSource, mail_id: UUID) -> bool:
    """Whether a followed folder of any source still holds the mail."""
    row = conn.execute(
        "select 1 from kb.source_items where workspace_id = %s and item_id = %s "
        "and not archived limit 1",
        (source.workspace_id, mail_id),
    ).fetchone()
    return row is not None


def _listed(cx: Context, source: SyncedSource) -> int:
    with cx.transaction() as conn:
        row = conn.execute(
            "select count(distinct item_id) as n from kb.source_items where workspace_id = %s "
            "and source_id = %s and item_kind = 'mail' and not archived",
            (source.workspace_id, source.id),
        ).fetchone()
    return int(row["n"]) if row else 0


def supports_idle(client: IMAPClient, source: SyncedSource) -> bool:
    with speaking_to(source.config):
        return bool(client.has_capability("IDLE"))


def wait_for_mail(
    client: IMAPClient, source: SyncedSource, stop: threading.Event, timeout_s: float
) -> bool:
    """Wait in IDLE on the first followed folder until the server says something changed
    (True), `timeout_s` passes or `stop` is set (False). Mail that came between the round
    and now, found by the folder's next UID, ends the wait at once; the other folders are
    looked at every MORE_FOLDERS_S."""
    folder = source.config["folders"][0]
    if len(source.config["folders"]) > 1:
        timeout_s = min(timeout_s, MORE_FOLDERS_S)
    deadline = time.monotonic() + min(timeout_s, IDLE_MAX_S)
    place = source.cursor.get(folder) or {}
    with speaking_to(source.config):
        info = client.select_folder(folder, readonly=True)
        if (
            place.get("uidvalidity") != info.get(b"UIDVALIDITY")
            or int(info.get(b"UIDNEXT", 0)) > int(place.get("last_uid", 0)) + 1
        ):
            return True
        client.idle()
        try:
            empty = 0  # answers in a row that brought nothing before their timeout
            while not stop.is_set() and time.monotonic() < deadline:
                asked = time.monotonic()
                responses = client.idle_check(timeout=IDLE_CHECK_S)
                if any(
                    len(response) > 1 and response[1] in (b"EXISTS", b"EXPUNGE")
                    for response in responses
                ):
                    return True
                # imapclient reads a closed connection as no news: a socket that keeps
                # saying it has something, and gives nothing, is closed.
                quick = not responses and time.monotonic() - asked < IDLE_CHECK_S / 2
                empty = empty + 1 if quick else 0
                if empty >= 3:
                    raise SourceFailed(f"{source.config['host']} closed the connection.")
        finally:
            with suppress(Exception):  # on a closed connection there is nothing to end
                client.idle_done()
    return False
