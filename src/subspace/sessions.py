"""Signing in to the web app: one-time sign-in codes, and the sessions they become.

A code (`subspace serve` and `subspace signin` print a link carrying one) or an API key
pasted into the sign-in page is exchanged once for a session; the session's own token is the
browser's cookie, so a key never sits in a cookie, a link or a browser's history. Like keys,
codes and session tokens carry their workspace's id, so a lookup never leaves the workspace,
and only their hashes are stored.
"""

from __future__ import annotations

import hashlib
import secrets
from uuid import UUID

from subspace.db.pool import Conn
from subspace.errors import NotFound, Unauthorized
from subspace.keys import KEY_PREFIX, authenticate_key_id, find_id_by_start
from subspace.models import Actor, Session
from subspace.text import single_line

CODE_PREFIX = "ssc"
SESSION_PREFIX = "sss"
CODE_BYTES = 18  # 144 random bits: no guessing within any number of attempts
SESSION_BYTES = 32
USER_AGENT_CHARS = 200  # of the browser's User-Agent kept to tell sessions apart
SESSION_COLUMNS = "id, user_id, key_id, user_agent, created_at, last_used_at, expires_at, ended_at"
NOT_OURS = "This browser's sign-in cookie is not one of ours. Sign in again."
NOT_VALID = (
    "That sign-in code is not valid: it was mistyped, already used, or has expired. Run "
    "`subspace signin` on the server for a new link."
)


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _workspace_of(presented: str, prefix: str) -> UUID | None:
    """The workspace id a code or token of `prefix` carries; None when it is not one."""
    parts = presented.split("_", 2)
    if len(parts) != 3 or parts[0] != prefix or not parts[2]:
        return None
    try:
        return UUID(hex=parts[1])
    except ValueError:
        return None


def create_signin_code(conn: Conn, actor: Actor, minutes: int) -> str:
    """A code that signs `actor` in once within `minutes`. The workspace's codes spent or
    expired a day ago, and its sessions ended or expired a month ago, go with it."""
    code = f"{CODE_PREFIX}_{actor.workspace_id.hex}_{secrets.token_urlsafe(CODE_BYTES)}"
    conn.execute(
        "delete from kb.signin_codes where workspace_id = %s "
        "and coalesce(used_at, expires_at) < now() - interval '1 day'",
        (actor.workspace_id,),
    )
    conn.execute(
        "delete from kb.sessions where workspace_id = %s "
        "and least(coalesce(ended_at, expires_at), expires_at) < now() - interval '30 days'",
        (actor.workspace_id,),
    )
    conn.execute(
        "insert into kb.signin_codes (workspace_id, user_id, code_hash, expires_at) "
        "values (%s, %s, %s, now() + make_interval(mins => %s))",
        (actor.workspace_id, actor.user_id, _hash(code), minutes),
    )
    return code


def workspace_of_code(conn: Conn, code: str) -> str | None:
    """The name of the workspace an unspent, unexpired code signs in to; None otherwise.
    Reading it spends nothing."""
    workspace_id = _workspace_of(code.strip(), CODE_PREFIX)
    if workspace_id is None:
        return None
    row = conn.execute(
        "select w.name from kb.signin_codes c join kb.workspaces w using (workspace_id) "
        "where c.workspace_id = %s and c.code_hash = %s and c.used_at is null "
        "and c.expires_at > now()",
        (workspace_id, _hash(code.strip())),
    ).fetchone()
    return None if row is None else str(row["name"])


def start_session(
    conn: Conn, presented: str, *, days: int, user_agent: str = ""
) -> tuple[Session, str]:
    """Exchange a sign-in code (once) or an API key for a new session of `days` without
    use; returns it and its token, the cookie's value. Unauthorized when the code or key is
    not valid, with what to do."""
    presented = presented.strip()
    workspace_id = _workspace_of(presented, CODE_PREFIX)
    key_id: UUID | None = None
    if workspace_id is not None:
        row = conn.execute(
            "update kb.signin_codes set used_at = now() where workspace_id = %s "
            "and code_hash = %s and used_at is null and expires_at > now() returning user_id",
            (workspace_id, _hash(presented)),
        ).fetchone()
        if row is None:
            raise Unauthorized(NOT_VALID)
        user_id = row["user_id"]
    elif presented.startswith(f"{KEY_PREFIX}_"):
        actor, key_id = authenticate_key_id(conn, presented)
        workspace_id, user_id = actor.workspace_id, actor.user_id
    else:
        raise Unauthorized(
            "That is neither a sign-in code nor an API key. Paste the code of a sign-in link "
            "(`subspace signin` prints one) or a key from `subspace keys create`."
        )
    token = f"{SESSION_PREFIX}_{workspace_id.hex}_{secrets.token_urlsafe(SESSION_BYTES)}"
    agent = single_line(
        user_agent[:USER_AGENT_CHARS], what="A user agent", limit=USER_AGENT_CHARS,
        setting="a fixed limit", required=False,
    )  # fmt: skip
    row = conn.execute(
        "insert into kb.sessions (workspace_id, user_id, key_id, token_hash, user_agent, "
        "expires_at) values (%s, %s, %s, %s, %s, now() + make_interval(days => %s)) "
        f"returning {SESSION_COLUMNS}",
        (workspace_id, user_id, key_id, _hash(token), agent, days),
    ).fetchone()
    assert row is not None
    return Session(**row), token


