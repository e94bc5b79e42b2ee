"""Every operation of the OpenAPI document, fuzzed from its own schema: no server error, and
every response has a documented status, content type and body."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import schemathesis
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from subspace import commands
from subspace.agents.tools import TOOLS
from subspace.api import create_app
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.keys import create_key

# Examples per operation: enough to reach each field's edge cases, few enough that the whole
# file runs in well under two minutes on a 2-core machine (about 50 operations).
MAX_EXAMPLES = 20

ASGIApp = Callable[..., Awaitable[None]]

# The document as the app serves it. Building the app does no work (no database is opened
# until its lifespan starts), so the operations are known when pytest collects this file.
_SCHEMA_APP = create_app(
    Settings(home=Path("unused"), database_url="postgresql:///unused", providers="fake")
)
schema = schemathesis.openapi.from_dict(_SCHEMA_APP.openapi())
# Every operation of the document is run; nothing in it is left out. What the document does not
# hold is not exercised here: /mcp (its own protocol, covered by test_mcp.py), /metrics, the
# docs pages, the web UI's pages and its static assets.

TOOL_NAMES = [tool.name for tool in TOOLS]

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def without_lifespan(app: ASGIApp) -> ASGIApp:
    """The app, refusing the lifespan scope as an app without one does.

    Schemathesis starts an app's lifespan before its first request and keeps it running for
    the rest of the process; ours would start the indexer, the extraction worker and the MCP
    session manager against a database that is dropped when the test ends. The tests' other
    clients skip the lifespan too (a TestClient used outside `with`).
    """

    async def app_without_lifespan(
        scope: MutableMapping[str, Any], receive: Any, send: Any
    ) -> None:
        if scope["type"] == "lifespan":
            raise RuntimeError("no lifespan under test")
        await app(scope, receive, send)

    return app_without_lifespan


def seed(cx: Context) -> dict[str, UUID]:
    """A workspace where each kind of id exists: a page with nested bullets, a tag set on it,
    a file and a mail."""
    page = commands.create_page(cx, "Launch plan")
    parent = commands.add_node(cx, page.id, "Milestones")
    child = commands.add_node(cx, page.id, "Beta in March", parent_id=parent.id)
    commands.add_node(cx, page.id, "GA in June")
    tag = commands.create_tag(cx, "owner", "text")
    commands.set_tag(cx, tag.id, "page", page.id, "ana")
    file = commands.upload_file(cx, "notes.txt", b"launch notes", content_type="text/plain")
    mail = commands.add_mail(cx, message_id="<launch@example.com>", subject="Launch date")
    return {
        "page_id": page.id,
        "node_id": child.id,
        "parent_id": parent.id,
        "tag_id": tag.id,
        "file_id": file.id,
        "mail_id": mail.id,
        "kb_id": page.kb_id,
        "workspace_id": cx.actor.workspace_id,
    }


def aim_at_seeded(case: schemathesis.Case[Any], ids: dict[str, UUID], turn: int) -> None:
    """Point the case's ids at the seeded rows (and its tool at one of the tools, taking
    turns), so operations get past their 404."""
    kinds = {"page": "page_id", "file": "file_id", "mail": "mail_id"}
    item = {"pages": "page_id", "files": "file_id", "mail": "mail_id"}
    params = case.path_parameters or {}
    for name in params:
        if name in ids:
            params[name] = str(ids[name])
        elif name == "item_id":
            params[name] = str(ids[item[case.path.split("/")[2]]])
        elif name == "target_id" and params.get("target_kind") in kinds:
            params[name] = str(ids[kinds[params["target_kind"]]])
        elif name == "name":  # POST /api/tools/{name}
            params[name] = TOOL_NAMES[turn % len(TOOL_NAMES)]
    if isinstance(case.body, dict):
        for name in list(case.body):
            if name in ids:
                case.body[name] = str(ids[name])
            elif name == "knowledgeBaseIds":  # the Sim-compatible search
                case.body[name] = [str(ids["kb_id"])]


class Target:
    """The app under test over a seeded workspace, and an admin key of that workspace (so
    the operator routes are exercised past their 403)."""

    def __init__(self, database: Database, settings: Settings, cx: Context) -> None:
        self.ids = seed(cx)
        with database.pool.connection() as conn:
            _, token = create_key(conn, cx.actor, "schemathesis", admin=True)
        self.headers = {"authorization": f"Bearer {token}"}
        self.app = without_lifespan(create_app(settings, database))
        self.examples = 0


@pytest.fixture
def target(database: Database, settings: Settings, cx: Context) -> Target:
    return Target(database, settings, cx)


@schema.parametrize()
@hypothesis_settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)
def test_every_operation_answers_as_documented(
    case: schemathesis.Case[Any],
    target: Target,
) -> None:
    # Every other example aims at the seeded rows; the rest keep their generated ids, which
    # exercise the 404s.
    target.examples += 1
    if target.examples % 2:
        aim_at_seeded(case, target.ids, target.examples // 2)
    case.call_and_validate(app=target.app, headers=target.headers, checks=CHECKS)
