"""Attacks on search, grep and the agent tools: each answers a 4xx, and nothing starves."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import tracemalloc
import zlib
from collections.abc import Iterator
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from subspace import commands
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database, open_database, reserved_connections
from subspace.db.pool import open_pool
from subspace.errors import InvalidCursor
from subspace.ingest.outline import OutlineItem
from subspace.models import Actor
from subspace.search import cursors
from subspace.search.cursors import MAC_BYTES, workspace_secret
from subspace.search.filters import TagFilter, resolve_scope
from subspace.search.grep import grep
from subspace.search.lexical.terms import build_tsqueries
from subspace.search.query import parse_query
from subspace.search.request import SearchRequest
from tests.conftest import make_client
from tests.search_helpers import index, lexical_hits, run

RAW_JSON = {"content-type": "application/json"}


def secret_of(cx: Context) -> bytes:
    with cx.transaction() as conn:
        return workspace_secret(conn, cx.actor.workspace_id)


def forge(body: bytes, secret: bytes | None = None, *, compressed: bool = False) -> str:
    """A cursor around `body` (JSON text), signed with `secret` or with a wrong key."""
    packed = body if compressed else zlib.compress(body)
    mac = hmac.new(secret or b"not the key", packed, hashlib.sha256).digest()[:MAC_BYTES]
    return base64.urlsafe_b64encode(mac + packed).decode().rstrip("=")


def spaces_bomb(inflated_bytes: int) -> bytes:
    """zlib of `inflated_bytes` spaces (a whole number of MiB, at least two; about 1,000:1).

    Each MiB is flushed whole, so every one after the first compresses to the same block: one
    block is repeated instead of compressing the whole (2 s for a GiB). The checksum at the end
    is the real one, so the stream inflates as one compressed whole would.
    """
    chunk = b" " * 2**20
    count = inflated_bytes // 2**20
    packer = zlib.compressobj(9)
    first = packer.compress(chunk) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(chunk) + packer.flush(zlib.Z_FULL_FLUSH)
    last = packer.flush()[:-4]  # the final empty block, without the checksum of two MiB
    checksum = 1  # Adler-32 starts at 1
    for _ in range(count):
        checksum = zlib.adler32(chunk, checksum)
    return first + block * (count - 1) + last + checksum.to_bytes(4, "big")


@pytest.fixture
def paged(database: Database, cx: Context) -> Iterator[str]:
    """A query with more than one page of results; yields a cursor of its first page."""
    page = commands.create_page(cx, "Paging")
    for n in range(14):
        commands.add_node(cx, page.id, f"lantern number {n}")
    index(database, cx)
    cursor = run(database, cx, "lantern", limit=5).next_cursor
    assert cursor is not None
    yield cursor


# -- 1. cursors ----------------------------------------------------------------------------


def test_a_cursor_bomb_is_refused_before_it_inflates(
    database: Database, cx: Context, paged: str
) -> None:
    # The original attack: 1.36 MB of zlib that inflates to 1 GiB of spaces.
    huge = base64.urlsafe_b64encode(b"\0" * MAC_BYTES + spaces_bomb(2**30)).decode()
    with pytest.raises(InvalidCursor, match="at most"):
        run(database, cx, "lantern", limit=5, cursor=huge)
    # A bomb small enough to pass the length cap, and signed with the workspace's own key
    # (as a leaked key would allow): inflating stops at the cap, it does not reach 32 MiB.
    signed = forge(spaces_bomb(32 * 2**20), secret_of(cx), compressed=True)
    assert len(signed) <= cursors.MAX_CURSOR_CHARS
    tracemalloc.start()
    try:
        with pytest.raises(InvalidCursor, match="not valid"):
            run(database, cx, "lantern", limit=5, cursor=signed)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"peak {peak:,} bytes"


def test_cursors_are_signed_per_workspace(database: Database, cx: Context, paged: str) -> None:
    from subspace.workspaces import create_workspace

    payload = json.loads(zlib.decompress(base64.urlsafe_b64decode(paged + "==")[MAC_BYTES:]))
    # Same payload, unkeyed or keyed with another key: refused.
    with pytest.raises(InvalidCursor, match="not issued for this workspace or was altered"):
        run(database, cx, "lantern", limit=5, cursor=forge(json.dumps(payload).encode()))
    # The honest cursor works, and a workspace's key is its own.
    assert len(run(database, cx, "lantern", limit=5, cursor=paged).rows) == 5
    with database.pool.connection() as conn:
        stranger = create_workspace(conn, "Stranger")
    theirs = database.context(stranger, cx.settings)
    assert secret_of(theirs) != secret_of(cx)
    assert len(secret_of(cx)) == 32
    with pytest.raises(InvalidCursor, match="not issued for this workspace"):
        run(database, theirs, "lantern", limit=5, cursor=paged)


def malformed_search_payloads(fingerprint: str) -> list[bytes]:
    q = json.dumps(fingerprint)
    return [
        b'{"v": 2, "q": %s, "s": 5}' % q.encode(),
        b'{"v": 2, "q": %s, "s": [[1]]}' % q.encode(),
        b'{"v": 2, "q": %s, "s": ' % q.encode() + b"[" * 5_000 + b"]" * 5_000 + b"}",
        b'{"v": 2, "q": %s, "s": ["n\\u0000"]}' % q.encode(),
        b'{"v": 2, "q": %s, "s": ["\\ud800"]}' % q.encode(),
        b'{"v": 2, "q": %s, "s": [1e400]}' % q.encode(),
        b'{"v": 2, "q": %s, "s": [NaN]}' % q.encode(),
        b'{"v": 2, "q": "a\\u0000b", "s": []}',
        b"[[1]]",
        b"5",
        b'{"v": 2, "q": %s, "s": ["x"]}\xff' % q.encode(),
    ]


def test_every_malformed_search_cursor_is_a_400(
    database: Database, cx: Context, client: TestClient, paged: str
) -> None:
    secret = secret_of(cx)
    fingerprint = cursors.fingerprint(SearchRequest(query="lantern", limit=5))
    for body in malformed_search_payloads(fingerprint):
        for key in (secret, None):  # signed with the real key, and not
            cursor = forge(body, key)
            with pytest.raises(InvalidCursor):
                run(database, cx, "lantern", limit=5, cursor=cursor)
            answer = client.post("/api/search", json={"query": "lantern", "limit": 5,
                                                      "cursor": cursor})  # fmt: skip
            assert answer.status_code == 400, (body[:60], answer.text)
            assert answer.json()["error"]["code"] == "invalid_cursor"
    raw_shapes = ["not base64 !", "\u00e9t\u00e9", "abc\x00def", "\ud800abc", "A" * 5, "=" * 8]
    for cursor in raw_shapes:
        with pytest.raises(InvalidCursor):
            run(database, cx, "lantern", limit=5, cursor=cursor)
    # Over HTTP, with the NUL and the lone surrogate as JSON escapes.
    for escaped in (b"abc\\u0000def", b"\\ud800abc", b"not base64 !"):
        answer = client.post(
            "/api/search",
            content=b'{"query": "lantern", "cursor": "%s"}' % escaped,
            headers=RAW_JSON,
        )
        assert answer.status_code == 400, answer.text
    assert client.get("/api/search", params={"q": "lantern", "cursor": "%%%"}).status_code == 400


def test_deep_paging_stops_with_a_note_instead_of_an_unbounded_cursor(
    database: Database, cx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = commands.create_page(cx, "Deep")
    for n in range(12):
        commands.add_node(cx, page.id, f"ember {n}")
    index(database, cx)
    monkeypatch.setattr(cursors, "MAX_CURSOR_TARGETS", 8)
    first = run(database, cx, "ember", limit=4)
    assert first.next_cursor is not None
    second = run(database, cx, "ember", limit=4, cursor=first.next_cursor)
    assert second.next_cursor is None
    assert len(second.rows) == 4
    assert any("paged up to 8" in note for note in second.notes)


def grep_cursor(secret: bytes | None, body: bytes) -> str:
    return forge(body, secret)


def test_every_malformed_grep_cursor_is_a_400(
    database: Database, cx: Context, client: TestClient
) -> None:
    page = commands.create_page(cx, "Logs")
    for n in range(4):
        commands.add_node(cx, page.id, f"err-42 at step {n}")
    honest = grep(cx, "err-42", limit=2)
    assert honest.next_cursor is not None
    assert len(grep(cx, "err-42", limit=2, cursor=honest.next_cursor).matches) == 2
    secret = secret_of(cx)
    bodies = [
        b'{"v": 2, "g": [0, "a\\u0000b"]}',
        b'{"v": 2, "g": [0, "\\ud800"]}',
        b'{"v": 2, "g": [1e400, ""]}',
        b'{"v": 2, "g": ' + b"[" * 3_000 + b"]" * 3_000 + b"}",
        b'{"v": 2, "g": [7, ""]}',
        b'{"v": 2, "g": [true, ""]}',
        b'{"v": 2, "g": [0, "x", 1]}',
        b'{"v": 2, "g": 5}',
        b'[0, ""]',
    ]
    cursors = [grep_cursor(key, body) for body in bodies for key in (secret, None)]
    # The format grep used to issue: unsigned base64 JSON.
    cursors.append(base64.urlsafe_b64encode(b'[0, ""]').decode())
    cursors += ["not base64 !", "abc\x00def", "\ud800x", "A" * 10_000]
    for cursor in cursors:
        with pytest.raises(InvalidCursor):
            grep(cx, "err-42", cursor=cursor)
    for cursor in cursors[:4]:
        answer = client.get("/api/grep", params={"pattern": "err-42", "cursor": cursor})
        assert answer.status_code == 400, answer.text
    for bad in (5, [1], {"a": 1}, cursors[0]):
        answer = client.post(
            "/api/tools/kb.grep", json={"arguments": {"pattern": "err-42", "cursor": bad}}
        )
        assert answer.status_code == 400, (bad, answer.text)
        assert answer.json()["error"]["code"] == "invalid_cursor"


# -- 2. the pool ---------------------------------------------------------------------------


def test_tag_filters_and_their_values_are_capped(
    database: Database, cx: Context, client: TestClient
) -> None:
    commands.create_tag(cx, "status", "text")
    tags = [{"tag": "status", "op": "eq", "value": f"v{n}"} for n in range(51)]
    answer = client.post("/api/search", json={"query": "x", "tags": tags})
    assert answer.status_code == 413, answer.text
    assert "SUBSPACE_MAX_TAG_FILTERS" in answer.json()["error"]["message"]
    fifty = client.post("/api/search", json={"query": "x", "tags": tags[:50]})
    assert fifty.status_code == 200, fifty.text
    long_value = [{"tag": "status", "op": "eq", "value": "v" * 1_001}]
    answer = client.post("/api/search", json={"query": "x", "tags": long_value})
    assert answer.status_code == 413
    assert "1,000" in answer.json()["error"]["message"]
    long_name = [{"tag": "s" * 101, "op": "eq", "value": "v"}]
    assert client.post("/api/search", json={"query": "x", "tags": long_name}).status_code == 413
    few = replace_settings(cx, max_tag_filters=2)
    with pytest.raises(Exception, match="limit is 2"):
        run(database, few, "x", tags=[TagFilter("status", "eq", "a")] * 3)


def replace_settings(cx: Context, **changes: object) -> Context:
    from dataclasses import replace

    return replace(cx, settings=replace(cx.settings, **changes))  # type: ignore[arg-type]


def test_searches_holding_every_request_connection_cannot_starve_the_rest(
    db_dsn: str, settings: Settings, actor: Actor
) -> None:
    reserved = open_pool(db_dsn, max_size=2)
    requests = open_pool(db_dsn, max_size=2, timeout=0.2)
    database = Database(dsn=db_dsn, pool=reserved, embedded=None, requests=requests)
    try:
        client = make_client(database, settings, actor)
        held = [requests.getconn() for _ in range(2)]  # as twelve slow searches would
        try:
            assert client.get("/healthz").status_code == 200
            ready = client.get("/readyz")
            assert ready.status_code == 200, ready.text
            answer = client.post("/api/search", json={"query": "anything"})
            assert answer.status_code == 503, answer.text
            assert answer.headers["retry-after"] == "1"
            assert "busy" in answer.json()["error"]["message"]
            assert client.get("/api/pages").status_code == 503
            with reserved.connection(timeout=1) as conn:  # the indexer's and the worker's
                conn.execute("select 1")
        finally:
            for conn in held:
                requests.putconn(conn)
        assert client.post("/api/search", json={"query": "anything"}).status_code == 200
    finally:
        database.close()


def test_a_served_database_keeps_connections_out_of_the_requests_reach(
    settings: Settings,
) -> None:
    database = open_database(settings, pool_size=3)
    try:
        assert database.requests is not None
        assert database.requests is not database.pool
        assert database.pool.max_size == reserved_connections(settings)
        assert database.default_context(settings).db is database.requests
        held = [database.requests.getconn() for _ in range(3)]
        try:
            with database.pool.connection(timeout=1) as conn:
                conn.execute("select 1")
        finally:
            for conn in held:
                database.requests.putconn(conn)
    finally:
        database.close()


# -- 3. no 5xx -----------------------------------------------------------------------------


def call(client: TestClient, tool: str, **arguments: object) -> tuple[int, str]:
    answer = client.post(f"/api/tools/{tool}", json={"arguments": arguments})
    body = answer.json()
    return answer.status_code, body.get("text") or body["error"]["message"]


def test_tool_arguments_of_the_wrong_json_type_are_422(
    database: Database, cx: Context, client: TestClient
) -> None:
    page = commands.create_page(cx, "Tools")
    for n in range(14):
        commands.add_node(cx, page.id, f"quartz vein {n}")
    index(database, cx)
    for kinds in (5, [1], [None], "file", {"a": 1}):
        status, message = call(client, "kb.search", query="quartz", kinds=kinds)
        assert status == 422, (kinds, message)
        assert "kinds" in message, (kinds, message)
    for limit in ("5", 2.5, True, 0):
        status, message = call(client, "kb.search", query="quartz", limit=limit)
        assert status == 422, (limit, message)
        assert "limit" in message, (limit, message)
    status, message = call(client, "kb.search", query=5)
    assert status == 422
    assert "query" in message
    for regex in ("false", 0, None):
        status, message = call(client, "kb.grep", pattern="quartz", regex=regex)
        assert status == 422, (regex, message)
        assert "regex" in message, (regex, message)
    status, message = call(client, "kb.grep", pattern="quartz", regex=False)
    assert status == 200
    assert message.count("quartz vein") == 14


def test_kb_search_honours_its_limit_up_to_the_setting(
    database: Database, cx: Context, client: TestClient
) -> None:
    page = commands.create_page(cx, "Limits")
    for n in range(14):
        commands.add_node(cx, page.id, f"cobalt seam {n}")
    index(database, cx)
    assert call(client, "kb.search", query="cobalt")[1].count("[node]") == 10
    assert call(client, "kb.search", query="cobalt", limit=3)[1].count("[node]") == 3
    assert call(client, "kb.search", query="cobalt", limit=12)[1].count("[node]") == 12
    status, message = call(client, "kb.search", query="cobalt", limit=101)
    assert status == 422
    assert "between 1 and 100" in message


def test_nul_and_lone_surrogates_never_reach_the_driver(cx: Context, client: TestClient) -> None:
    commands.create_tag(cx, "status", "text")
    bodies = [
        b'{"query": "a\\u0000b"}',
        b'{"query": "a\\ud800b"}',
        b'{"query": "x", "tags": [{"tag": "sta\\u0000tus", "op": "eq", "value": "v"}]}',
        b'{"query": "x", "tags": [{"tag": "status", "op": "e\\u0000q", "value": "v"}]}',
        b'{"query": "x", "tags": [{"tag": "\\udfff", "op": "eq", "value": "v"}]}',
        b'{"query": "x", "tags": [{"tag": "status", "op": "eq", "value": "v\\u0000"}]}',
        b'{"query": "x", "kinds": ["fi\\u0000le"]}',
        b'{"query": "x", "explain_target": "node:\\u0000"}',
    ]
    for body in bodies:
        answer = client.post("/api/search", content=body, headers=RAW_JSON)
        assert answer.status_code == 422, (body, answer.text)
        assert "NUL byte or a lone surrogate" in answer.json()["error"]["message"]
    for escaped in (b"a\\u0000b", b"\\ud800"):
        for tool, name in (("kb.grep", b"pattern"), ("kb.search", b"query")):
            answer = client.post(
                f"/api/tools/{tool}",
                content=b'{"arguments": {"%s": "%s"}}' % (name, escaped),
                headers=RAW_JSON,
            )
            assert answer.status_code == 422, answer.text
            assert "NUL" in answer.json()["error"]["message"]
    assert client.get("/api/grep", params={"pattern": "a\x00b"}).status_code == 422
    assert client.get("/api/search", params={"q": "a\x00b"}).status_code == 422


@pytest.mark.parametrize(
    "props",
    [
        b'{"x": NaN}',
        b'{"x": Infinity}',
        b'{"x": -Infinity}',
        b'{"x": 1e400}',
        b'{"x": [1, {"y": 1e400}]}',
        b'{"x": ' + b'{"a": ' * 500 + b"1" + b"}" * 500 + b"}",
        b'{"x": ' + b"[" * 40 + b"]" * 40 + b"}",
    ],
)
def test_node_props_must_be_finite_and_shallow(
    cx: Context, client: TestClient, props: bytes
) -> None:
    page = commands.create_page(cx, "Props")
    kept = commands.add_node(cx, page.id, "kept", props={"deep": [[[[1]]]], "n": 1.5})
    body = b'{"page_id": "%s", "text": "t", "props": %s}' % (str(page.id).encode(), props)
    answer = client.post("/api/nodes", content=body, headers=RAW_JSON)
    assert answer.status_code == 422, answer.text
    message = answer.json()["error"]["message"]
    assert "not finite" in message or "32 levels" in message
    patch = client.patch(
        f"/api/nodes/{kept.id}", content=b'{"props": %s}' % props, headers=RAW_JSON
    )
    assert patch.status_code == 422, patch.text
    # What was accepted before is still there, unchanged.
    node = client.get(f"/api/pages/{page.id}").json()["nodes"]
    assert [(n["text"], n["props"]) for n in node] == [("kept", {"deep": [[[[1]]]], "n": 1.5})]


@pytest.mark.parametrize("kinds", [["mail"], ["file"], ["file", "mail"]])
def test_browsing_files_or_mail_alone(cx: Context, client: TestClient, kinds: list[str]) -> None:
    mail = client.post("/api/mail", json={"message_id": "<b@x>", "subject": "Browse me",
                                          "body_text": "hello"})  # fmt: skip
    assert mail.status_code == 201, mail.text
    answer = client.post("/api/search", json={"query": "", "kinds": kinds})
    assert answer.status_code == 200, answer.text
    refs = [row["ref"] for row in answer.json()["rows"]]
    assert refs == ([f"mail:{mail.json()['id']}"] if "mail" in kinds else [])
    status, text = call(client, "kb.search", query="", kinds=kinds)
    assert status == 200
    assert ("Browse me" in text) == ("mail" in kinds)


def test_each_extraction_worker_gets_a_reserved_connection_of_its_own(
    settings: Settings,
) -> None:
    # An extraction worker holds its connection for as long as a file takes (up to
    # SUBSPACE_EXTRACT_TIMEOUT_S): more workers must not squeeze the indexer and /readyz.
    few, many = (replace(settings, extract_workers=n) for n in (1, 6))
    assert reserved_connections(many) - reserved_connections(few) == 5
    database = open_database(many, pool_size=2)
    try:
        held = [database.pool.getconn() for _ in range(6)]  # every worker busy
        try:
            with database.pool.connection(timeout=1) as conn:  # the indexer still gets one
                conn.execute("select 1")
        finally:
            for conn in held:
                database.pool.putconn(conn)
    finally:
        database.close()


def test_a_pasted_paragraph_is_ranked_by_every_one_of_its_words(
    database: Database, cx: Context
) -> None:
    # The lexical index scores a query of many words, common ones included, in one pass: no
    # word is left out, and a document holding only the commonest is still found.
    words = [f"w{n}q" for n in range(40)]
    items = [  # w0q is in 40 bullets, w39q in 1
        OutlineItem(f"{word} {copy}") for n, word in enumerate(words) for copy in range(40 - n)
    ]
    page = commands.create_page_from_outline(cx, "Paragraph", items)
    target = commands.add_node(cx, page.id, " ".join(words[-8:]))
    index(database, cx)
    paragraph = " ".join(words)
    found = run(database, cx, paragraph, mode="lexical", limit=100)
    assert found.rows[0].id == target.id  # it holds the 8 rarest
    assert found.degraded == []
    with database.pool.connection() as conn:
        scope = resolve_scope(conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=None,
                              kinds=["node"], tags=None, max_knowledge_bases=10)  # fmt: skip
        tsq = build_tsqueries(conn, parse_query(paragraph), cx.actor.workspace_id)
    every = lexical_hits(database, cx, scope, tsq, cap=1000)
    assert len(every) == len(items) + 1  # each bullet, the ones of the commonest word too
