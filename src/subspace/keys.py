"""API keys: create, list, revoke, and resolve a presented key to the actor it acts for."""

from __future__ import annotations

import hashlib
import secrets
from uuid import UUID

from subspace.db.pool import Conn
from subspace.errors import Forbidden, InvalidInput, NotFound, Unauthorized
from subspace.models import Actor, ApiKey
from subspace.text import single_line

# The workspace id travels inside the key so a lookup never has to leave its workspace
# (the keys table stays distributable by workspace_id).
KEY_PREFIX = "ssk"
KEY_COLUMNS = (
    "id, user_id, name, key_prefix as prefix, key_ending as ending, created_at, last_used_at, "
    "revoked_at, admin"
)
ENDING_CHARS = 4  # of a token's end, kept to tell keys apart; too few to help a guess
MIN_ID_PREFIX = 4  # characters of a key id `keys revoke` needs to pick one key


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


def create_key(
    conn: Conn, actor: Actor, name: str = "", *, admin: bool = False
) -> tuple[ApiKey, str]:
    """Create a key for `actor`; return it and the secret token, which is shown only once.

    An `admin` key is an operator's: it may also manage workspaces over /api/admin.
    """
    name = single_line(
        name, what="A key name", limit=200, setting="a fixed limit of 200", required=False
    )
    token = f"{KEY_PREFIX}_{actor.workspace_id.hex}_{secrets.token_urlsafe(32)}"
    row = conn.execute(
        "insert into kb.api_keys "
        "(workspace_id, user_id, name, key_prefix, key_ending, key_hash, admin) "
        f"values (%s, %s, %s, %s, %s, %s, %s) returning {KEY_COLUMNS}",
        (
            actor.workspace_id,
            actor.user_id,
            name,
            token[:12],
            token[-ENDING_CHARS:],
            _hash(token),
            admin,
        ),
    ).fetchone()
    assert row is not None
    return ApiKey(**row), token


def list_keys(conn: Conn, workspace_id: UUID) -> list[ApiKey]:
    rows = conn.execute(
        f"select {KEY_COLUMNS} from kb.api_keys where workspace_id = %s order by created_at",
        (workspace_id,),
    ).fetchall()
    return [ApiKey(**row) for row in rows]


def find_key_id(conn: Conn, workspace_id: UUID, prefix: str) -> UUID:
    """The id of the one key of the workspace whose id starts with `prefix` (a whole id
    works too); NotFound when none does, InvalidInput when several do."""
    return find_id_by_start(conn, "kb.api_keys", "key", workspace_id, prefix)


def find_id_by_start(conn: Conn, table: str, noun: str, workspace_id: UUID, prefix: str) -> UUID:
    """The id of the one row of `table` (kb.api_keys or kb.sessions) in the workspace whose
    id starts with `prefix`, as `keys revoke` and `sessions end` take one."""
    wanted = prefix.strip().lower()
    if len(wanted) < MIN_ID_PREFIX or not all(c in "0123456789abcdef-" for c in wanted):
        raise InvalidInput(
            f"{prefix!r} is not a {noun} id. Give the id `subspace {noun}s list` shows, or at "
            f"least its first {MIN_ID_PREFIX} characters."
        )
    rows = conn.execute(
        f"select id from {table} where workspace_id = %s and id::text like %s "
        "order by created_at limit 6",
        (workspace_id, wanted + "%"),
    ).fetchall()
    if not rows:
        raise NotFound("API key" if noun == "key" else noun, prefix)
    if len(rows) > 1:
        shown = ", ".join(str(r["id"]) for r in rows[:5])
        raise InvalidInput(
            f"{prefix!r} starts the ids of several {noun}s ({shown}). Give more of the id."
        )
    found: UUID = rows[0]["id"]
    return found


def revoke_key(conn: Conn, workspace_id: UUID, key_id: UUID) -> ApiKey:
    """Revoke the key; every later request with it answers 401, and the browser sessions
    signed in with it end. Safe to call twice."""
    row = conn.execute(
        "update kb.api_keys set revoked_at = coalesce(revoked_at, now()) "
        f"where workspace_id = %s and id = %s returning {KEY_COLUMNS}",
        (workspace_id, key_id),
    ).fetchone()
    if row is None:
        raise NotFound("API key", key_id)
    conn.execute(
        "update kb.sessions set ended_at = now() where workspace_id = %s and key_id = %s "
        "and ended_at is null",
        (workspace_id, key_id),
    )
    return ApiKey(**row)


def authenticate(conn: Conn, token: str) -> Actor:
    """The actor a key acts for; Unauthorized when it is malformed, unknown or revoked."""
    actor, _, _ = _authenticate(conn, token)
    return actor


def authenticate_key_id(conn: Conn, token: str) -> tuple[Actor, UUID]:
    """Like `authenticate`, with the key's id (what a session signed in with it records)."""
    actor, key_id, _ = _authenticate(conn, token)
    return actor, key_id


def authenticate_admin(conn: Conn, token: str) -> Actor:
    """Like `authenticate`, and Forbidden unless the key is an operator's (admin) key."""
    actor, _, admin = _authenticate(conn, token)
    if not admin:
        raise Forbidden(
            "This route needs an operator's key. Create one with `subspace keys create --admin`."
        )
    return actor


def _authenticate(conn: Conn, token: str) -> tuple[Actor, UUID, bool]:
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
        "returning id, user_id, admin",
        (workspace_id, _hash(token)),
    ).fetchone()
    if row is None:
        row = conn.execute(
            "select id, user_id, admin from kb.api_keys where workspace_id = %s and key_hash = %s "
            "and revoked_at is null",
            (workspace_id, _hash(token)),
        ).fetchone()
    if row is None:
        raise Unauthorized(
            "That API key is unknown or revoked. Create a new one with `subspace keys create`."
        )
    actor = Actor(workspace_id=workspace_id, user_id=row["user_id"])
    return actor, row["id"], bool(row["admin"])
