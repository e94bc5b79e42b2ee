"""What `subspace serve` does before it listens: seed the demo once, and make a sign-in link."""

from __future__ import annotations

import logging

from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.demo import seed_demo
from subspace.sessions import create_signin_code

log = logging.getLogger(__name__)


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


def signin_link(db: Database, settings: Settings, cx: Context | None = None) -> str:
    """A sign-in link for the default workspace's owner (or `cx`'s actor) with a new one-time
    code, valid for SUBSPACE_SIGNIN_CODE_MINUTES."""
    cx = cx or db.default_context(settings)
    with cx.transaction() as conn:
        code = create_signin_code(conn, cx.actor, settings.signin_code_minutes)
    return signin_url(settings, code)


def signin_url(settings: Settings, code: str) -> str:
    """Where a code signs in: under SUBSPACE_PUBLIC_URL when set, else the address served."""
    if settings.public_url:
        base = settings.public_url.rstrip("/")
    else:
        host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
        host = f"[{host}]" if ":" in host else host
        base = f"http://{host}:{settings.port}"
    return f"{base}/signin?code={code}"
