"""POST /api/v1/knowledge/search: Sim's knowledge search body and reply, over the one search."""

from __future__ import annotations

from typing import Any

import jsonschema
import numpy as np
import pytest
from fastapi.testclient import TestClient

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.ingest.worker import extract_pending
from subspace.keys import create_key, list_keys, revoke_key
from subspace.providers.fake import FakeProvider
from subspace.workspaces import create_workspace
from tests.search_helpers import index

PATH = "/api/v1/knowledge/search"
RESULT_FIELDS = {
    "documentId",
    "documentName",
    "sourceUrl",
    "content",
    "chunkIndex",
    "metadata",
    "similarity",
    "rankScore",
    "rank",
}
DATA_FIELDS = {"results", "query", "knowledgeBaseIds", "knowledgeBaseId", "topK", "totalResults"}
# Longer than a highlighted passage (400 characters) and shorter than a chunk (1,000): the
# content must be the whole chunk, not the passage the search shows around the match.
RELEASE = (
    "The release train stalled because of PROJ-1234 in the harbour ledger. "
    + "The copper lantern and the willow signal were checked twice by the night crew. " * 5
).strip()


def default_kb(client: TestClient) -> str:
    kbs = client.get("/api/knowledge-bases").json()
    return str(kbs[0]["id"])


def corpus(database: Database, cx: Context) -> dict[str, Any]:
    """A text file holding PROJ-1234, near misses in a bullet and a mail, all indexed."""
    file = commands.upload_file(cx, "release.txt", RELEASE.encode(), content_type="text/plain")
    page = commands.create_page(cx, "Release notes")
    node = commands.add_node(cx, page.id, "PROJ-1243 and PROJ-12340 are other tickets")
    mail = commands.add_mail(
        cx,
        message_id="<r@x>",
        subject="Release train",
        body_text="The harbour ledger is late again.",
    )
    extract_pending(database, cx.settings)
    index(database, cx)
    return {"file": file, "page": page, "node": node, "mail": mail}


def stored_similarity(database: Database, query: str, ref: str) -> float:
    """1 - cosine distance between the query's fake embedding and the stored one, in numpy."""
    with database.pool.connection() as conn:
        row = conn.execute(
            "select vec::text as v from search.embeddings where ref = %s", (ref,)
        ).fetchone()
    assert row is not None
    stored = np.array([float(x) for x in row["v"].strip("[]").split(",")])
    wanted = FakeProvider().embed([query])[0].astype(float)
    stored, wanted = stored[: len(wanted)], wanted
    cosine = float(stored @ wanted / (np.linalg.norm(stored) * np.linalg.norm(wanted)))
    return cosine


def check_types(result: dict[str, Any]) -> None:
    assert set(result) == RESULT_FIELDS
    assert isinstance(result["documentId"], str)
    assert isinstance(result["documentName"], str)
    assert result["sourceUrl"] is None
    assert isinstance(result["content"], str)
    assert type(result["chunkIndex"]) is int
    assert isinstance(result["metadata"], dict)
    assert "kind" in result["metadata"]
    assert isinstance(result["similarity"], float)
    assert isinstance(result["rankScore"], float)
    assert type(result["rank"]) is int


