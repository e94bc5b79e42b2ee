"""IMAP sources against a real Dovecot: new mail only, one mail per Message-ID, the server's
deletions and moves, IDLE, and a server that refuses, is down or speaks garbage."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from collections.abc import Callable, Iterator
from uuid import UUID

import pytest

from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.sources import model
from subspace.sources.folder import SourceFailed
from subspace.sources.runner import SourcesLoop
from subspace.sources.secrets import new_key
from tests import imap_server
from tests.conftest import free_port
from tests.imap_server import Dovecot, message
from tests.sources.conftest import sync

pytestmark = pytest.mark.slow


def add_mailbox(
    cx: Context, server_port: int, *, name: str = "mail", folders: list[str] | None = None,
    password: str = imap_server.PASSWORD,
) -> model.SyncedSource:  # fmt: skip
    config = model.imap_config("127.0.0.1", port=server_port, tls="none", user=imap_server.USER,
                               folders=folders or ["INBOX"])  # fmt: skip
    return model.add_source(cx, name, "imap", config, password=password)


def mail_rows(database: Database) -> list[dict[str, object]]:
    with database.pool.connection() as conn:
        return conn.execute(
            "select id, message_id, subject, archived_at from kb.mail order by message_id"
        ).fetchall()


def listings(database: Database, mail_id: UUID) -> list[str]:
    with database.pool.connection() as conn:
        rows = conn.execute(
            "select key from kb.source_items where item_id = %s and not archived order by key",
            (mail_id,),
        ).fetchall()
    return [row["key"].split(":")[0] for row in rows]


def test_a_mailbox_is_read_once_then_only_new_mail_is_fetched(
    database: Database, keyed: Settings, keyed_cx: Context, dovecot: Dovecot
) -> None:
    dovecot.deliver("INBOX", [message(n) for n in range(30)])
    source = add_mailbox(keyed_cx, dovecot.port)
    first = sync(database, keyed, source)
    assert (first["added"], first["fetched"], first["messages"]) == (30, 30, 30)
    dovecot.deliver("INBOX", [message(n) for n in range(30, 33)])
    second = sync(database, keyed, source)
    assert (second.get("added"), second["fetched"], second["messages"]) == (3, 3, 33)
    assert sync(database, keyed, source)["fetched"] == 0
    assert len(mail_rows(database)) == 33
    with database.pool.connection() as conn:
        row = conn.execute("select status, last_counts from kb.sources").fetchone()
    assert row is not None and row["status"] == "ok" and row["last_counts"]["fetched"] == 0


def test_a_message_in_two_folders_is_one_mail_listed_under_both(
    database: Database, keyed: Settings, keyed_cx: Context, dovecot: Dovecot
) -> None:
    dovecot.deliver("INBOX", [message(1), message(2)])
    dovecot.deliver("Projects", [message(2), message(3)])
    source = add_mailbox(keyed_cx, dovecot.port, folders=["INBOX", "Projects"])
    counts = sync(database, keyed, source)
    assert (counts["added"], counts["listed"], counts["messages"]) == (3, 1, 3)
    mails = {row["message_id"]: row["id"] for row in mail_rows(database)}
    assert listings(database, mails["<report-2@example.org>"]) == ["INBOX", "Projects"]  # type: ignore[arg-type]


def test_the_servers_deletions_archive_and_its_moves_keep(
    database: Database, keyed: Settings, keyed_cx: Context, dovecot: Dovecot
) -> None:
    dovecot.deliver("INBOX", [message(n) for n in range(4)])
    dovecot.deliver("Archive", [])
    source = add_mailbox(keyed_cx, dovecot.port, folders=["INBOX", "Archive"])
    sync(database, keyed, source)
    client = dovecot.client()
    client.select_folder("INBOX")
    first, second = sorted(client.search())[:2]
    client.move([first], "Archive")  # moved between followed folders: kept
    client.delete_messages([second])  # deleted on the server: archived here
    client.expunge()
    client.logout()
    counts = sync(database, keyed, source)
    assert counts["archived"] == 1
    archived = {row["message_id"] for row in mail_rows(database) if row["archived_at"]}
    assert archived == {"<report-1@example.org>"}
    moved = {row["message_id"]: row["id"] for row in mail_rows(database)}["<report-0@example.org>"]
    assert listings(database, moved) == ["Archive"]  # type: ignore[arg-type]
    # Filed again on the server, the archived mail comes back.
    dovecot.deliver("INBOX", [message(1)])
    assert sync(database, keyed, source)["restored"] == 1
    assert not any(row["archived_at"] for row in mail_rows(database))


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> float:
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout_s, "timed out"
        time.sleep(0.05)
    return time.monotonic() - start


@pytest.fixture
def sources_loop(database: Database, keyed: Settings) -> Iterator[SourcesLoop]:
    loop = SourcesLoop(database, keyed)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    yield loop
    loop.stop()
    thread.join(timeout=20)
    assert not thread.is_alive()


def test_mail_delivered_while_the_sync_waits_arrives_through_idle(
    database: Database, keyed_cx: Context, dovecot: Dovecot, sources_loop: SourcesLoop
) -> None:
    dovecot.deliver("INBOX", [message(n) for n in range(5)])
    add_mailbox(keyed_cx, dovecot.port)
    wait_for(lambda: len(mail_rows(database)) == 5)
    time.sleep(0.5)  # the runner is in IDLE now (its scan interval is a minute)
    dovecot.deliver("INBOX", [message(n) for n in range(5, 15)])
    wait_for(lambda: len(mail_rows(database)) == 15, timeout_s=10)


class GarbageServer:
    """A TCP server that greets with something that is not IMAP."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            conn.sendall(b"\x00\xff HELLO THIS IS NOT IMAP\r\n" * 3)
            conn.close()

    def close(self) -> None:
        self.listener.close()


