"""A message's own words apart from what it quotes and its signature: real clients' replies,
and search reading only what a message says."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from subspace.ingest.extract import ExtractLimits, extract
from subspace.ingest.mail import parse_message
from subspace.ingest.replies import split_reply
from tests.samples import make_email

LIMITS = ExtractLimits(5_000_000, 2_000, 200 << 20, 5_000, 512)
REPLIES = sorted((Path(__file__).parent / "fixtures" / "replies").glob("*.eml"))


def test_there_are_real_replies_to_read() -> None:
    assert len(REPLIES) == 12


@pytest.mark.parametrize("path", REPLIES, ids=[p.stem for p in REPLIES])
def test_a_real_clients_reply_says_hello_and_folds_the_rest(path: Path) -> None:
    """Each message answers "Hi" with "Hello", as Android, AOL, Apple Mail, Gmail, Outlook,
    Thunderbird and others write a reply: quoted lines, an attribution, an original message
    below, a signature or a "Sent from my iPhone"."""
    parsed = parse_message(path.read_bytes())
    assert parsed.body_text == "Hello"
    assert parsed.quoted_text
    assert not parsed.quoted_text.startswith("Hello")


def test_what_is_kept_and_what_is_folded() -> None:
    # A message that is all quote keeps it: a forward says what it forwards.
    assert split_reply("> only a quote\n> here") == ("> only a quote\n> here", "")
    # Answers between quotes stay; the quotes go.
    own, folded = split_reply("> Friday?\nYes.\n> And the room?\nThe blue one.")
    assert (own, folded) == ("Yes.\nThe blue one.", "> Friday?\n> And the room?")
    # A "--" rule in the middle of a long message is not a signature.
    body = "Intro\n--\n" + "\n".join(f"point {n}" for n in range(20))
    assert split_reply(body) == (body, "")


def test_search_reads_what_a_message_says_and_the_view_keeps_the_quote(
    client: TestClient,
) -> None:
    reply = make_email(
        "Re: Tours",
        "The ferry leaves at nine.\n\nOn Mon, 2 Nov 2026, Bo <bo@example.com> wrote:\n"
        "> When does the lighthouse tour start?\n\n-- \nAna, harbour office\n",
        message_id="<reply@x>",
    )
    imported = client.post("/api/mail/import", files={"file": ("reply.eml", reply)})
    assert imported.status_code == 200, imported.text
    (mail,) = client.get("/api/mail").json()
    assert mail["body_text"] == "The ferry leaves at nine."
    assert "> When does the lighthouse tour start?" in mail["quoted_text"]
    assert "Ana, harbour office" in mail["quoted_text"]

    def found(query: str) -> list[str]:
        response = client.get("/api/search", params={"q": query, "mode": "lexical"})
        return [row["type"] for row in response.json()["rows"]]

    assert found("ferry") == ["mail"]
    assert found("lighthouse") == []


def test_a_bounced_message_and_its_report_are_attachments_with_their_text() -> None:
    """CPython's msg_16: a delivery failure report (message/delivery-status) carrying the
    message it returns (message/rfc822); both were dropped before."""
    bounce = Path(__file__).parents[1] / "relevance" / "real" / "workspace" / "mail" / "msg_16.eml"
    parsed = parse_message(bounce.read_bytes())
    by_type = {a.content_type: a for a in parsed.attachments}
    returned = by_type["message/rfc822"]
    assert returned.name == "[scr] yeah for Ians!!.eml"
    text = extract(returned.data, returned.name, returned.content_type, LIMITS)
    assert text.title == "[scr] yeah for Ians!!"
    assert "I always love to find more Ian's" in text.text
    report = by_type["message/delivery-status"]
    assert (
        "Reporting-MTA: dns; cougar.noc.ucla.edu"
        in extract(report.data, report.name, report.content_type, LIMITS).text
    )
