"""The HTTP API end to end, in process, against a real database."""

from __future__ import annotations

import re
import sys
from uuid import UUID

from fastapi.testclient import TestClient

from subspace import commands
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db import queries
from subspace.db.migrate import available_migrations
from subspace.ingest.outline import OutlineItem
from subspace.search.reading import kb_node_read, kb_read
from tests.conftest import api_operations


def test_health_and_readiness(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {
        "database": "ok",
        "pgvector": "0.8.5",
        "migrations": "at head",
        # No follower runs in this app (its lifespan is not entered): searches rank in
        # Postgres, which readiness says without failing.
        "lexical_index": "degraded: the index is missing",
    }


def test_readiness_fails_when_migrations_are_pending(
    client: TestClient, database: Database
) -> None:
    with database.pool.connection() as conn:
        conn.execute("delete from public.schema_migrations")
    ready = client.get("/readyz")
    assert ready.status_code == 503
    expected = f"{len(available_migrations())} pending"
    assert ready.json()["checks"]["migrations"] == expected


def test_pages_and_nodes_round_trip(client: TestClient) -> None:
    page = client.post("/api/pages", json={"title": "  Weekly   review "}).json()
    assert page["title"] == "Weekly review"
    a = client.post("/api/nodes", json={"page_id": page["id"], "text": "wins"}).json()
    b = client.post("/api/nodes", json={"page_id": page["id"], "text": "risks"}).json()
    client.post("/api/nodes", json={"page_id": page["id"], "text": "hiring", "parent_id": a["id"]})
    assert client.post(f"/api/nodes/{b['id']}/indent").status_code == 200
    edited = client.patch(
        f"/api/nodes/{b['id']}", json={"text": "risks!", "props": {"memory": True}}
    )
    assert edited.json()["text"] == "risks!"
    assert edited.json()["props"] == {"memory": True}
    tree = client.get(f"/api/pages/{page['id']}").json()
    assert [n["text"] for n in tree["nodes"]] == ["wins"]
    assert [n["text"] for n in tree["nodes"][0]["children"]] == ["hiring", "risks!"]
    moved = client.post(f"/api/nodes/{b['id']}/move", json={"parent_id": None, "position": 0})
    assert moved.json()["parent_id"] is None
    assert moved.json()["position"] == 0
    assert client.delete(f"/api/nodes/{a['id']}").json()["deleted"][0] == a["id"]
    renamed = client.patch(f"/api/pages/{page['id']}", json={"title": "Review"}).json()
    assert renamed["title"] == "Review"
    assert client.post(f"/api/pages/{page['id']}/archive").json()["archived_at"] is not None
    assert client.get("/api/pages").json() == []
    assert len(client.get("/api/pages", params={"include_hidden": True}).json()) == 1
    assert client.post(f"/api/pages/{page['id']}/restore").json()["archived_at"] is None


def test_files_upload_download_and_states(client: TestClient) -> None:
    up = client.post("/api/files", files={"file": ("notes.txt", b"hello world", "text/plain")})
    assert up.status_code == 201, up.text
    body = up.json()
    assert (body["name"], body["size"], body["status"]) == ("notes.txt", 11, "processing")
    content = client.get(f"/api/files/{body['id']}/content")
    assert content.content == b"hello world"
    assert content.headers["content-type"].startswith("text/plain")
    assert (
        client.patch(f"/api/files/{body['id']}", json={"enabled": False}).json()["enabled"] is False
    )
    assert client.delete(f"/api/files/{body['id']}").json()["deleted_at"] is not None
    assert client.get("/api/files").json() == []
    assert client.post(f"/api/files/{body['id']}/restore").json()["deleted_at"] is None


def test_a_knowledge_base_overview_counts_what_is_live_in_it(client: TestClient) -> None:
    kb = client.post("/api/knowledge-bases", json={"name": "Garden"}).json()
    page = client.post("/api/pages", json={"title": "Beds", "kb_id": kb["id"]}).json()
    client.post("/api/pages", json={"title": "Old plan", "kb_id": kb["id"]})
    client.post("/api/pages", json={"title": "Elsewhere"})  # the default base
    client.post(
        "/api/files",
        files={"file": ("soil.txt", b"loam", "text/plain")},
        data={"kb_id": kb["id"]},
    )
    archived = client.get("/api/pages", params={"kb_id": kb["id"]}).json()
    old = next(p for p in archived if p["title"] == "Old plan")
    assert client.post(f"/api/pages/{old['id']}/archive").status_code == 200
    overview = client.get(f"/api/knowledge-bases/{kb['id']}/overview").json()
    assert overview["pages"] == 1, overview  # Beds; the archived one is not counted
    assert overview["files"] == 1, overview
    assert overview["mail"] == 0, overview
    assert overview["pending_embeddings"] >= 1, overview  # nothing embeds in this test
    # The workspace's titles are its texts so far: none has a vector yet.
    assert re.fullmatch(
        r"0 of [1-9]\d* texts embedded with fake-trigram-256 \(0%\)",
        overview["embedding_progress"],
    ), overview
    assert page["kb_id"] == kb["id"]
    unknown = client.get("/api/knowledge-bases/00000000-0000-0000-0000-000000000000/overview")
    assert unknown.status_code == 404


def test_mail_tags_and_knowledge_bases(client: TestClient) -> None:
    kb = client.post("/api/knowledge-bases", json={"name": "Inbox"}).json()
    names = [k["name"] for k in client.get("/api/knowledge-bases").json()]
    assert names == ["Default", "Inbox"]
    mail = client.post(
        "/api/mail",
        json={
            "message_id": "<a@b>",
            "subject": "Quarterly numbers",
            "sender": "ana@example.com",
            "sent_at": "2026-11-02T10:00:00Z",
            "body_text": "See attached.",
            "kb_id": kb["id"],
        },
    )
    assert mail.status_code == 201, mail.text
    mail_id = mail.json()["id"]
    assert client.get(f"/api/mail/{mail_id}").json()["subject"] == "Quarterly numbers"
    tag = client.post("/api/tags", json={"name": "due", "type": "date", "kb_id": kb["id"]}).json()
    url = f"/api/tags/{tag['id']}/values/mail/{mail_id}"
    assert client.put(url, json={"value": "2026-12-01"}).json() == {"ok": True}
    bad = client.put(url, json={"value": "soon"})
    assert bad.status_code == 422
    assert "YYYY-MM-DD" in bad.json()["error"]["message"]
    assert client.delete(url).json() == {"ok": True}
    assert client.put(f"/api/exclusions/mail/{mail_id}").json() == {"ok": True}
    assert client.delete(f"/api/exclusions/mail/{mail_id}").json() == {"ok": True}


def test_errors_have_one_shape(client: TestClient) -> None:
    missing = client.get("/api/pages/00000000-0000-0000-0000-000000000001")
    assert missing.status_code == 404
    assert missing.json() == {
        "error": {
            "code": "not_found",
            "message": "No page with id 00000000-0000-0000-0000-000000000001 in this workspace.",
            "status": 404,
        }
    }
    invalid = client.post("/api/nodes", json={"text": "no page"})
    assert invalid.status_code == 422
    assert invalid.json()["error"]["code"] == "invalid_input"
    assert "page_id" in invalid.json()["error"]["message"]
    unknown_route = client.get("/api/nothing-here")
    assert unknown_route.json()["error"]["code"] == "not_found"


def test_every_route_needs_a_key(
    database: Database, settings: Settings, client: TestClient
) -> None:
    anonymous = TestClient(client.app)
    operations = api_operations(client)
    assert len(operations) >= 30
    for method, path in operations:
        concrete = path
        params = ("page_id", "node_id", "file_id", "mail_id", "item_id", "tag_id", "target_id",
                  "workspace_id")  # fmt: skip
        for param in params:
            concrete = concrete.replace("{" + param + "}", "00000000-0000-0000-0000-000000000001")
        concrete = concrete.replace("{target_kind}", "page")
        response = anonymous.request(method, concrete)
        assert response.status_code == 401, (method, path, response.text)
        error = response.json()["error"]
        # The Sim-compatible routes answer {"success": false, "error": "<message>"}.
        message = error if path.startswith("/api/v1/") else error["message"]
        assert "subspace keys create" in message


def test_a_revoked_key_answers_401(
    database: Database, settings: Settings, client: TestClient
) -> None:
    from subspace.keys import list_keys, revoke_key

    assert client.get("/api/pages").status_code == 200
    with database.pool.connection() as conn:
        for key in list_keys(conn, database.default_context(settings).actor.workspace_id):
            revoke_key(conn, database.default_context(settings).actor.workspace_id, key.id)
    response = client.get("/api/pages")
    assert response.status_code == 401
    assert "revoked" in response.json()["error"]["message"]
    garbled = TestClient(client.app, headers={"authorization": "Bearer ssk_nothex_x"})
    assert garbled.get("/api/pages").status_code == 401


def test_openapi_lists_the_resources(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for prefix in (
        "/api/pages",
        "/api/nodes",
        "/api/files",
        "/api/mail",
        "/api/tags",
        "/api/knowledge-bases",
        "/api/exclusions",
    ):
        assert any(p.startswith(prefix) for p in paths), prefix


def test_downloads_never_run_in_the_browser(client: TestClient) -> None:
    served = {}
    for name, claimed in (
        ("page.html", "text/html"),
        ("logo.svg", "image/svg+xml"),
        ("doc.xhtml", "application/xhtml+xml"),
        ("app.js", "text/javascript"),
        ("photo.png", "image/png"),
        ("notes.txt", "text/plain; charset=utf-8"),
        ("report.pdf", "application/pdf"),
    ):
        body = f"<script>alert('{name}')</script>".encode()
        up = client.post("/api/files", files={"file": (name, body, claimed)})
        assert up.status_code == 201, up.text
        got = client.get(f"/api/files/{up.json()['id']}/content")
        assert got.headers["x-content-type-options"] == "nosniff", name
        assert got.headers["content-disposition"].startswith("attachment;"), name
        served[name] = got.headers["content-type"].split(";")[0]
    assert served == {
        "page.html": "application/octet-stream",
        "logo.svg": "application/octet-stream",
        "doc.xhtml": "application/octet-stream",
        "app.js": "application/octet-stream",
        "photo.png": "image/png",
        "notes.txt": "text/plain",
        "report.pdf": "application/pdf",
    }


def test_page_lists_do_not_promise_bullets(client: TestClient) -> None:
    page = client.post("/api/pages", json={"title": "Plan"}).json()
    assert "nodes" not in page
    client.post("/api/nodes", json={"page_id": page["id"], "text": "step one"})
    assert "nodes" not in client.get("/api/pages").json()[0]
    assert "nodes" not in client.patch(f"/api/pages/{page['id']}", json={"title": "P"}).json()
    assert [n["text"] for n in client.get(f"/api/pages/{page['id']}").json()["nodes"]] == [
        "step one"
    ]
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    listed = client.get("/openapi.json").json()["paths"]["/api/pages"]["get"]["responses"]["200"]
    item_ref = listed["content"]["application/json"]["schema"]["items"]["$ref"]
    assert "nodes" not in schemas[item_ref.rsplit("/", 1)[1]]["properties"]


DEEP = 2_000  # levels: a client may indent a bullet under the one before it again and again


def test_a_page_is_served_as_its_tree_however_deep_it_nests(
    client: TestClient, cx: Context
) -> None:
    """Each bullet as the API writes a node (times in UTC with a Z), its children in outline
    order, at any depth: 300 levels were refused with a 500 ("maximum serialization depth"),
    and reading the page as an outline failed past Python's stack."""
    made = commands.create_page_from_outline(
        cx, 'A "title" with "nodes":[] in it', [OutlineItem('ü \\ " tab\t')]
    )
    with cx.transaction() as conn:  # a chain of DEEP bullets, each under the one before
        conn.execute(
            "insert into kb.nodes (workspace_id, id, page_id, parent_id, position, text) "
            "select %(ws)s, md5(%(page)s::text || i)::uuid, %(page)s, "
            "case when i > 0 then md5(%(page)s::text || (i - 1))::uuid end, "
            "case when i = 0 then 1 else 0 end, 'level ' || i "
            "from generate_series(0, %(deep)s - 1) i",
            {"ws": cx.actor.workspace_id, "page": made.id, "deep": DEEP},
        )
    answer = client.get(f"/api/pages/{made.id}")
    assert answer.status_code == 200, answer.text
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(DEEP * 4)  # Python's JSON reader nests two calls a level
    try:
        page = answer.json()
    finally:
        sys.setrecursionlimit(limit)
    assert page["title"] == 'A "title" with "nodes":[] in it'
    assert [n["text"] for n in page["nodes"]] == ['ü \\ " tab\t', "level 0"]
    node, depth = page["nodes"][1], 0
    while node["children"]:
        (node,) = node["children"]
        depth += 1
    assert (depth, node["text"]) == (DEEP - 1, f"level {DEEP - 1}")
    first = page["nodes"][0]
    with cx.transaction() as conn:
        stored = queries.get_node(conn, cx.actor.workspace_id, UUID(first["id"]))
    assert first == {
        "id": str(stored.id), "page_id": str(made.id), "parent_id": None, "position": 0,
        "text": stored.text, "props": {}, "children": [],
        "created_at": stored.created_at.isoformat().replace("+00:00", "Z"),
        "updated_at": stored.updated_at.isoformat().replace("+00:00", "Z"),
    }  # fmt: skip
    outline = kb_read(cx, made.id).splitlines()
    assert outline[-1].startswith(f"{'  ' * (DEEP - 1)}- level {DEEP - 1} (node:")
    assert kb_node_read(cx, UUID(node["id"])).endswith(f"(node:{node['id']})")


def test_a_deleted_page_takes_no_new_bullets(client: TestClient) -> None:
    page = client.post("/api/pages", json={"title": "Old"}).json()
    client.delete(f"/api/pages/{page['id']}")
    refused = client.post("/api/nodes", json={"page_id": page["id"], "text": "late"})
    assert refused.status_code == 409
    assert "Restore the page first" in refused.json()["error"]["message"]
    client.post(f"/api/pages/{page['id']}/restore")
    assert client.post("/api/nodes", json={"page_id": page["id"], "text": "ok"}).status_code == 201
    assert [n["text"] for n in client.get(f"/api/pages/{page['id']}").json()["nodes"]] == ["ok"]


def test_the_domain_errors_know_no_http_and_the_edge_gives_each_a_status() -> None:
    """errors.py says what went wrong; api/errors.py alone says how HTTP answers it."""
    from subspace import errors
    from subspace.api.errors import STATUSES, http_status
    from subspace.commands.retry import WriteContention

    declared = [
        cls for cls in vars(errors).values()
        if isinstance(cls, type) and issubclass(cls, errors.SubspaceError)
    ]  # fmt: skip
    assert not [cls.__name__ for cls in declared if "status" in vars(cls)]
    assert "status" not in vars(WriteContention)
    assert http_status(errors.BadRequest("x")) == 400  # the nearest class wins
    assert http_status(errors.StalePage("x")) == 409
    assert http_status(errors.ConfigError("x")) == 500
    assert http_status(WriteContention("x")) == 503
    assert set(STATUSES) >= {errors.InvalidInput, errors.NotFound, errors.TooMany}