def status_of(database: Database, name: str) -> tuple[str, str | None, int]:
    with database.pool.connection() as conn:
        row = conn.execute(
            "select status, status_reason, failures from kb.sources where name = %s", (name,)
        ).fetchone()
    assert row is not None
    return row["status"], row["status_reason"], row["failures"]


def test_a_refusing_down_or_garbled_server_is_reported_and_the_others_go_on(
    database: Database, keyed_cx: Context, dovecot: Dovecot, sources_loop: SourcesLoop
) -> None:
    garbage = GarbageServer()
    try:
        add_mailbox(keyed_cx, dovecot.port, name="wrong password", password="not it")
        add_mailbox(keyed_cx, free_port(), name="down")
        add_mailbox(keyed_cx, garbage.port, name="garbage")
        dovecot.deliver("INBOX", [message(1)])
        add_mailbox(keyed_cx, dovecot.port, name="good")
        wait_for(lambda: len(mail_rows(database)) == 1)
        wait_for(lambda: all(status_of(database, n)[0] != "waiting"
                             for n in ("wrong password", "down", "garbage")))  # fmt: skip
        status, reason, _ = status_of(database, "wrong password")
        assert status == "paused" and "refused the user name or password" in (reason or "")
        status, reason, _ = status_of(database, "down")
        assert status == "failed" and "Cannot reach" in (reason or "")
        status, reason, _ = status_of(database, "garbage")
        assert status == "failed" and "not IMAP" in (reason or ""), reason
        # Retried with a growing pause, never crashing the loop; the good one keeps up.
        wait_for(lambda: status_of(database, "down")[2] >= 2)
        dovecot.deliver("INBOX", [message(2)])
        wait_for(lambda: len(mail_rows(database)) == 2, timeout_s=10)
    finally:
        garbage.close()


def test_a_missing_or_changed_key_pauses_the_source_and_says_so(
    database: Database, keyed: Settings, keyed_cx: Context, dovecot: Dovecot
) -> None:
    source = add_mailbox(keyed_cx, dovecot.port)
    for settings, says in (
        (dataclasses.replace(keyed, sources_key=""), "SUBSPACE_SOURCES_KEY is not set"),
        (dataclasses.replace(keyed, sources_key=new_key()), "another SUBSPACE_SOURCES_KEY"),
    ):
        with pytest.raises(SourceFailed) as failed:
            sync(database, settings, source)
        assert failed.value.paused and says in failed.value.reason
        assert status_of(database, "mail")[0] == "paused"
    assert sync(database, keyed, source)["messages"] == 0  # the right key: it syncs again
    with database.pool.connection() as conn:
        row = conn.execute("select secret from kb.sources").fetchone()
    assert row is not None and imap_server.PASSWORD.encode() not in bytes(row["secret"])


