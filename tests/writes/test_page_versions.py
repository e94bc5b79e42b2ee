"""Page versions: every page or bullet write moves the version, and a write made from an
older read (`base_version`) is refused with 409 `stale_page` instead of overwriting."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient


def _page(client: TestClient) -> dict[str, Any]:
    response = client.post("/api/pages", json={"title": "Plans"})
    assert response.status_code == 201
    page: dict[str, Any] = response.json()
    return page


def _version(client: TestClient, page_id: str) -> int:
    version: int = client.get(f"/api/pages/{page_id}").json()["version"]
    return version


def test_every_write_moves_the_version_and_answers_it(client: TestClient) -> None:
    page = _page(client)
    assert page["version"] == 0
    pid = page["id"]
    a = client.post("/api/nodes", json={"page_id": pid, "text": "a"}).json()
    assert a["page_version"] == 1
    b = client.post("/api/nodes", json={"page_id": pid, "text": "b", "base_version": 1}).json()
    assert b["page_version"] == 2
    steps = [
        ("patch", f"/api/nodes/{b['id']}", {"text": "b2", "base_version": 2}),
        ("patch", f"/api/nodes/{b['id']}", {"props": {"memory": True}, "base_version": 3}),
        ("post", f"/api/nodes/{b['id']}/indent?base_version=4", None),
        ("post", f"/api/nodes/{b['id']}/outdent?base_version=5", None),
        ("post", f"/api/nodes/{b['id']}/move", {"position": 0, "base_version": 6}),
    ]
    for expected, (method, url, body) in enumerate(steps, start=3):
        response = client.request(method, url, json=body)
        assert response.status_code == 200, response.text
        assert response.json()["page_version"] == expected
    assert client.get(f"/api/nodes/{a['id']}").json()["page_version"] == 7
    renamed = client.patch(f"/api/pages/{pid}", json={"title": "Plans 2", "base_version": 7})
    assert renamed.json()["version"] == 8
    gone = client.delete(f"/api/nodes/{a['id']}?base_version=8").json()
    assert gone == {"deleted": [a["id"]], "page_version": 9}
    assert client.post(f"/api/pages/{pid}/archive?base_version=9").json()["version"] == 10
    assert client.post(f"/api/pages/{pid}/restore?base_version=10").json()["version"] == 11
    assert client.delete(f"/api/pages/{pid}?base_version=11").json()["version"] == 12
    assert _version(client, pid) == 12
    listed = client.get("/api/pages", params={"include_hidden": True}).json()
    assert [p["version"] for p in listed if p["id"] == pid] == [12]


def test_text_and_props_in_one_patch_check_the_version_once(client: TestClient) -> None:
    pid = _page(client)["id"]
    node = client.post("/api/nodes", json={"page_id": pid, "text": "a"}).json()
    both = {"text": "a2", "props": {"memory": True}, "base_version": 1}
    response = client.patch(f"/api/nodes/{node['id']}", json=both)
    assert response.status_code == 200, response.text
    assert response.json()["page_version"] == 3
    assert response.json()["props"] == {"memory": True}


def test_a_stale_write_is_refused_and_changes_nothing(client: TestClient) -> None:
    pid = _page(client)["id"]
    node = client.post("/api/nodes", json={"page_id": pid, "text": "first"}).json()
    read = node["page_version"]
    # another window edits the bullet
    newer = client.patch(f"/api/nodes/{node['id']}", json={"text": "theirs", "base_version": read})
    assert newer.status_code == 200
    # this window, still at the old version, edits it too
    stale = client.patch(f"/api/nodes/{node['id']}", json={"text": "mine", "base_version": read})
    assert stale.status_code == 409
    error = stale.json()["error"]
    assert error["code"] == "stale_page"
    assert f"base_version {read}" in error["message"]
    assert "Read the page again" in error["message"]
    tree = client.get(f"/api/pages/{pid}").json()
    assert [n["text"] for n in tree["nodes"]] == ["theirs"]
    assert tree["version"] == read + 1


def test_every_write_refuses_a_stale_version(client: TestClient) -> None:
    pid = _page(client)["id"]
    node = client.post("/api/nodes", json={"page_id": pid, "text": "a"}).json()
    client.post("/api/nodes", json={"page_id": pid, "text": "b"})
    stale = 0  # the page is at version 2
    writes = [
        ("post", "/api/nodes", {"page_id": pid, "text": "c", "base_version": stale}),
        ("patch", f"/api/nodes/{node['id']}", {"text": "x", "base_version": stale}),
        ("patch", f"/api/nodes/{node['id']}", {"props": {"memory": True}, "base_version": stale}),
        ("post", f"/api/nodes/{node['id']}/move", {"position": 1, "base_version": stale}),
        ("post", f"/api/nodes/{node['id']}/indent?base_version={stale}", None),
        ("post", f"/api/nodes/{node['id']}/outdent?base_version={stale}", None),
        ("delete", f"/api/nodes/{node['id']}?base_version={stale}", None),
        ("patch", f"/api/pages/{pid}", {"title": "t", "base_version": stale}),
        ("post", f"/api/pages/{pid}/archive?base_version={stale}", None),
        ("delete", f"/api/pages/{pid}?base_version={stale}", None),
        ("post", f"/api/pages/{pid}/restore?base_version={stale}", None),
    ]
    for method, url, body in writes:
        response = client.request(method, url, json=body)
        assert response.status_code == 409, (method, url, response.text)
        assert response.json()["error"]["code"] == "stale_page"
    tree = client.get(f"/api/pages/{pid}").json()
    assert tree["version"] == 2
    assert tree["title"] == "Plans"
    assert [(n["text"], n["props"]) for n in tree["nodes"]] == [("a", {}), ("b", {})]


def test_writes_without_base_version_are_not_checked(client: TestClient) -> None:
    pid = _page(client)["id"]
    node = client.post("/api/nodes", json={"page_id": pid, "text": "a"}).json()
    client.patch(f"/api/nodes/{node['id']}", json={"text": "b"})
    response = client.patch(f"/api/nodes/{node['id']}", json={"text": "c"})
    assert response.status_code == 200
    assert response.json()["page_version"] == 3
