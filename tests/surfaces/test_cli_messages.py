"""What the command line and MCP say: refs in the search table within 80 columns, ambiguous
titles and malformed refs, a home that does not exist, plurals, one table style, keys told
apart, the fake-provider notice once, and tool errors that name MCP's own schema."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from subspace import commands
from subspace.api import create_app
from subspace.cli import main
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.keys import create_key
from subspace.logs import configure_logging
from tests.surfaces.test_mcp import MCP_HEADERS, _rpc


def test_the_search_table_prints_each_rows_ref_within_80_columns(
    runner: CliRunner, cx: Context
) -> None:
    page = commands.create_page(cx, "Harbour operations and the long list of things to check")
    node = commands.add_node(
        cx, page.id, "The ferry to Ilha Verde leaves pier three at 7:40 " + "every weekday " * 8
    )
    result = runner.invoke(main, ["search", "ferry", "--mode", "lexical"])
    assert result.exit_code == 0, result.output
    assert f"node:{node.id}" in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80, result.stdout
    read = runner.invoke(main, ["read", f"node:{node.id}"])
    assert read.exit_code == 0
    assert "Ilha Verde" in read.stdout


def test_an_ambiguous_title_lists_the_pages_and_exits_2(runner: CliRunner, cx: Context) -> None:
    first = commands.create_page(cx, "Harbor ops log")
    second = commands.create_page(cx, "Harbor ops log")
    result = runner.invoke(main, ["read", "harbor ops log"])
    assert result.exit_code == 2, result.output
    assert "2 pages are titled 'harbor ops log'" in result.stderr
    assert f"page:{first.id}" in result.stderr
    assert f"page:{second.id}" in result.stderr


def test_a_malformed_ref_says_which_form_is_expected(runner: CliRunner, cx: Context) -> None:
    result = runner.invoke(main, ["read", "node:1234"])
    assert result.exit_code == 2, result.output
    assert "'node:1234' is not a ref: a node ref is node:<id>" in result.stderr
    chunk = runner.invoke(main, ["read", "file:abc:x"])
    assert "a file ref is file:<file_id>[:<n>], where <file_id> is a full id" in chunk.stderr


def test_a_folder_without_a_home_is_not_given_an_empty_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SUBSPACE_DATABASE_URL", raising=False)
    monkeypatch.delenv("SUBSPACE_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    for args in (
        ["search", "ferry"],
        ["kb", "list"],
        ["indexer", "status"],
        ["read", "x"],
        ["keys", "create"],
        ["workspaces", "create", "Team"],
    ):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 1, (args, result.output)
        assert "SUBSPACE_HOME" in result.output
        assert str(tmp_path) in result.output
    assert not (tmp_path / ".subspace").exists()


def test_counts_are_said_in_the_right_number(runner: CliRunner, cx: Context) -> None:
    page = commands.create_page(cx, "Lighthouse")
    commands.add_node(cx, page.id, "The keeper trims the wick")  # not embedded: one item waits
    result = runner.invoke(main, ["search", "keeper", "--mode", "lexical"])
    assert "1 result in" in result.stdout
    printed = " ".join(result.stdout.split())
    assert "1 item is not embedded yet: search by meaning does not see it until it is" in printed


def test_keys_list_tells_keys_apart(runner: CliRunner) -> None:
    tokens = []
    for name in ("laptop", "ci"):
        created = runner.invoke(main, ["keys", "create", "--name", name])
        tokens.append(created.stdout.strip().splitlines()[-1])
    listed = runner.invoke(main, ["keys", "list"]).stdout
    assert max(len(line) for line in listed.splitlines()) <= 80, listed
    shown = [line.split()[2] for line in listed.splitlines()[1:] if line.strip()]
    assert len(set(shown)) == 2, listed
    for token, cell in zip(tokens, shown, strict=True):
        assert cell.startswith("…"), listed
        assert token.endswith(cell[1:]), (token, cell)


def test_every_table_has_one_style_and_no_blank_header(runner: CliRunner, cx: Context) -> None:
    for args in (["indexer", "status"], ["kb", "list"], ["workspaces", "list"], ["keys", "list"]):
        result = runner.invoke(main, args)
        assert result.exit_code == 0, (args, result.output)
        lines = result.stdout.splitlines()
        assert lines, (args, result.stdout)
        assert lines[0].strip(), (args, result.stdout)
        assert not any(ch in result.stdout for ch in "┏┃━│─┌"), (args, result.stdout)


def test_the_fake_provider_notice_is_given_once_per_home(
    runner: CliRunner,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings.home.mkdir(parents=True, exist_ok=True)
    given: set[tuple[str, str]] = set()
    monkeypatch.setattr("subspace.providers.registry._GIVEN", given)
    monkeypatch.delenv("PROVIDERS")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr("subspace.providers.registry.local_extra_installed", lambda: False)
    monkeypatch.setattr("subspace.providers.registry.onnx_installed", lambda: False)

    def notices() -> int:
        return sum("fake provider" in r.getMessage() for r in caplog.records)

    with caplog.at_level(logging.WARNING):
        assert runner.invoke(main, ["search", "x"]).exit_code == 0
        assert notices() == 1
        given.clear()  # as a new process would: only the home's marker remembers
        assert runner.invoke(main, ["search", "x"]).exit_code == 0
        assert runner.invoke(main, ["indexer", "status"]).exit_code == 0
        assert notices() == 1


def test_mcp_says_nothing_per_request_at_info(
    database: Database, cx: Context, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    configure_logging("INFO")
    with database.pool.connection() as conn:
        _, token = create_key(conn, cx.actor, "agent")
    with caplog.at_level(logging.INFO), TestClient(create_app(settings, database)) as live:
        caplog.clear()
        for _ in range(3):
            listed = live.post(
                "/mcp", json=_rpc("tools/list"), headers={**MCP_HEADERS, "x-api-key": token}
            )
            assert listed.status_code == 200
        wrong = live.post(
            "/mcp",
            json=_rpc("tools/call", {"name": "kb.search", "arguments": {"qury": "x"}}),
            headers={**MCP_HEADERS, "x-api-key": token},
        )
    text = wrong.json()["result"]["content"][0]["text"]
    assert "tools/list" in text, text
    assert "/api/tools" not in text, text
    assert not [r for r in caplog.records if "Terminating session" in r.getMessage()]
