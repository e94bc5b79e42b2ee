"""Mail: .eml and .mbox through the standard library, attachments as files."""

from __future__ import annotations

from fastapi.testclient import TestClient

from subspace.config import Settings
from subspace.database import Database
from subspace.ingest.mail import parse_message
from subspace.ingest.worker import extract_pending
from tests.samples import make_docx, make_email, make_mbox

ENCODED = (
    b"Message-ID: <enc@x>\r\n"
    b"From: =?utf-8?q?Jos=C3=A9_Mu=C3=B1oz?= <jose@example.com>\r\n"
    b"To: team@example.com\r\n"
    b"Subject: =?iso-8859-1?q?R=E9union_de_l=27=E9quipe?=\r\n"
    b"Date: Tue, 03 Nov 2026 10:00:00 +0100\r\n"
    b"Content-Type: text/plain; charset=iso-8859-1\r\n"
    b"Content-Transfer-Encoding: quoted-printable\r\n\r\n"
    b"L'ordre du jour est pr=E9vu pour mardi.\r\n"
)


def test_rfc2047_headers_and_charsets_are_decoded() -> None:
    parsed = parse_message(ENCODED)
    assert parsed.subject == "Réunion de l'équipe"
    assert parsed.sender == "José Muñoz <jose@example.com>"
    assert parsed.body_text.strip() == "L'ordre du jour est prévu pour mardi."
    assert parsed.sent_at is not None
    assert parsed.sent_at.utcoffset() is not None


def test_html_only_mail_goes_through_the_html_extractor() -> None:
    raw = make_email(
        "Status", "", html="<p>All <b>green</b></p><script>x()</script><ul><li>a</li></ul>"
    )
    assert parse_message(raw).body_text == "All green\n- a"


def test_nul_bytes_and_invalid_utf8_in_headers_are_cleaned() -> None:
    raw = (
        b"Message-ID: <bad@x>\r\nSubject: caf\xe9 \x00menu\r\nFrom: a@b\r\n\r\n"
        b"body\x00 text\xff\r\n"
    )
    parsed = parse_message(raw)
    assert "\x00" not in parsed.subject
    assert "menu" in parsed.subject
    assert "\x00" not in parsed.body_text
    assert "body" in parsed.body_text


def test_a_message_without_message_id_gets_a_stable_one() -> None:
    raw = make_email("No id", "body", message_id=None)
    assert parse_message(raw).message_id == parse_message(raw).message_id
    assert parse_message(raw).message_id.endswith("@subspace.invalid>")


def test_mbox_import_over_http_with_attachments_duplicates_and_a_bad_message(
    client: TestClient, database: Database, settings: Settings
) -> None:
    good = make_email(
        "Invoice INV-7",
        "See the attached plan.",
        message_id="<inv7@x>",
        attachments=[
            (
                "plan.docx",
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                make_docx(["Attached plan text"]),
            )
        ],
    )
    other = make_email("Lunch", "Noon at the usual place", message_id="<lunch@x>")
    malformed = b"this line is not a header\nnor is this one\n"
    mbox = make_mbox([good, malformed, other])
    response = client.post("/api/mail/import", files={"file": ("inbox.mbox", mbox)})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["counts"] == {"added": 3, "failed": 1}
    assert [r["outcome"] for r in body["rows"]] == ["added", "added", "failed", "added"]
    assert body["rows"][2]["detail"] == "the message has no headers"
    mail = {m["subject"]: m for m in client.get("/api/mail").json()}
    assert set(mail) == {"Invoice INV-7", "Lunch"}
    files = client.get("/api/files").json()
    assert [(f["name"], f["mail_id"]) for f in files] == [
        ("plan.docx", mail["Invoice INV-7"]["id"])
    ]
    extract_pending(database, settings)
    assert client.get(f"/api/files/{files[0]['id']}").json()["status"] == "ready"
    again = client.post("/api/mail/import", files={"file": ("inbox.mbox", mbox)}).json()
    assert again["counts"] == {"unchanged": 2, "failed": 1}
    assert len(client.get("/api/files").json()) == 1


def test_a_single_eml_over_http(client: TestClient) -> None:
    response = client.post("/api/mail/import", files={"file": ("one.eml", ENCODED)})
    assert response.json()["counts"] == {"added": 1}
    assert client.get("/api/mail").json()[0]["subject"] == "Réunion de l'équipe"


def test_an_attachment_without_a_name_is_named_by_its_description_or_type() -> None:
    from email.message import EmailMessage

    outer = EmailMessage()
    outer["Subject"] = "Fwd: plans"
    outer["Message-ID"] = "<fwd@example.org>"
    outer.set_content("See below.")
    outer.add_attachment(b"plain words", maintype="text", subtype="x-one")
    outer.add_attachment(b"%PDF-1.4 x", maintype="application", subtype="pdf")
    outer.get_payload()[-1]["Content-Description"] = "Signed contract"
    parsed = parse_message(outer.as_bytes(), max_html_depth=256, max_mime_depth=50)
    assert [a.name for a in parsed.attachments] == [
        "attachment-1.txt",
        "Signed contract.pdf",
    ]
