"""What `subspace serve` does before it listens: seed the demo once, and find a sign-in key."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from subspace.config import Settings
from subspace.demo import seed_demo
from subspace.errors import Unauthorized
from subspace.keys import authenticate, create_key
from subspace.runtime import Database

log = logging.getLogger(__name__)

SIGNIN_KEY_FILE = "signin-key"


def initialize_workspace(db: Database, settings: Settings, *, demo: bool) -> bool:
    """Seed the demo pages the first time the default workspace is served; True if it was."""
    cx = db.default_context(settings)
    with cx.transaction() as conn:
        row = conn.execute(
            "select initialized_at from kb.workspaces where workspace_id = %s for update",
            (cx.actor.workspace_id,),
        ).fetchone()
        if row is None or row["initialized_at"] is not None:
            return False
        if demo:
            pages = seed_demo(cx.on(conn))
            log.info("seeded %d demo pages", len(pages))
        conn.execute(
            "update kb.workspaces set initialized_at = now() where workspace_id = %s",
            (cx.actor.workspace_id,),
        )
    return True


def signin_token(db: Database, settings: Settings) -> str:
    """A key for the sign-in link, kept in SUBSPACE_HOME so restarts print the same link.

    A missing, unknown or revoked key is replaced by a new one.
    """
    path: Path = settings.home / SIGNIN_KEY_FILE
    cx = db.default_context(settings)
    with cx.transaction() as conn:
        if path.exists():
            token = path.read_text(encoding="utf-8").strip()
            try:
                actor = authenticate(conn, token)
                if actor.workspace_id == cx.actor.workspace_id:
                    return token
            except Unauthorized:
                pass
        _, token = create_key(conn, cx.actor, "sign-in link")
    settings.home.mkdir(parents=True, exist_ok=True)
    # The file holds a credential: readable by its owner only.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token


def signin_url(settings: Settings, token: str) -> str:
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    return f"http://{host}:{settings.port}/?token={token}"