def test_a_message_that_cannot_be_stored_fails_alone_and_the_rest_arrive(
    database: Database, keyed: Settings, keyed_cx: Context, dovecot: Dovecot
) -> None:
    bad = (
        b"From: a@example.org\r\nSubject: Bad attachment\r\nMessage-ID: <bad@example.org>\r\n"
        b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\n"
        b"Content-Type: text/plain\r\n\r\nSee the file.\r\n--B\r\n"
        b'Content-Type: text/plain\r\nContent-Disposition: attachment; filename="\x01"\r\n\r\n'
        b"x\r\n--B--\r\n"
    )
    dovecot.deliver("INBOX", [message(1), bad, message(2)])
    source = add_mailbox(keyed_cx, dovecot.port)
    counts = sync(database, keyed, source)
    assert (counts["added"], counts["failed"]) == (2, 1)
    with database.pool.connection() as conn:
        errors = model.item_errors(conn, source)
    assert len(errors) == 1 and "file name" in errors[0].error
    assert sync(database, keyed, source)["fetched"] == 0  # moved past it, not fetched again


@pytest.mark.parametrize("how", ["cut on the way", "server restarted"])
def test_a_connection_lost_while_waiting_is_opened_again(
    database: Database, keyed_cx: Context, dovecot: Dovecot, sources_loop: SourcesLoop, how: str
) -> None:
    relay = imap_server.Relay(dovecot.port)
    try:
        dovecot.deliver("INBOX", [message(1)])
        add_mailbox(keyed_cx, relay.port)
        wait_for(lambda: len(mail_rows(database)) == 1)
        time.sleep(0.5)  # in IDLE
        relay.drop() if how == "cut on the way" else dovecot.restart()
        dovecot.deliver("INBOX", [message(2)])
        wait_for(lambda: len(mail_rows(database)) == 2, timeout_s=30)
        wait_for(lambda: status_of(database, "mail")[0] == "ok", timeout_s=10)  # round ended
    finally:
        relay.close()


def test_mail_in_a_second_followed_folder_arrives_without_a_scan(
    database: Database, keyed_cx: Context, dovecot: Dovecot, sources_loop: SourcesLoop
) -> None:
    dovecot.deliver("INBOX", [message(1)])
    dovecot.deliver("Projects", [message(2)])
    add_mailbox(keyed_cx, dovecot.port, folders=["INBOX", "Projects"])
    wait_for(lambda: len(mail_rows(database)) == 2)
    dovecot.deliver("Projects", [message(3)])  # IDLE watches INBOX; the scan is a minute away
    wait_for(lambda: len(mail_rows(database)) == 3, timeout_s=30)


def test_a_refused_password_is_not_tried_again_until_a_new_one_is_given(
    database: Database, keyed_cx: Context, dovecot: Dovecot, sources_loop: SourcesLoop
) -> None:
    dovecot.deliver("INBOX", [message(1)])
    source = add_mailbox(keyed_cx, dovecot.port, password="not it")
    wait_for(lambda: status_of(database, "mail")[0] == "paused")
    time.sleep(7)  # a failed round would have been tried again after 2 s and 4 s
    assert status_of(database, "mail")[2] == 1  # one attempt: no account locked by retries
    model.set_password(keyed_cx, source.id, imap_server.PASSWORD)
    wait_for(lambda: len(mail_rows(database)) == 1, timeout_s=10)
    # The mail is stored as it is read; the round says "ok" once it has ended.
    wait_for(lambda: status_of(database, "mail")[0] == "ok", timeout_s=10)


def test_a_new_password_is_logged_in_with_at_once(
    database: Database, keyed_cx: Context, dovecot: Dovecot, sources_loop: SourcesLoop
) -> None:
    source = add_mailbox(keyed_cx, dovecot.port)
    wait_for(lambda: status_of(database, "mail")[0] == "ok")
    model.set_password(keyed_cx, source.id, "no longer right")  # the old connection still works
    wait_for(lambda: status_of(database, "mail")[0] == "paused", timeout_s=10)
