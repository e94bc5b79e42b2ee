"""Hostile mail within bounds: headers cut before the parser sees them, fields cut so the
message is kept, and the parser children shared within one memory budget."""

from __future__ import annotations

import os
import threading
import time
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient

from subspace.errors import Busy, TooMany
from subspace.ingest import isolation
from subspace.ingest.failures import ExtractionFailed
from subspace.ingest.importer import cut_name
from subspace.ingest.isolation import IsolatedExtractor, ParserPool
from subspace.ingest.mail import MAX_HEADER_BYTES, parse_message, scan_message
from subspace.shares import Shares
from tests.samples import make_email

_MiB = 1024 * 1024
BODY = b"\r\n\r\nThe ferry leaves at nine.\r\n"


def _message(*headers: bytes, body: bytes = BODY) -> bytes:
    return (
        b"Message-ID: <bounds@example.com>\r\nFrom: a@example.com\r\n"
        + b"\r\n".join(headers)
        + body
    )


def test_a_subject_of_100000_encoded_words_is_cut_and_parses_in_little_memory() -> None:
    raw = _message(b"Subject: " + b" ".join([b"=?utf-8?b?w6k=?="] * 100_000))
    assert len(raw) > 1_600_000
    # 800 MB went to parsing it whole; cut, it fits a child capped at 400 MB.
    parser = IsolatedExtractor(400 * _MiB)
    try:
        parsed = parser.run(parse_message, (raw,), 30, task="reading the message")
    finally:
        parser.close()
    assert parsed.subject.startswith("é" * 100)
    assert parsed.notes == [f"the Subject header was cut to {MAX_HEADER_BYTES // 1024} KB"]
    assert parsed.body_text.strip() == "The ferry leaves at nine."
    assert parsed.raw == raw  # what is stored is the message as it came


def test_a_to_of_200000_addresses_is_cut_and_the_body_still_read() -> None:
    folded = b",\r\n ".join(b"user%d@example.com" % n for n in range(200_000))
    parsed = parse_message(_message(b"To: " + folded, b"Subject: roll call"))
    assert parsed.recipients.startswith("user0@example.com, user1@example.com")
    assert len(parsed.recipients) < MAX_HEADER_BYTES
    assert parsed.subject == "roll call"
    assert parsed.notes == [f"the To header was cut to {MAX_HEADER_BYTES // 1024} KB"]
    assert parsed.body_text.strip() == "The ferry leaves at nine."