def authenticate_session(conn: Conn, token: str, *, days: int) -> Actor:
    """The actor a live session acts for, its expiry moved on to `days` from now (written
    at most once a minute, so reads stay reads); Unauthorized when it is unknown, ended,
    expired, or its key was revoked."""
    workspace_id = _workspace_of(token, SESSION_PREFIX)
    if workspace_id is None:
        raise Unauthorized(NOT_OURS)
    # The key's revocation is checked here as well as ended with its sessions (keys.py):
    # a key revoked by any other means still ends them.
    live = (
        "s.workspace_id = %(ws)s and s.token_hash = %(hash)s and s.ended_at is null "
        "and s.expires_at > now() and (s.key_id is null or exists (select 1 from kb.api_keys k "
        "where k.workspace_id = s.workspace_id and k.id = s.key_id and k.revoked_at is null))"
    )
    values = {"ws": workspace_id, "hash": _hash(token), "days": days}
    row = conn.execute(
        "update kb.sessions s set last_used_at = now(), "
        "expires_at = now() + make_interval(days => %(days)s) "
        f"where {live} and s.last_used_at < now() - interval '1 minute' returning s.user_id",
        values,
    ).fetchone()
    if row is None:
        row = conn.execute(f"select s.user_id from kb.sessions s where {live}", values).fetchone()
    if row is None:
        known = conn.execute(
            "select 1 from kb.sessions where workspace_id = %s and token_hash = %s",
            (workspace_id, _hash(token)),
        ).fetchone()
        raise Unauthorized(
            "Your session has ended (signed out, expired, or ended from another place). "
            "Sign in again."
            if known
            else NOT_OURS
        )
    return Actor(workspace_id=workspace_id, user_id=row["user_id"])


def list_sessions(conn: Conn, workspace_id: UUID, user_id: UUID | None = None) -> list[Session]:
    """The workspace's live sessions (of one user when given), newest first."""
    rows = conn.execute(
        f"select {SESSION_COLUMNS} from kb.sessions where workspace_id = %s "
        "and (%s::uuid is null or user_id = %s) and ended_at is null and expires_at > now() "
        "order by created_at desc",
        (workspace_id, user_id, user_id),
    ).fetchall()
    return [Session(**row) for row in rows]


def find_session_id(conn: Conn, workspace_id: UUID, prefix: str) -> UUID:
    """The id of the one session of the workspace whose id starts with `prefix`."""
    return find_id_by_start(conn, "kb.sessions", "session", workspace_id, prefix)


def end_session(
    conn: Conn, workspace_id: UUID, session_id: UUID, user_id: UUID | None = None
) -> Session:
    """End a session (of one user when given): its cookie answers 401 from now on. Safe to
    call twice."""
    row = conn.execute(
        "update kb.sessions set ended_at = coalesce(ended_at, now()) where workspace_id = %s "
        f"and id = %s and (%s::uuid is null or user_id = %s) returning {SESSION_COLUMNS}",
        (workspace_id, session_id, user_id, user_id),
    ).fetchone()
    if row is None:
        raise NotFound("session", session_id)
    return Session(**row)


def end_session_of_token(conn: Conn, token: str) -> None:
    """Sign out: end the session a cookie holds, if it is one."""
    workspace_id = _workspace_of(token, SESSION_PREFIX)
    if workspace_id is not None:
        conn.execute(
            "update kb.sessions set ended_at = coalesce(ended_at, now()) "
            "where workspace_id = %s and token_hash = %s",
            (workspace_id, _hash(token)),
        )
