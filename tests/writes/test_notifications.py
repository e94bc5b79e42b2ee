"""The LISTEN thread the background loops share: what it delivers, and how it stops."""

from __future__ import annotations

import queue
import time

import psycopg
import pytest

from subspace.db import notifications
from subspace.db.notifications import Listener

CHANNEL = "subspace_test_channel"


def notify(dsn: str, payload: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("select pg_notify(%s, %s)", (CHANNEL, payload))


def listeners(dsn: str) -> int:
    """How many backends LISTEN on CHANNEL."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "select count(*) from pg_stat_activity where datname = current_database() "
            "and query = %s",
            (f"listen {CHANNEL}",),
        ).fetchone()
    return int(row[0]) if row else 0


def listening(dsn: str, *, until: int = 1) -> int:
    """How many backends LISTEN on CHANNEL, once `until` do (or after 10 s): a backend whose
    client closed its connection leaves a moment later."""
    deadline = time.monotonic() + 10
    while (count := listeners(dsn)) != until and time.monotonic() < deadline:
        time.sleep(0.02)
    return count


def notify_until_heard(dsn: str, received: queue.Queue[str], payload: str) -> None:
    """Notify `payload` until the listener hands it on: a listener that began listening again
    hears only what comes after."""
    deadline = time.monotonic() + 10
    while True:
        notify(dsn, payload)
        try:
            assert received.get(timeout=0.2) == payload
            return
        except queue.Empty:
            assert time.monotonic() < deadline, "the listener never listened again"


def test_each_notification_reaches_the_callback_with_its_payload(db_dsn: str) -> None:
    received: queue.Queue[str] = queue.Queue()
    listener = Listener(db_dsn, CHANNEL, received.put, name="test-listen")
    listener.start()
    try:
        assert listening(db_dsn) == 1
        for payload in ("one", "two", "three"):
            notify(db_dsn, payload)
        assert [received.get(timeout=10) for _ in range(3)] == ["one", "two", "three"]
    finally:
        listener.stop()


def test_stop_wakes_the_thread_however_long_it_would_wait(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notifications, "IDLE_S", 3600.0)
    listener = Listener(db_dsn, CHANNEL, lambda _: None, name="test-listen")
    listener.start()
    assert listening(db_dsn) == 1
    listener.stop(timeout_s=30)  # would give up after 30 s if the stop did not wake it
    assert not listener._thread.is_alive()
    assert listening(db_dsn, until=0) == 0  # its connection is closed, not left open
    listener.stop()  # twice is fine


def test_a_lost_connection_is_opened_again_and_listens_again(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notifications, "RECONNECT_S", 0.05)
    received: queue.Queue[str] = queue.Queue()
    listener = Listener(db_dsn, CHANNEL, received.put, name="test-listen")
    listener.start()
    try:
        assert listening(db_dsn) == 1
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            conn.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity "
                "where datname = current_database() and query = %s",
                (f"listen {CHANNEL}",),
            )
        notify_until_heard(db_dsn, received, "again")
    finally:
        listener.stop()


def test_a_channel_that_is_not_an_identifier_is_refused(db_dsn: str) -> None:
    with pytest.raises(ValueError, match="identifier"):
        Listener(db_dsn, "x; drop table kb.pages", lambda _: None, name="test-listen")


def test_a_callback_that_raises_loses_no_other_notification(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Were the connection dropped for the failure, the next notification would wait an hour.
    monkeypatch.setattr(notifications, "RECONNECT_S", 3600.0)
    received: queue.Queue[str] = queue.Queue()

    def on_notify(payload: str) -> None:
        if payload == "bad":
            raise RuntimeError("the callback failed")
        received.put(payload)

    listener = Listener(db_dsn, CHANNEL, on_notify, name="test-listen")
    listener.start()
    try:
        assert listening(db_dsn) == 1
        notify(db_dsn, "bad")
        notify(db_dsn, "good")
        assert received.get(timeout=10) == "good"
    finally:
        listener.stop()


def test_stop_succeeds_when_its_wake_up_pair_is_unusable(db_dsn: str) -> None:
    """A stop that raised left the loops stopped after it running on a closed database."""
    listener = Listener(db_dsn, CHANNEL, lambda _: None, name="test-listen")
    listener.start()
    assert listening(db_dsn) == 1
    listener._stop_writer.close()
    listener.stop(timeout_s=0.1)  # does not raise; the thread sees the flag within IDLE_S
    listener.stop()