def test_headers_of_parts_are_cut_too_and_the_structure_survives() -> None:
    name = "x" * 100_000
    continued = b";\r\n".join(
        b" filename*%d*=utf-8''%s" % (n, name[n * 70 : (n + 1) * 70].encode())
        for n in range(len(name) // 70)
    )
    raw = _message(
        b"Subject: minutes",
        b'Content-Type: multipart/mixed; boundary="b1"',
        body=b"\r\n\r\n--b1\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n"
        b"--b1\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment;\r\n"
        + continued
        + b"\r\n\r\n%PDF-1.4 the bytes\r\n--b1--\r\n",
    )
    scan = scan_message(raw, max_depth=10)
    assert scan.cut == ["Content-Disposition"]
    parsed = parse_message(raw)
    assert parsed.body_text == "See attached."
    assert [a.data for a in parsed.attachments] == [b"%PDF-1.4 the bytes"]


def test_a_nested_message_is_still_refused_when_too_deep() -> None:
    raw = b"Content-Type: multipart/mixed; boundary=a\r\n\r\n--a\r\n" * 5
    assert scan_message(raw, max_depth=3).too_deep
    assert not scan_message(raw, max_depth=10).too_deep


def test_a_long_attachment_name_is_cut_and_the_message_kept(client: TestClient) -> None:
    name = "minutes of the harbour board " * 60 + ".pdf"
    raw = make_email(
        "Board minutes",
        "Attached.",
        message_id="<long-name@example.com>",
        attachments=[(name, "application/pdf", b"%PDF-1.4 minutes")],
    )
    imported = client.post("/api/mail/import", files={"file": ("board.eml", raw, "message/rfc822")})
    assert imported.status_code == 200, imported.text
    rows = imported.json()["rows"]
    mail = next(row for row in rows if row["kind"] == "mail")
    assert mail["outcome"] == "added"
    assert mail["detail"] == "an attachment's name was cut to 1,000 characters"
    files = client.get("/api/files").json()
    stored = next(f for f in files if f["name"].startswith("minutes of the harbour board"))
    assert len(stored["name"]) == 1_000
    assert stored["name"].endswith("….pdf")


def test_a_cut_name_keeps_its_extension() -> None:
    assert cut_name("a" * 20 + ".docx", 12) == "aaaaaa….docx"
    assert cut_name("short.pdf", 12) == "short.pdf"
    assert cut_name("no-extension-at-all", 8) == "no-exte…"


def test_shares_bound_each_key_and_the_whole() -> None:
    shares = Shares("parsers at work", total=3, per_key=2)
    a, b = uuid4(), uuid4()
    with shares.hold(a, 0), shares.hold(a, 0):
        with pytest.raises(TooMany, match="already has 2 parsers at work"), shares.hold(a, 0.05):
            pass
        with (
            shares.hold(b, 0),
            pytest.raises(Busy, match="already has 3 parsers at work"),
            shares.hold(uuid4(), 0.05),
        ):
            pass
        assert shares.held() == 2
        assert shares.held(a) == 2
    assert shares.held() == 0


def test_a_waiting_holder_gets_the_slot_given_back() -> None:
    shares = Shares("searches in flight", total=1, per_key=1)
    got = threading.Event()
    release = threading.Event()

    def first() -> None:
        with shares.hold("a", None):
            release.wait(10)

    holder = threading.Thread(target=first)
    holder.start()
    while shares.held() == 0:
        pass

    def second() -> None:
        with shares.hold("b", 10):
            got.set()

    waiter = threading.Thread(target=second)
    waiter.start()
    assert not got.wait(0.2)  # the only slot is held
    release.set()
    assert got.wait(10)
    holder.join()
    waiter.join()


def test_the_pool_reuses_its_children_and_never_has_more_than_its_size() -> None:
    pool = ParserPool(256 * _MiB, 2)
    try:
        with pool.lease("a", 1) as first, pool.lease("a", 1) as second:  # alone: both
            pids = {first.run(_pid, (), 10), second.run(_pid, (), 10)}
        assert len(pids) == 2
        with pool.lease("a", 1) as mine:
            assert mine.run(_pid, (), 10) in pids  # a child kept, not a new one
            with pool.lease("b", 1) as theirs:
                assert theirs.run(_pid, (), 10) in pids
                with pytest.raises(Busy), pool.lease("c", 0.05):
                    pass
            with pytest.raises(TooMany), pool.lease("a", 0.05):
                pass  # b used the pool a moment ago: a holds all but one
    finally:
        pool.close()


def _pid() -> int:
    import os

    return os.getpid()


def test_a_slot_given_back_goes_to_the_workspace_holding_fewest() -> None:
    """A holds both slots and has a third request waiting; B asks after it: the slot A gives
    back goes to B, which holds none, before A's request that came first."""
    shares = Shares("requests in flight", total=2, per_key=3)
    order: list[str] = []
    releases = [threading.Event(), threading.Event()]

    def holder(release: threading.Event) -> None:
        with shares.hold("a", None):
            release.wait(10)

    def waiter(key: str) -> None:
        with shares.hold(key, 10):
            order.append(key)

    holders = [threading.Thread(target=holder, args=(r,)) for r in releases]
    for thread in holders:
        thread.start()
    while shares.held() < 2:
        pass
    again = threading.Thread(target=waiter, args=("a",))
    again.start()
    while len(shares._waiting) < 1:
        pass
    theirs = threading.Thread(target=waiter, args=("b",))
    theirs.start()
    while len(shares._waiting) < 2:
        pass
    releases[0].set()
    theirs.join(10)
    assert order[0] == "b"  # a still held one, b none: b went first
    releases[1].set()
    for thread in (*holders, again):
        thread.join(10)
    assert order == ["b", "a"]


def test_beside_another_workspace_a_key_holds_its_shared_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from subspace import shares as module

    monkeypatch.setattr(module, "ACTIVE_S", 0.2)
    shares = Shares("searches in flight", total=None, per_key=2, shared_per_key=1)
    with shares.hold("a", 0), shares.hold("a", 0):
        pass  # alone, the whole share
    with (
        shares.hold("b", 0),
        shares.hold("a", 0),
        pytest.raises(TooMany, match="its share while other workspaces"),
        shares.hold("a", 0.05),
    ):
        pass
    with pytest.raises(TooMany, match="its share"), shares.hold("a", 0), shares.hold("a", 0):
        pass  # b gave its slot back a moment ago: it still counts as using the server
    time.sleep(0.3)
    with shares.hold("a", 0), shares.hold("a", 0):
        pass


def _exit_out_of_memory() -> None:
    os._exit(isolation.OUT_OF_MEMORY_EXIT)


def test_a_child_too_short_of_memory_to_answer_is_reported_over_the_memory_cap() -> None:
    extractor = IsolatedExtractor(256 * _MiB)
    try:
        with pytest.raises(ExtractionFailed, match="SUBSPACE_EXTRACT_MEMORY_MB"):
            extractor.run(_exit_out_of_memory, (), 10)
    finally:
        extractor.close()


class _NoMemoryLeft:
    """A pipe to the parent in a child whose memory is gone: nothing can be sent."""

    def send(self, message: object) -> None:
        raise MemoryError


def test_a_child_that_cannot_send_its_answer_exits_with_the_out_of_memory_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exits: list[int] = []
    monkeypatch.setattr(isolation.os, "_exit", exits.append)
    isolation._answer_out_of_memory(_NoMemoryLeft(), "extraction", 100 * _MiB)  # type: ignore[arg-type]
    assert exits == [isolation.OUT_OF_MEMORY_EXIT]