def test_hybrid_finds_the_ticket_with_every_field_typed(
    database: Database, cx: Context, client: TestClient
) -> None:
    made = corpus(database, cx)
    kb = default_kb(client)
    response = client.post(PATH, json={"knowledgeBaseIds": kb, "query": "PROJ-1234"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["success"] is True
    data = body["data"]
    assert set(data) == DATA_FIELDS
    assert (data["query"], data["knowledgeBaseIds"], data["knowledgeBaseId"], data["topK"]) == (
        "PROJ-1234",
        [kb],
        kb,
        10,
    )
    assert data["totalResults"] == len(data["results"]) >= 1
    first = data["results"][0]
    check_types(first)
    assert first["documentId"] == str(made["file"].id)
    assert first["documentName"] == "release.txt"
    assert first["content"] == RELEASE
    assert first["chunkIndex"] == 0
    assert first["metadata"]["kind"] == "file"
    assert first["rank"] == 1
    ref = f"file:{made['file'].id}:0"
    assert first["similarity"] == pytest.approx(
        stored_similarity(database, "PROJ-1234", ref), abs=2e-3
    )
    for position, result in enumerate(data["results"], start=1):
        check_types(result)
        assert result["rank"] == position
        assert result["similarity"] is not None  # every result found has a stored embedding
    scores = [r["rankScore"] for r in data["results"]]
    assert scores == sorted(scores, reverse=True)
    kinds = {r["metadata"]["kind"]: r for r in data["results"]}
    if "node" in kinds:  # a bullet is a document: its page, and the bullet as content
        assert kinds["node"]["documentId"] == str(made["page"].id)
        assert kinds["node"]["content"] == "PROJ-1243 and PROJ-12340 are other tickets"
        assert kinds["node"]["chunkIndex"] == 1  # the first bullet of its page


def test_pages_and_mail_appear_as_documents(
    database: Database, cx: Context, client: TestClient
) -> None:
    made = corpus(database, cx)
    response = client.post(
        PATH, json={"knowledgeBaseIds": [default_kb(client)], "query": "harbour ledger"}
    )
    results = response.json()["data"]["results"]
    by_kind = {r["metadata"]["kind"]: r for r in results}
    assert by_kind["mail"]["documentId"] == str(made["mail"].id)
    assert by_kind["mail"]["documentName"] == "Release train"
    found = client.post(
        PATH, json={"knowledgeBaseIds": [default_kb(client)], "query": "other tickets"}
    ).json()["data"]["results"]
    node = next(r for r in found if r["metadata"]["kind"] == "node")
    assert node["documentId"] == str(made["page"].id)
    assert node["documentName"] == "Release notes"
    assert node["content"] == "PROJ-1243 and PROJ-12340 are other tickets"
    assert node["metadata"]["ref"] == f"node:{made['node'].id}"


def test_vector_mode_ranks_by_similarity(
    database: Database, cx: Context, client: TestClient
) -> None:
    corpus(database, cx)
    response = client.post(
        PATH,
        json={
            "knowledgeBaseIds": [default_kb(client)],
            "query": "release train",
            "searchMode": "vector",
        },
    )
    assert response.status_code == 200, response.text
    results = response.json()["data"]["results"]
    assert len(results) >= 2
    for result in results:
        check_types(result)
        assert isinstance(result["similarity"], float)
        assert result["rankScore"] == result["similarity"]
        ref = result["metadata"]["ref"]
        expected = stored_similarity(database, "release train", ref)
        assert result["similarity"] == pytest.approx(expected, abs=2e-3), ref
    similarities = [r["similarity"] for r in results]
    assert similarities == sorted(similarities, reverse=True)
    # The same search in hybrid mode ranks by the fused score, which is not the similarity.
    hybrid = client.post(
        PATH,
        json={
            "knowledgeBaseIds": [default_kb(client)],
            "query": "release train",
            "searchMode": None,
        },
    ).json()
    assert all(r["rankScore"] != r["similarity"] for r in hybrid["data"]["results"])


def test_tag_only_lists_the_matching_chunks(
    database: Database, cx: Context, client: TestClient
) -> None:
    team = commands.create_tag(cx, "team", "text")
    size = commands.create_tag(cx, "size", "number")
    done = commands.create_tag(cx, "done", "boolean")
    ours = commands.upload_file(cx, "ours.txt", b"Search team notes.", content_type="text/plain")
    theirs = commands.upload_file(cx, "theirs.txt", b"Ops team notes.", content_type="text/plain")
    commands.set_tag(cx, team.id, "file", ours.id, "search")
    commands.set_tag(cx, team.id, "file", theirs.id, "ops")
    commands.set_tag(cx, size.id, "file", ours.id, 5)
    commands.set_tag(cx, size.id, "file", theirs.id, 50)
    commands.set_tag(cx, done.id, "file", ours.id, True)
    commands.set_tag(cx, done.id, "file", theirs.id, False)
    extract_pending(database, cx.settings)
    index(database, cx)
    kb = default_kb(client)
    filters: list[dict[str, Any]] = [
        {"tagName": "team", "tagSlot": "tag1", "fieldType": "text", "value": "search"},
        {
            "tagName": "size",
            "fieldType": "number",
            "operator": "between",
            "value": 1,
            "valueTo": 10,
        },
        {"tagName": "done", "fieldType": "boolean", "operator": "neq", "value": False},
    ]
    for tag_filter in filters:
        response = client.post(PATH, json={"knowledgeBaseIds": [kb], "tagFilters": [tag_filter]})
        assert response.status_code == 200, (tag_filter, response.text)
        results = response.json()["data"]["results"]
        assert [r["documentName"] for r in results] == ["ours.txt"], tag_filter
        assert results[0]["content"] == "Search team notes."
        assert results[0]["chunkIndex"] == 0
        assert results[0]["similarity"] == 1.0
        check_types(results[0])
    # A query with the filter narrows the query's hits to the tagged file.
    both = client.post(
        PATH,
        json={
            "knowledgeBaseIds": [kb],
            "query": "team notes",
            "tagFilters": [
                {"tagName": "team", "fieldType": "text", "operator": "neq", "value": "search"}
            ],
        },
    )
    assert [r["documentName"] for r in both.json()["data"]["results"]] == ["theirs.txt"]


def test_top_k_is_honoured(database: Database, cx: Context, client: TestClient) -> None:
    page = commands.create_page(cx, "Tickets")
    for n in range(6):
        commands.add_node(cx, page.id, f"lighthouse keeper log {n}")
    index(database, cx)
    kb = default_kb(client)
    for top_k in (1, 2, 5):
        data = client.post(
            PATH, json={"knowledgeBaseIds": [kb], "query": "lighthouse", "topK": top_k}
        ).json()["data"]
        assert (len(data["results"]), data["totalResults"], data["topK"]) == (top_k,) * 3
        assert [r["rank"] for r in data["results"]] == list(range(1, top_k + 1))
    data = client.post(PATH, json={"knowledgeBaseIds": [kb], "query": "lighthouse"}).json()["data"]
    assert data["topK"] == 10
    assert data["totalResults"] == len(data["results"])
    contents = {r["content"] for r in data["results"]}
    assert {f"lighthouse keeper log {n}" for n in range(6)} <= contents


@pytest.mark.parametrize(
    ("change", "status", "words"),
    [
        ({"topK": 10.5}, 400, "topK"),
        ({"topK": "10"}, 400, "topK"),
        ({"topK": None}, 400, "topK"),
        ({"topK": 0}, 400, "topK"),
        ({"topK": 101}, 400, "topK"),
        ({"query": None}, 400, "query is required"),
        ({"query": "   "}, 400, "query is required"),
        ({"rerankerEnabled": True}, 400, "no reranker"),
        ({"searchMode": "lexical"}, 400, "searchMode"),
        ({"knowledgeBaseIds": None}, 400, "knowledgeBaseIds"),
        ({"knowledgeBaseIds": []}, 400, "knowledgeBaseIds is empty"),
        ({"knowledgeBaseIds": "nope"}, 400, "not a knowledge base id"),
        ({"knowledgeBaseIds": [7]}, 400, "knowledgeBaseIds"),
        ({"tagFilters": [{"tagName": "team", "value": "x", "operator": "gt"}]}, 400, "'gt'"),
        (
            {"tagFilters": [{"tagName": "team", "fieldType": "color", "value": "x"}]},
            400,
            "fieldType",
        ),
        (
            {
                "tagFilters": [
                    {"tagName": "n", "fieldType": "number", "operator": "between", "value": 1}
                ]
            },
            400,
            "valueTo",
        ),
        ({"tagFilters": [{"tagName": "nosuch", "value": "x"}]}, 422, "Unknown tag 'nosuch'"),
        ({"query": "x" * 100_000}, 422, "SUBSPACE_MAX_QUERY_CHARS"),
    ],
)
def test_bad_input_is_refused_in_sims_shape(
    client: TestClient, change: dict[str, Any], status: int, words: str
) -> None:
    body = {"knowledgeBaseIds": [default_kb(client)], "query": "ferry"} | change
    response = client.post(PATH, json=body)
    assert response.status_code == status, response.text
    answer = response.json()
    assert set(answer) == {"success", "error"}
    assert answer["success"] is False
    assert isinstance(answer["error"], str), answer["error"]
    assert words in answer["error"], answer["error"]
    assert answer["error"].endswith(".")


def test_a_malformed_body_is_refused_in_sims_shape(client: TestClient) -> None:
    for content in (b"{not json", b"[1, 2]", b""):
        response = client.post(PATH, content=content, headers={"content-type": "application/json"})
        assert response.status_code == 400, (content, response.text)
        assert response.json()["success"] is False


def test_the_reranker_fields_are_accepted_when_it_is_off(client: TestClient) -> None:
    body = {
        "knowledgeBaseIds": default_kb(client),
        "query": "ferry",
        "rerankerEnabled": False,
        "rerankerModel": "rerank-v3",
        "rerankerInputCount": 50,
        "rerankerApiKey": "k",
    }
    response = client.post(PATH, json=body)
    assert response.status_code == 200, response.text
    assert response.json() == {
        "success": True,
        "data": {
            "results": [],
            "query": "ferry",
            "knowledgeBaseIds": [body["knowledgeBaseIds"]],
            "knowledgeBaseId": body["knowledgeBaseIds"],
            "topK": 10,
            "totalResults": 0,
        },
    }


def test_another_workspaces_base_answers_404(
    database: Database, cx: Context, client: TestClient
) -> None:
    with database.pool.connection() as conn:
        actor = create_workspace(conn, "Other company")
        theirs = conn.execute(
            "select id from kb.knowledge_bases where workspace_id = %s", (actor.workspace_id,)
        ).fetchone()
    assert theirs is not None
    their_cx = database.context(actor, cx.settings)
    commands.add_node(their_cx, commands.create_page(their_cx, "Secret").id, "ferry secret")
    index(database, their_cx)
    for kb_ids in (str(theirs["id"]), [default_kb(client), str(theirs["id"])]):
        response = client.post(PATH, json={"knowledgeBaseIds": kb_ids, "query": "ferry"})
        assert response.status_code == 404, response.text
        assert response.json() == {
            "success": False,
            "error": f"No knowledge base with id {theirs['id']} in this workspace.",
        }


def test_keys_missing_malformed_or_revoked_answer_401(
    database: Database, cx: Context, client: TestClient
) -> None:
    body = {"knowledgeBaseIds": default_kb(client), "query": "ferry"}
    with database.pool.connection() as conn:
        _, token = create_key(conn, cx.actor, "sim")
    anonymous = TestClient(client.app)
    by_api_key = TestClient(client.app, headers={"x-api-key": token})
    assert by_api_key.post(PATH, json=body).status_code == 200
    assert by_api_key.get("/api/pages").status_code == 200  # X-API-Key works on every route
    cases = {
        "missing": anonymous.post(PATH, json=body),
        "malformed": anonymous.post(PATH, json=body, headers={"x-api-key": "ssk_nothex_x"}),
        "malformed bearer": anonymous.post(
            PATH, json=body, headers={"authorization": "Bearer nope"}
        ),
    }
    with database.pool.connection() as conn:
        for key in list_keys(conn, cx.actor.workspace_id):
            revoke_key(conn, cx.actor.workspace_id, key.id)
    cases["revoked"] = by_api_key.post(PATH, json=body)
    for name, response in cases.items():
        assert response.status_code == 401, (name, response.text)
        answer = response.json()
        assert answer["success"] is False, name
        assert "subspace keys create" in answer["error"], name
    assert "X-API-Key" in cases["missing"].json()["error"]
    assert "revoked" in cases["revoked"].json()["error"]


def test_a_chunk_not_embedded_yet_is_embedded_for_its_similarity(
    database: Database, cx: Context, client: TestClient
) -> None:
    page = commands.create_page(cx, "Ops")
    node = commands.add_node(cx, page.id, "The lighthouse keeper rotates the lamp")
    body = {"knowledgeBaseIds": default_kb(client), "query": "lighthouse keeper"}
    # Not indexed yet: only the lexical leg can find the bullet, and it has no embedding; its
    # text is embedded now, so the similarity is what the stored one will be.
    before = client.post(PATH, json=body).json()["data"]["results"]
    assert [r["metadata"]["ref"] for r in before] == [f"node:{node.id}"]
    check_types(before[0])
    index(database, cx)
    after = client.post(PATH, json=body).json()["data"]["results"]
    found = next(r for r in after if r["metadata"]["ref"] == f"node:{node.id}")
    expected = stored_similarity(database, "lighthouse keeper", f"node:{node.id}")
    assert found["similarity"] == pytest.approx(expected, abs=2e-3)
    assert before[0]["similarity"] == pytest.approx(expected, abs=2e-3)


def test_chunk_index_is_a_bullets_place_in_reading_order(
    database: Database, cx: Context, client: TestClient
) -> None:
    page = commands.create_page(cx, "Harbour")
    first = commands.add_node(cx, page.id, "Tides are posted at dawn")
    commands.add_node(cx, page.id, "Child of the first", parent_id=first.id)
    third = commands.add_node(cx, page.id, "The pilot boat waits at the quay")
    mail = commands.add_mail(cx, message_id="<q@x>", subject="Quay works", body_text="quay closed")
    index(database, cx)
    body = {"knowledgeBaseIds": default_kb(client), "query": "quay", "topK": 10}
    results = client.post(PATH, json=body).json()["data"]["results"]
    by_ref = {r["metadata"]["ref"]: r["chunkIndex"] for r in results}
    assert by_ref[f"node:{third.id}"] == 3  # after the first bullet and its child
    assert by_ref[f"mail:{mail.id}"] == 0
    titled = client.post(PATH, json={**body, "query": "harbour"}).json()["data"]["results"]
    assert {r["metadata"]["ref"]: r["chunkIndex"] for r in titled}[f"page:{page.id}"] == 0


# Sim's reply schema for knowledge search, transcribed: every number is a number, never null.
SIM_RESULT = {
    "type": "object",
    "required": sorted(RESULT_FIELDS),
    "properties": {
        "documentId": {"type": "string"},
        "documentName": {"type": "string"},
        "sourceUrl": {"type": ["string", "null"]},
        "content": {"type": "string"},
        "chunkIndex": {"type": "integer"},
        "metadata": {"type": "object"},
        "similarity": {"type": "number"},
        "rankScore": {"type": "number"},
        "rank": {"type": "integer", "minimum": 1},
    },
}
SIM_SUCCESS = {
    "type": "object",
    "required": ["success", "data"],
    "properties": {
        "success": {"const": True},
        "data": {
            "type": "object",
            "required": sorted(DATA_FIELDS),
            "properties": {
                "results": {"type": "array", "items": SIM_RESULT},
                "query": {"type": "string"},
                "knowledgeBaseIds": {"type": "array", "items": {"type": "string"}},
                "knowledgeBaseId": {"type": "string"},
                "topK": {"type": "integer"},
                "totalResults": {"type": "integer"},
            },
        },
    },
}
SIM_FAILURE = {
    "type": "object",
    "required": ["success", "error"],
    "additionalProperties": False,
    "properties": {"success": {"const": False}, "error": {"type": "string"}},
}


def test_every_reply_validates_against_sims_schema(
    database: Database, cx: Context, client: TestClient
) -> None:
    made = corpus(database, cx)
    commands.create_page(cx, "Fresh page, not embedded yet")  # a title with no vector yet
    tag = client.post("/api/tags", json={"name": "team", "type": "text"}).json()
    client.put(f"/api/tags/{tag['id']}/values/file/{made['file'].id}", json={"value": "ops"})
    kb = default_kb(client)
    team = [{"tagName": "team", "fieldType": "text", "operator": "eq", "value": "ops"}]
    bodies: list[dict[str, Any]] = []
    for mode in ("hybrid", "vector", None):
        for query in ("PROJ-1234", "harbour ledger release", "fresh page", "xqzvbnm"):
            bodies.append({"knowledgeBaseIds": [kb], "query": query, "searchMode": mode})
            bodies.append({"knowledgeBaseIds": kb, "query": query, "tagFilters": team, "topK": 3})
    bodies.append({"knowledgeBaseIds": [kb], "tagFilters": team})  # tags only
    seen = 0
    for body in bodies:
        answer = client.post(PATH, json={k: v for k, v in body.items() if v is not None})
        assert answer.status_code == 200, (body, answer.text)
        jsonschema.validate(answer.json(), SIM_SUCCESS)
        seen += len(answer.json()["data"]["results"])
    assert seen > 20  # the replies held results of every kind, not just empty lists
    for bad in (
        {"query": "x"},
        {"knowledgeBaseIds": [], "query": "x"},
        {"knowledgeBaseIds": [kb], "query": "x", "topK": 0},
        {"knowledgeBaseIds": [kb], "query": "x", "tagFilters": [{"tagName": "nope", "value": 1}]},
        {"knowledgeBaseIds": [kb], "query": "x", "extra": 1},
    ):
        answer = client.post(PATH, json=bad)
        assert answer.status_code >= 400, bad
        jsonschema.validate(answer.json(), SIM_FAILURE)
