"""The `subspace` command, through click's runner, on a real database."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from subspace.cli import main
from subspace.config import Settings


@pytest.fixture
def runner(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("SUBSPACE_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("SUBSPACE_HOME", str(settings.home))
    return CliRunner()


def test_keys_create_list_revoke(runner: CliRunner) -> None:
    created = runner.invoke(main, ["keys", "create", "--name", "laptop"])
    assert created.exit_code == 0, created.output
    token = created.stdout.strip().splitlines()[-1]
    assert token.startswith("ssk_") and " " not in token
    listed = json.loads(runner.invoke(main, ["keys", "list", "--json"]).stdout)
    assert [(k["name"], k["revoked_at"]) for k in listed] == [("laptop", None)]
    assert token.startswith(listed[0]["prefix"])
    revoked = runner.invoke(main, ["keys", "revoke", listed[0]["id"]])
    assert revoked.exit_code == 0, revoked.output
    listed = json.loads(runner.invoke(main, ["keys", "list", "--json"]).stdout)
    assert listed[0]["revoked_at"] is not None
    table = runner.invoke(main, ["keys", "list"])
    assert "laptop" in table.stdout


def test_revoking_an_unknown_key_says_so(runner: CliRunner) -> None:
    result = runner.invoke(main, ["keys", "revoke", "00000000-0000-0000-0000-000000000001"])
    assert result.exit_code == 1
    assert "No API key with id" in result.output


def test_migrate_is_idempotent(runner: CliRunner) -> None:
    result = runner.invoke(main, ["migrate"])
    assert result.exit_code == 0, result.output
    assert "newest schema" in result.stdout and "applied" not in result.stdout


def test_an_unreachable_database_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBSPACE_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    result = CliRunner().invoke(main, ["keys", "list"])
    assert result.exit_code == 1
    assert "SUBSPACE_DATABASE_URL" in result.output


def test_a_malformed_setting_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBSPACE_PORT", "http")
    result = CliRunner().invoke(main, ["keys", "list"])
    assert result.exit_code == 1
    assert "SUBSPACE_PORT must be a whole number" in result.output
