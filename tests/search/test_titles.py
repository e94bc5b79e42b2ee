"""Titles and subjects as people write them: a real mail's subject ("Re: Limiting Perl CPU
Utilization...") found by its words first, and those words marked in the row's title."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

MAIL = Path(__file__).parents[1] / "relevance" / "real" / "workspace" / "mail"


def test_a_subject_with_a_reply_prefix_comes_first_with_its_words_marked(
    client: TestClient,
) -> None:
    for name in ("msg_32.eml", "msg_35.eml", "msg_36.eml"):
        data = (MAIL / name).read_bytes()
        assert client.post("/api/mail/import", files={"file": (name, data)}).status_code == 200
    response = client.post(
        "/api/search", json={"query": "Limiting Perl CPU Utilization", "mode": "lexical"}
    )
    rows = response.json()["rows"]
    first = rows[0]
    assert (first["type"], first["title"]) == ("mail", "Re: Limiting Perl CPU Utilization...")
    marked = [first["title"][a:b] for a, b in first["title_highlights"]]
    assert marked == ["Limiting", "Perl", "CPU", "Utilization"]


def test_a_mail_without_a_body_shows_its_subject_as_its_passage(client: TestClient) -> None:
    """A message of attachments only has no body: its row still says something."""
    from tests.samples import make_email

    raw = make_email(
        "Quarterly harbour dues", "", message_id="<dues@x>",
        attachments=[("dues.txt", "text/plain", b"Dues are forty euros.")],
    )  # fmt: skip
    assert client.post("/api/mail/import", files={"file": ("dues.eml", raw)}).status_code == 200
    rows = client.post("/api/search", json={"query": "harbour dues", "mode": "lexical"})
    (mail,) = [row for row in rows.json()["rows"] if row["type"] == "mail"]
    assert mail["passage"] == "Quarterly harbour dues"
    assert [mail["passage"][a:b] for a, b in mail["highlights"]] == ["harbour", "dues"]
