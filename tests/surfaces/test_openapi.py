"""The API's documentation: offline docs pages, the pinned schema, and what every operation
declares (its answer, its errors, its key, an example body)."""

from __future__ import annotations

import json
import pkgutil
import re
from dataclasses import replace
from importlib import import_module
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from fastapi.testclient import TestClient
from pydantic import BaseModel, TypeAdapter

from subspace.api import openapi
from subspace.api import routes as route_package
from subspace.api.app import create_app, pinned_schema
from subspace.api.openapi import REGENERATE, ErrorOut, SimErrorOut
from subspace.api.routes import search as search_routes
from subspace.cli import main
from subspace.config import Settings
from subspace.search.request import SearchResponse

PINNED = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
# Answer without a key: they are documentation, or tell a load balancer the process is up.
OPEN_PATHS = {"/healthz", "/readyz"}
SIM_PATH = "/api/v1/knowledge/search"
ROUTE_MODULES = list(pkgutil.iter_modules(route_package.__path__))
# src="…", href="…", spec-url="…" and Swagger UI's url: '…'
ASSET_URL = re.compile(r"""(?:src|href|spec-url)="([^"]+)"|\burl:\s*'([^']+)'""")


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, ops in sorted(schema["paths"].items())
        for method, operation in sorted(ops.items())
    ]


def resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        name = node["$ref"].removeprefix("#/components/schemas/")
        node = schema["components"]["schemas"][name]
    return node


def test_docs_pages_load_only_assets_this_server_serves(settings: Settings) -> None:
    client = TestClient(create_app(settings))  # no key: the docs are open
    seen = []
    for page in ("/docs", "/redoc"):
        response = client.get(page)
        assert response.status_code == 200, page
        assert response.headers["content-type"].startswith("text/html")
        urls = [a or b for a, b in ASSET_URL.findall(response.text)]
        assert any(url.endswith(".js") for url in urls), (page, urls)
        for url in urls:
            assert url.startswith("/"), f"{page} loads {url}"
            assert not url.startswith("//"), f"{page} loads {url}"
            assert client.get(url).status_code == 200, f"{page} references {url}"
            seen.append(url)
    assert "/openapi.json" in seen
    # No other host named anywhere in the pages themselves (fonts, badges, CDNs).
    for page in ("/docs", "/redoc"):
        assert "http" not in client.get(page).text, page
    # Swagger UI's default validator fetches a badge from its own host.
    assert '"validatorUrl": null' in client.get("/docs").text
    # And the browser is told so: whatever a bundle would fetch (ReDoc's logo) stays unfetched.
    for page in ("/docs", "/redoc"):
        policy = client.get(page).headers["content-security-policy"]
        assert "default-src 'self'" in policy, page
        assert "http" not in policy, page


def test_pinned_schema_matches_the_code(settings: Settings) -> None:
    expected = pinned_schema()
    assert PINNED.read_text(encoding="utf-8") == expected, (
        f"docs/openapi.json is out of date with the routes. Regenerate it: {REGENERATE}"
    )
    # The settings a server runs with (limits, provider, paths) do not change the document.
    changed = replace(settings, max_search_limit=7, max_request_bytes=10, providers="fake")
    served = create_app(changed).openapi()
    assert json.dumps(served, indent=2, sort_keys=True, ensure_ascii=False) + "\n" == expected


def test_every_operation_declares_its_answer_errors_and_key() -> None:
    schema = json.loads(pinned_schema())
    assert set(schema["components"]["securitySchemes"]) == {"bearer", "apiKey"}
    assert schema["components"]["securitySchemes"]["apiKey"]["name"] == "X-API-Key"
    checked = 0
    for method, path, operation in operations(schema):
        where = f"{method} {path}"
        assert operation.get("summary"), where
        responses = operation["responses"]
        ok = [
            answer
            for status, answer in responses.items()
            if status.startswith("2")
            and any("schema" in m for m in answer.get("content", {}).values())
        ]
        assert ok, f"{where} declares no 2xx answer with a schema"
        takes_input = bool(operation.get("parameters")) or "requestBody" in operation
        if takes_input:
            assert "422" in responses, f"{where} takes input but declares no 422"
        if path in OPEN_PATHS:
            continue
        assert "401" in responses, f"{where} declares no 401"
        assert operation["security"] == [{"bearer": []}, {"apiKey": []}], where
        shape = "SimErrorOut" if path == SIM_PATH else "ErrorOut"
        for status, answer in responses.items():
            if status[0] in "45":
                ref = answer["content"]["application/json"]["schema"]["$ref"]
                assert ref == f"#/components/schemas/{shape}", f"{where} {status}"
        checked += 1
    assert checked >= 40


def test_every_request_body_has_an_example() -> None:
    schema = json.loads(pinned_schema())
    bodies = 0
    for method, path, operation in operations(schema):
        if "requestBody" not in operation:
            continue
        for media, content in operation["requestBody"]["content"].items():
            body = resolve(schema, content["schema"])
            properties = body.get("properties", {}).values()
            # A multipart form's model is FastAPI's: its examples sit on each field.
            has_example = "examples" in body or (
                media == "multipart/form-data" and all("examples" in field for field in properties)
            )
            assert has_example, f"{method} {path} ({media}) has no example body"
            bodies += 1
    assert bodies >= 15


def test_declared_error_shapes_are_the_ones_answered(client: TestClient) -> None:
    anonymous = TestClient(client.app)
    missing = anonymous.get("/api/pages")
    assert missing.status_code == 401
    ErrorOut.model_validate(missing.json(), strict=True)
    sim = anonymous.post(SIM_PATH, json={"knowledgeBaseIds": [], "query": "x"})
    assert sim.status_code == 401
    SimErrorOut.model_validate(sim.json(), strict=True)
    assert sim.json()["success"] is False
    unknown = client.get("/api/pages/3f2b9c1e-8d4a-4e57-9a0b-6c1d2e3f4a5b")
    assert unknown.status_code == 404
    ErrorOut.model_validate(unknown.json(), strict=True)


def test_openapi_command_prints_the_pinned_schema() -> None:
    result = CliRunner().invoke(main, ["openapi"])
    assert result.exit_code == 0, result.output
    assert result.output == pinned_schema()


def test_every_example_is_valid_for_its_model() -> None:
    """An example the server would refuse, or could not answer, misleads: each example on an
    API model, and the search's answer, validates against its model."""
    checked = 0
    modules = [openapi, *(import_module(f"subspace.api.routes.{m.name}") for m in ROUTE_MODULES)]
    for module in modules:
        for model in vars(module).values():
            if isinstance(model, type) and issubclass(model, BaseModel) and model is not BaseModel:
                for example in model.model_json_schema().get("examples", []):
                    model.model_validate(example)
                    checked += 1
    answer = search_routes.SEARCH_ANSWER[200]["content"]["application/json"]["example"]
    TypeAdapter(SearchResponse).validate_python(answer)
    assert checked >= 20
