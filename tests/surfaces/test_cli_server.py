"""`subspace search` asks the server running on its home, and searches itself when there is
none (stopped, killed, its key revoked, its file damaged)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from subspace import commands
from subspace.api import create_app
from subspace.cli import main
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.keys import list_keys, revoke_key
from subspace.local_server import KEY_NAME, announce, running_server, server_file, withdraw
from tests.conftest import free_port, serving

# Where the command would find its database if it searched itself: nothing listens there.
NO_DATABASE = "postgresql://nobody@127.0.0.1:1/none"


@pytest.fixture
def served(database: Database, settings: Settings, cx: Context) -> Iterator[Settings]:
    """The app serving the test's database on a free port, announced in the home's
    server.json as `subspace serve` announces itself; yields the server's settings."""
    page = commands.create_page(cx, "Ferry operations")
    commands.add_node(cx, page.id, "The winter ferry leaves at nine from pier two.")
    settings = dataclasses.replace(settings, port=free_port())
    with serving(create_app(settings, database), port=settings.port):
        announce(database, settings)
        yield settings
        withdraw(settings)


def _search(settings: Settings, *args: str, database_url: str = NO_DATABASE) -> tuple[int, str]:
    env = {"SUBSPACE_HOME": str(settings.home), "SUBSPACE_DATABASE_URL": database_url,
           "PROVIDERS": "fake"}  # fmt: skip
    result = CliRunner().invoke(main, ["search", *args], env=env)
    return result.exit_code, result.output


def test_a_search_asks_the_running_server(served: Settings) -> None:
    code, output = _search(served, "winter ferry", "--explain")
    assert code == 0, output
    assert "The winter ferry leaves at nine" in output
    assert f"Answered by the server at http://127.0.0.1:{served.port}." in output
    code, output = _search(served, "winter ferry", "--json")
    assert code == 0, output
    assert json.loads(output)["rows"][0]["passage"].startswith("The winter ferry")
    # The key is written for its owner only, and named for what it is.
    assert server_file(served).stat().st_mode & 0o777 == 0o600


def test_the_servers_refusal_is_the_commands_error(served: Settings) -> None:
    code, output = _search(served, "ferry", "--limit", "100000")
    assert code == 1
    assert "SUBSPACE_MAX_SEARCH_LIMIT" in output
    code, output = _search(served, "ferry", "--kb", "Nowhere")
    assert code == 1
    assert "No knowledge base named 'Nowhere'" in output
    code, output = _search(served, "ferry", "--tag", "due", "lt", "x")
    assert code == 1
    assert "due" in output and "Traceback" not in output


def test_a_base_named_on_the_command_line_is_found_through_the_server(
    served: Settings, cx: Context
) -> None:
    harbour = commands.create_knowledge_base(cx, "Harbour notes")
    page = commands.create_page(cx, "Piers", kb_id=harbour.id)
    commands.add_node(cx, page.id, "The winter ferry docks at pier five on Sundays.")
    code, output = _search(served, "winter ferry", "--kb", "  Harbour   notes ")
    assert code == 0, output
    assert "pier five" in output
    assert "pier two" not in output  # the default base's bullet


def test_without_a_running_server_the_command_searches_itself(
    served: Settings, database: Database, cx: Context
) -> None:
    here = served.database_url
    # A key revoked since the server wrote it: the server refuses it, the command searches.
    with database.pool.connection() as conn:
        (key,) = [k for k in list_keys(conn, cx.actor.workspace_id) if k.name == KEY_NAME]
        revoke_key(conn, cx.actor.workspace_id, key.id)
    code, output = _search(served, "winter ferry", "--explain", database_url=here)
    assert code == 0, output
    assert "The winter ferry leaves at nine" in output
    assert "Answered by the server" not in output
    # Started again, the server makes a new key; stopped, it leaves only its key behind.
    announce(database, served)
    assert _search(served, "winter ferry")[0] == 0
    withdraw(served)
    assert running_server(served) is None
    assert _search(served, "winter ferry")[0] == 1  # no server, and no database either
    assert _search(served, "winter ferry", database_url=here)[0] == 0


def test_a_server_killed_or_a_damaged_file_is_no_server(
    served: Settings, database: Database
) -> None:
    held = json.loads(server_file(served).read_text())
    gone = os.fork()
    if gone == 0:
        os._exit(0)
    os.waitpid(gone, 0)  # a process id that no longer runs: a server killed with -9
    server_file(served).write_text(json.dumps({**held, "pid": gone}))
    assert running_server(served) is None
    for damaged in ("{", "[1, 2]", '{"url": 7, "pid": "x", "key": null}', ""):
        server_file(served).write_text(damaged)
        assert running_server(served) is None, damaged
        code, output = _search(served, "winter ferry", database_url=served.database_url)
        assert code == 0, output
    # A server address that answers nothing (its port closed since): the command searches.
    server_file(served).write_text(json.dumps({**held, "url": f"http://127.0.0.1:{free_port()}"}))
    code, output = _search(served, "winter ferry", "--explain", database_url=served.database_url)
    assert code == 0, output
    assert "Answered by the server" not in output
    announce(database, served)  # the file as the fixture's withdraw expects it
