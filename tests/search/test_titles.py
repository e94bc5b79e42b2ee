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
