"""API keys: create, list, revoke, and resolve a presented key to the actor it acts for."""

from __future__ import annotations

import hashlib
import secrets
from uuid import UUID

from subspace.db.pool import Conn
from subspace.errors import NotFound, Unauthorized
from subspace.models import Actor, ApiKey

# The workspace id travels inside the key so a lookup never has to leave its workspace
# (the keys table stays distributable by workspace_id).
KEY_PREFIX = "ssk"
KEY_COLUMNS = "id, user_id, name, key_prefix as prefix, created_at, last_used_at, revoked_at"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def default_actor(conn: Conn) -> Actor:
    """The first workspace and its first user: who the CLI acts as by default."""
    row = conn.execute(
        "select w.workspace_id, u.id as user_id from kb.workspaces w "
        "join kb.users u using (workspace_id) order by w.created_at, u.created_at limit 1"
    ).fetchone()
    if row is None:
        raise NotFound("workspace", "default")
    return Actor(workspace_id=row["workspace_id"], user_id=row["user_id"])


def create_key(conn: Conn, actor: Actor, name: str = "") -> tuple[ApiKey, str]:
    """Create a key for `actor`; return it and the secret token, which is shown only once."""
    token = f"{KEY_PREFIX}_{actor.workspace_id.hex}_{secrets.token_urlsafe(32)}"
    row = conn.execute(
        "insert into kb.api_keys (workspace_id, user_id, name, key_prefix, key_hash) "
        f"values (%s, %s, %s, %s, %s) returning {KEY_COLUMNS}",
        (actor.workspace_id, actor.user_id, name, token[:12], _hash(token)),
    ).fetchone()
    assert row is not None
    return ApiKey(**row), token


def list_keys(conn: Conn, workspace_id: UUID) -> list[ApiKey]:
    rows = conn.execute(
        f"select {KEY_COLUMNS} from kb.api_keys where workspace_id = %s order by created_at",
        (workspace_id,),
    ).fetchall()
    return [ApiKey(**row) for row in rows]


def revoke_key(conn: Conn, workspace_id: UUID, key_id: UUID) -> ApiKey:
    """Revoke the key; every later request with it answers 401. Safe to call twice."""
    row = conn.execute(
        "update kb.api_keys set revoked_at = coalesce(revoked_at, now()) "
        f"where workspace_id = %s and id = %s returning {KEY_COLUMNS}",
        (workspace_id, key_id),
    ).fetchone()
    if row is None:
        raise NotFound("API key", key_id)
    return ApiKey(**row)


def authenticate(conn: Conn, token: str) -> Actor:
    """The actor a key acts for; Unauthorized when it is malformed, unknown or revoked."""
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX:
        raise Unauthorized("That API key is not valid. Create one with `subspace keys create`.")
    try:
        workspace_id = UUID(hex=parts[1])
    except ValueError:
        raise Unauthorized(
            "That API key is not valid. Create one with `subspace keys create`."
        ) from None
    row = conn.execute(
        # last_used_at is written at most once a minute so reads do not turn into writes.
        "update kb.api_keys set last_used_at = now() "
        "where workspace_id = %s and key_hash = %s and revoked_at is null "
        "and (last_used_at is null or last_used_at < now() - interval '1 minute') "
        "returning user_id",
        (workspace_id, _hash(token)),
    ).fetchone()
    if row is None:
        row = conn.execute(
            "select user_id from kb.api_keys where workspace_id = %s and key_hash = %s "
            "and revoked_at is null",
            (workspace_id, _hash(token)),
        ).fetchone()
    if row is None:
        raise Unauthorized(
            "That API key is unknown or revoked. Create a new one with `subspace keys create`."
        )
    return Actor(workspace_id=workspace_id, user_id=row["user_id"])
