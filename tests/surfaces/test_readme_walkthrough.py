"""What a new user ran into following the README against a running server, kept fixed."""

from __future__ import annotations

import json
import socket

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from subspace import commands
from subspace.cli import main
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.errors import ConfigError
from tests.search_helpers import index, run


@pytest.mark.parametrize(
    ("kinds", "found"),
    [
        (["mail"], []),  # the words are only in a bullet and a page title
        (["page", "mail"], ["page"]),
        (["memory"], []),
        (["node", "mail"], ["node"]),
    ],
)
def test_a_kind_filter_that_leaves_out_every_match_answers_empty_not_degraded(
    database: Database, cx: Context, kinds: list[str], found: list[str]
) -> None:
    # The BM25 leg leaves out sources that hold none of the query's words; when the kinds
    # asked for were all left out, it sent Postgres an empty union (a syntax error), and the
    # search answered `degraded: ["lexical: failed (SyntaxError)"]`.
    page = commands.create_page(cx, "Harbour ferry")
    commands.add_node(cx, page.id, "The ferry leaves every twenty minutes")
    commands.add_mail(cx, message_id="<m@example.com>", subject="Dinner", body_text="At eight")
    index(database, cx)
    response = run(database, cx, "ferry", mode="lexical", kinds=kinds)
    assert response.degraded == []
    assert response.legs["lexical"].ran
    assert [row.type for row in response.rows] == found


def test_search_explain_on_the_command_line_shows_each_legs_weight(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, database: Database, cx: Context
) -> None:
    # Under the fake provider the vector leg weighs 0.01; the explain line printed
    # "vector 1/(2+60)" beside a score of 0.0002, a sum the reader could not make.
    monkeypatch.setenv("COLUMNS", "200")
    page = commands.create_page(cx, "Harbour")
    commands.add_node(cx, page.id, "ferry")
    commands.add_node(cx, page.id, "ferries")
    index(database, cx)
    result = runner.invoke(main, ["search", "ferry", "--explain", "--kind", "node"])
    assert result.exit_code == 0, result.output
    shown = result.stdout
    assert "vector 0.01/(1+60)" in shown, shown
    assert "vector 0.01/(2+60)" in shown, shown
    assert "lexical 1/(1+60)" in shown, shown
    assert "vector 1/(" not in shown, shown


def test_a_grep_limit_outside_its_range_is_refused_not_quietly_changed(
    client: TestClient, cx: Context
) -> None:
    # The CLI refused --limit 0 and 501, while GET /api/grep answered limit=0 with one match
    # and "stopped at the result limit", and limit=100000 as if it were 500.
    page = commands.create_page(cx, "Log")
    for n in range(3):
        commands.add_node(cx, page.id, f"kettle number {n}")
    for limit in (0, -1, 501, 100_000):
        refused = client.get("/api/grep", params={"pattern": "kettle", "limit": limit})
        assert refused.status_code == 422, (limit, refused.text)
        assert "1 to 500" in refused.json()["error"]["message"]
    tool = client.post(
        "/api/tools/kb.grep", json={"arguments": {"pattern": "kettle", "limit": 501}}
    )
    assert tool.status_code == 422, tool.text
    for limit, found in ((1, 1), (500, 3)):
        answered = client.get("/api/grep", params={"pattern": "kettle", "limit": limit})
        assert answered.status_code == 200, answered.text
        assert len(answered.json()["matches"]) == found


@pytest.mark.parametrize(
    ("variable", "raw", "named"),
    [
        ("SUBSPACE_LOG_LEVEL", "loud", "debug, info, warning, error"),
        ("SUBSPACE_LEXICAL_RANKER", "bm26", "bm25, ts_rank_cd"),
        ("SUBSPACE_PORT", "99999", "65535"),
    ],
)
def test_a_setting_outside_its_values_is_a_clear_error(variable: str, raw: str, named: str) -> None:
    # Each was accepted, then crashed with a traceback: `serve` on the log level ("Unknown
    # level: 'LOUD'") and the port ("bind(): port must be 0-65535"), `search` on the ranker.
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({variable: raw})
    assert variable in refused.value.message
    assert named in refused.value.message
    assert refused.value.message.endswith("Fix or unset it.")


def test_settings_with_fixed_values_take_them_in_any_case() -> None:
    settings = Settings.from_env({"SUBSPACE_LOG_LEVEL": "DEBUG", "SUBSPACE_PORT": "65535"})
    assert (settings.log_level, settings.port) == ("debug", 65535)
    assert Settings.from_env({"SUBSPACE_LEXICAL_RANKER": "ts_rank_cd"}).lexical_ranker == (
        "ts_rank_cd"
    )


def test_an_unknown_knowledge_base_on_the_command_line_says_where_the_names_are(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `search --kb` said only "No knowledge base named 'Nope'."; `reindex --kb` sent the user
    # to the HTTP API, though `subspace kb list` prints the names.
    monkeypatch.setenv("SUBSPACE_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("SUBSPACE_HOME", str(settings.home))
    monkeypatch.setenv("PROVIDERS", "fake")
    for command in (["search", "quince", "--kb", "Nope"], ["reindex", "--kb", "Nope"]):
        missing = CliRunner().invoke(main, command)
        assert missing.exit_code == 1, missing.output
        assert "No knowledge base named 'Nope'. See `subspace kb list`" in missing.output


def test_serve_on_a_port_in_use_says_so_before_printing_a_sign_in_link(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A second `make serve` printed a sign-in link, then uvicorn's "address already in use"
    # and exit status 3, with nothing saying which setting to change.
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        monkeypatch.setenv("SUBSPACE_DATABASE_URL", settings.database_url)
        monkeypatch.setenv("SUBSPACE_HOME", str(settings.home))
        monkeypatch.setenv("SUBSPACE_PORT", str(port))
        monkeypatch.setenv("PROVIDERS", "fake")
        result = CliRunner().invoke(main, ["serve", "--no-demo"])
    assert result.exit_code == 1, result.output
    assert f"127.0.0.1:{port} is already in use" in result.output
    assert "SUBSPACE_PORT" in result.output
    assert "Sign in" not in result.output


def test_search_on_the_command_line_can_filter_a_tag_between_two_values(
    runner: CliRunner, database: Database, cx: Context
) -> None:
    # `--tag NAME OP VALUE` takes one value, so `between` (documented for numbers and dates)
    # always failed with "needs two values" and no way to give the second.
    due = commands.create_tag(cx, "due", "date")
    for title, day in (("Ferry in December", "2026-12-24"), ("Ferry in March", "2027-03-01")):
        page = commands.create_page(cx, title)
        commands.set_tag(cx, due.id, "page", page.id, day)
    index(database, cx)
    args = ["search", "ferry", "--mode", "lexical", "--json", "--tag", "due", "between"]
    found = runner.invoke(main, [*args, "2026-12-01..2026-12-31"])
    assert found.exit_code == 0, found.output
    assert [row["title"] for row in json.loads(found.stdout)["rows"]] == ["Ferry in December"]
    one_value = runner.invoke(main, [*args, "2026-12-01"])
    assert one_value.exit_code == 2  # click's usage error
    assert "--tag due between LOW..HIGH" in one_value.output, one_value.output
