"""What keeps a browser safe with the app: the cross-site write check keyed on where the
credential came from, the headers on every response, and download names."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from subspace.api import create_app
from subspace.api.auth import COOKIE_NAME
from subspace.api.routes.files import download_name
from subspace.api.security_headers import APP_CSP
from subspace.config import Settings
from subspace.database import Database
from subspace.keys import create_key
from subspace.models import Actor
from subspace.sessions import create_signin_code, start_session

EVIL = {"origin": "http://evil.example"}


@pytest.fixture
def browser(database: Database, settings: Settings, actor: Actor) -> TestClient:
    """A client signed in the way the web app is: by its cookie alone."""
    with database.pool.connection() as conn:
        _, token = start_session(conn, create_signin_code(conn, actor, 5), days=1)
    client = TestClient(create_app(settings, database))
    client.cookies.set(COOKIE_NAME, token)
    return client


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"authorization": "Basic dXNlcjpwYXNz"},
        {"authorization": "Bearer"},  # a scheme without a key: the cookie still decides
        {"authorization": "Digest x"},
        {"x-api-key": "  "},
    ],
    ids=["cookie", "basic", "empty-bearer", "digest", "blank-x-api-key"],
)
def test_a_cookie_write_from_another_site_is_refused_whatever_else_it_sends(
    browser: TestClient, extra: dict[str, str]
) -> None:
    refused = browser.post("/api/pages", json={"title": "planted"}, headers={**EVIL, **extra})
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "cross_site"
    pages = browser.get("/api/pages").json()
    assert "planted" not in {page["title"] for page in pages}


def test_a_write_with_a_key_in_a_header_is_no_cross_site_risk(
    browser: TestClient, database: Database, actor: Actor
) -> None:
    with database.pool.connection() as conn:
        _, token = create_key(conn, actor, "script")
    for header in ({"authorization": f"Bearer {token}"}, {"x-api-key": token}):
        created = browser.post("/api/pages", json={"title": "scripted"}, headers={**EVIL, **header})
        assert created.status_code == 201, created.text
    own = browser.post(
        "/api/pages", json={"title": "mine"}, headers={"origin": "http://testserver"}
    )
    assert own.status_code == 201


def _security_headers(response: Any) -> dict[str, str]:
    names = ("x-content-type-options", "x-frame-options", "content-security-policy")
    return {name: response.headers.get(name) for name in names}


def test_every_response_forbids_framing_sniffing_and_inline_script(browser: TestClient) -> None:
    expected = {
        "x-content-type-options": "nosniff",
        "x-frame-options": "DENY",
        "content-security-policy": APP_CSP,
    }
    for path in ("/", "/signin", "/api/pages", "/static/app.css", "/healthz", "/api/nope"):
        assert _security_headers(browser.get(path)) == expected, path
    refused = browser.post("/api/pages", json={"title": "x"}, headers=EVIL)
    assert _security_headers(refused) == expected
    assert "script-src 'self';" in APP_CSP
    assert "unsafe-inline" not in APP_CSP.split("style")[0]
    assert "frame-ancestors 'none'" in APP_CSP
    docs = browser.get("/docs")  # Swagger UI starts from an inline script: its own policy
    assert "frame-ancestors 'none'" in docs.headers["content-security-policy"]
    assert docs.headers["content-security-policy"] != APP_CSP


def test_the_shell_runs_no_inline_script(browser: TestClient) -> None:
    html = browser.get("/").text
    for tag in html.split("<script")[1:]:
        attributes = tag.split(">", 1)[0]
        assert "src=" in attributes or 'type="application/json"' in attributes, attributes
    assert " on" not in html.split("<body", 1)[1].split(">", 1)[0]


@pytest.mark.parametrize(
    ("stored", "saved"),
    [
        ("../../../../etc/passwd", "passwd"),
        ("..\\..\\boot.ini", "boot.ini"),
        (".bashrc", "bashrc"),
        ("report\r\nSet-Cookie: x=1.pdf", "reportSet-Cookie: x=1.pdf"),
        ("../", "download"),
        ("Résumé 2026.pdf", "Résumé 2026.pdf"),
    ],
)
def test_a_download_is_named_by_its_last_path_part_only(stored: str, saved: str) -> None:
    assert download_name(stored) == saved


def test_a_download_of_a_climbing_name_saves_as_its_last_part(client: TestClient) -> None:
    uploaded = client.post(
        "/api/files", files={"file": ("../../../../etc/passwd", b"root:x:0:0", "text/plain")}
    )
    assert uploaded.status_code == 201, uploaded.text
    got = client.get(f"/api/files/{uploaded.json()['id']}/content")
    assert got.headers["content-disposition"] == (
        "attachment; filename=\"passwd\"; filename*=UTF-8''passwd"
    )
