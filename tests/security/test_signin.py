"""Signing in to the web app: a one-time code (or a pasted key) becomes a session of its own,
stored in Postgres; the cookie holds the session, never the key; sessions expire, end on
sign-out, from the CLI and the API, and when the key they were signed in with is revoked."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import httpx
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from subspace.api import create_app
from subspace.api.auth import COOKIE_NAME
from subspace.cli import main
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.keys import create_key, revoke_key
from subspace.sessions import create_signin_code, list_sessions
from subspace.web.signin import MAX_FAILURES


def browser_for(database: Database, settings: Settings) -> TestClient:
    """A browser: no key in a header, cookies kept, redirects shown."""
    return TestClient(create_app(settings, database), follow_redirects=False)


def new_code(database: Database, cx: Context, minutes: int = 15) -> str:
    with database.pool.connection() as conn:
        return create_signin_code(conn, cx.actor, minutes)


def sign_in(browser: TestClient, presented: str, **headers: str) -> httpx.Response:
    return browser.post("/signin", data={"code": presented}, headers=headers)


def test_a_code_becomes_a_session_cookie_and_works_once(
    database: Database, settings: Settings, cx: Context
) -> None:
    browser = browser_for(database, settings)
    assert browser.get("/").status_code == 401
    code = new_code(database, cx)
    shown = browser.get("/signin", params={"code": code})
    assert shown.status_code == 200
    assert code in shown.text and "<strong>Default</strong>" in shown.text  # named, unspent
    assert "<script" not in shown.text  # nothing signs the browser in by itself
    signed = sign_in(browser, code)
    assert signed.status_code == 303 and signed.headers["location"] == "/"
    cookie = signed.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE_NAME}=sss_")
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Secure" not in cookie
    assert re.search(r"Max-Age=604800\b", cookie)  # SUBSPACE_SESSION_DAYS, 7 by default
    assert browser.get("/").status_code == 200
    assert browser.get("/api/pages").status_code == 200
    again = browser_for(database, settings)
    refused = sign_in(again, code)
    assert refused.status_code == 401
    assert "already used" in refused.text and "subspace signin" in refused.text
    assert COOKIE_NAME not in again.cookies


def test_a_code_expires(database: Database, settings: Settings, cx: Context) -> None:
    code = new_code(database, cx)
    with database.pool.connection() as conn:
        conn.execute("update kb.signin_codes set expires_at = now() - interval '1 second'")
    assert sign_in(browser_for(database, settings), code).status_code == 401


def test_a_pasted_key_signs_in_and_revoking_it_ends_the_session(
    database: Database, settings: Settings, cx: Context
) -> None:
    with database.pool.connection() as conn:
        key, token = create_key(conn, cx.actor, "laptop")
    browser = browser_for(database, settings)
    signed = sign_in(browser, f"  {token} ")
    assert signed.status_code == 303
    assert token not in signed.headers["set-cookie"]
    with database.pool.connection() as conn:
        [session] = list_sessions(conn, cx.actor.workspace_id)
    assert session.key_id == key.id
    assert browser.get("/api/pages").status_code == 200
    with database.pool.connection() as conn:
        revoke_key(conn, cx.actor.workspace_id, key.id)
        assert list_sessions(conn, cx.actor.workspace_id) == []
    assert browser.get("/api/pages").status_code == 401
    page = browser.get("/")
    assert page.status_code == 401 and "Sign in again" in page.text


def test_sign_out_ends_the_session_not_just_the_cookie(
    database: Database, settings: Settings, cx: Context
) -> None:
    browser = browser_for(database, settings)
    sign_in(browser, new_code(database, cx))
    token = browser.cookies[COOKIE_NAME]
    out = browser.post("/signout")
    assert out.status_code == 303
    assert COOKIE_NAME not in browser.cookies
    copied = browser_for(database, settings)
    copied.cookies.set(COOKIE_NAME, token)  # a copy of the cookie taken before
    assert copied.get("/api/pages").status_code == 401


def test_sessions_expire_unused_and_are_moved_on_by_use(
    database: Database, settings: Settings, cx: Context
) -> None:
    browser = browser_for(database, settings)
    sign_in(browser, new_code(database, cx))
    with database.pool.connection() as conn:
        conn.execute(
            "update kb.sessions set last_used_at = now() - interval '2 days', "
            "expires_at = now() + interval '5 days'"
        )
    assert browser.get("/api/pages").status_code == 200
    with database.pool.connection() as conn:
        row = conn.execute("select expires_at - now() as left from kb.sessions").fetchone()
        assert row is not None and row["left"].days == 6  # 7 days from this use
        conn.execute("update kb.sessions set expires_at = now() - interval '1 second'")
    assert browser.get("/api/pages").status_code == 401


@pytest.mark.parametrize(
    ("change", "headers", "secure"),
    [
        ({}, {"x-forwarded-proto": "https"}, False),  # from an address not trusted
        ({"trusted_proxies": "*"}, {"x-forwarded-proto": "https"}, True),
        ({"trusted_proxies": "*"}, {}, False),
        ({"public_url": "https://subspace.example.org"}, {}, True),
    ],
    ids=["untrusted-proxy", "trusted-proxy", "plain-http", "https-public-url"],
)
def test_the_cookie_is_secure_when_the_browser_came_over_https(
    database: Database, settings: Settings, cx: Context,
    change: dict[str, str], headers: dict[str, str], secure: bool,
) -> None:  # fmt: skip
    browser = browser_for(database, replace(settings, **change))  # type: ignore[arg-type]
    signed = sign_in(browser, new_code(database, cx), **headers)
    assert signed.status_code == 303
    assert ("; Secure" in signed.headers["set-cookie"]) is secure


def test_failed_sign_ins_are_limited_per_address(
    database: Database, settings: Settings, cx: Context
) -> None:
    browser = browser_for(database, settings)
    workspace = cx.actor.workspace_id.hex
    for n in range(MAX_FAILURES):
        assert sign_in(browser, f"ssc_{workspace}_guess{n}").status_code == 401
    limited = sign_in(browser, new_code(database, cx))  # even a good code waits now
    assert limited.status_code == 429
    assert int(limited.headers["retry-after"]) > 0
    assert "Too many failed sign-ins" in limited.text


@pytest.mark.parametrize(
    "presented", ["", "   ", "hello", "ssc_nothex_abc", "ssc__", "ssk_x", "x" * 10_000, "\0"]
)
def test_what_is_neither_a_code_nor_a_key_is_refused_clearly(
    database: Database, settings: Settings, presented: str
) -> None:
    refused = sign_in(browser_for(database, settings), presented)
    assert refused.status_code in (400, 401), refused.text
    assert "Internal" not in refused.text
    assert 'class="notice notice-error"' in refused.text


def test_another_site_cannot_sign_a_browser_in(
    database: Database, settings: Settings, cx: Context
) -> None:
    code = new_code(database, cx)
    browser = browser_for(database, settings)
    refused = sign_in(browser, code, origin="http://evil.example")
    assert refused.status_code == 403
    assert COOKIE_NAME not in browser.cookies
    assert sign_in(browser, code, origin="http://testserver").status_code == 303  # unspent


def test_an_old_link_with_a_key_signs_nobody_in(
    database: Database, settings: Settings, client: TestClient
) -> None:
    token = client.headers["authorization"].split()[1]
    browser = browser_for(database, settings)
    answer = browser.get("/", params={"token": token})
    assert answer.status_code == 401
    assert "no longer carry an API key" in answer.text
    assert "set-cookie" not in answer.headers


def test_the_api_lists_and_ends_the_callers_sessions(
    database: Database, settings: Settings, cx: Context, client: TestClient
) -> None:
    browser = browser_for(database, settings)
    sign_in(browser, new_code(database, cx), **{"user-agent": "Firefox on the laptop"})
    [listed] = client.get("/api/sessions").json()
    assert listed["user_agent"] == "Firefox on the laptop" and listed["key_id"] is None
    assert set(listed) >= {"id", "created_at", "last_used_at", "expires_at"}
    assert "token" not in json.dumps(listed)
    ended = client.delete(f"/api/sessions/{listed['id']}")
    assert ended.status_code == 200 and ended.json()["ended_at"] is not None
    assert client.get("/api/sessions").json() == []
    assert browser.get("/api/pages").status_code == 401
    assert client.delete(f"/api/sessions/{listed['id']}").status_code == 200  # twice is fine


def test_the_cli_prints_a_link_lists_and_ends_sessions(
    runner: CliRunner, database: Database, settings: Settings, cx: Context
) -> None:
    printed = runner.invoke(main, ["signin"])
    assert printed.exit_code == 0, printed.output
    link = printed.stdout.strip()
    assert link.startswith("http://127.0.0.1:8765/signin?code=ssc_")
    browser = browser_for(database, settings)
    assert sign_in(browser, link.split("code=")[1]).status_code == 303
    listed = json.loads(runner.invoke(main, ["sessions", "list", "--json"]).stdout)
    assert len(listed) == 1
    table = runner.invoke(main, ["sessions", "list"]).stdout
    assert listed[0]["id"][:8] in table and "a code" in table
    ended = runner.invoke(main, ["sessions", "end", listed[0]["id"][:8]])
    assert ended.exit_code == 0, ended.output
    assert browser.get("/api/pages").status_code == 401
    unknown = runner.invoke(main, ["sessions", "end", "00000000"])
    assert unknown.exit_code == 1 and "session" in unknown.output


def test_the_link_names_the_public_url(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBSPACE_PUBLIC_URL", "https://kb.example.org/")
    link = runner.invoke(main, ["signin"]).stdout.strip()
    assert link.startswith("https://kb.example.org/signin?code=ssc_")


def test_a_removed_user_is_signed_out(database: Database, settings: Settings, cx: Context) -> None:
    """Sessions belong to their user: removing the user removes them."""
    browser = browser_for(database, settings)
    sign_in(browser, new_code(database, cx))
    with database.pool.connection() as conn:
        user = conn.execute(
            "insert into kb.users (workspace_id, name) values (%s, 'guest') returning id",
            (cx.actor.workspace_id,),
        ).fetchone()
        assert user is not None
        conn.execute("update kb.sessions set user_id = %s", (user["id"],))
        conn.execute("delete from kb.users where id = %s", (user["id"],))
    assert browser.get("/api/pages").status_code == 401


def test_a_key_in_a_link_is_not_used_and_the_page_says_why(
    database: Database, settings: Settings, client: TestClient
) -> None:
    token = client.headers["authorization"].split()[1]
    browser = browser_for(database, settings)
    shown = browser.get("/signin", params={"code": token})
    assert shown.status_code == 400
    assert "does not belong in a link" in shown.text and token not in shown.text


def test_a_new_sign_in_ends_the_session_the_browser_held(
    database: Database, settings: Settings, cx: Context
) -> None:
    browser = browser_for(database, settings)
    sign_in(browser, new_code(database, cx))
    first = browser.cookies[COOKIE_NAME]
    shown = browser.get("/signin", params={"code": (code := new_code(database, cx))})
    assert "signed in already" in shown.text
    sign_in(browser, code)
    assert browser.cookies[COOKIE_NAME] != first
    with database.pool.connection() as conn:
        assert len(list_sessions(conn, cx.actor.workspace_id)) == 1


def test_each_load_of_the_app_moves_the_cookie_on(
    database: Database, settings: Settings, cx: Context
) -> None:
    browser = browser_for(database, settings)
    sign_in(browser, new_code(database, cx))
    shell = browser.get("/")
    assert shell.status_code == 200
    assert re.search(r"Max-Age=604800\b", shell.headers["set-cookie"])


def test_behind_a_proxy_the_public_address_is_this_server(
    database: Database, settings: Settings, cx: Context
) -> None:
    public = replace(settings, public_url="https://kb.example.org")
    browser = browser_for(database, public)
    signed = sign_in(browser, new_code(database, cx), origin="https://kb.example.org")
    assert signed.status_code == 303
    assert (
        sign_in(browser, new_code(database, cx), origin="javascript://testserver").status_code
        == 403
    )


def test_an_unknown_cookie_is_told_apart_from_an_ended_session(
    database: Database, settings: Settings, cx: Context
) -> None:
    browser = browser_for(database, settings)
    browser.cookies.set(COOKIE_NAME, f"sss_{cx.actor.workspace_id.hex}_forged")
    assert "not one of ours" in browser.get("/").text
