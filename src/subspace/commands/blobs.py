"""Content-addressed blob storage inside Postgres."""

from __future__ import annotations

import hashlib

from subspace.db.pool import Conn
from subspace.models import Actor


def put_blob(conn: Conn, actor: Actor, data: bytes) -> str:
    """Store `data` once per workspace and return its sha256; storing it again is free."""
    sha256 = hashlib.sha256(data).hexdigest()
    conn.execute(
        "insert into kb.blobs (workspace_id, sha256, size, data) values (%s, %s, %s, %s) "
        "on conflict (workspace_id, sha256) do nothing",
        (actor.workspace_id, sha256, len(data), data),
    )
    return sha256
