"""The `subspace` command, through click's runner, on a real database."""

from __future__ import annotations

import json
from uuid import UUID

import pytest
from click.testing import CliRunner

from subspace.background import Background
from subspace.cli import main
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database


def test_keys_create_list_revoke(runner: CliRunner) -> None:
    created = runner.invoke(main, ["keys", "create", "--name", "laptop"])
    assert created.exit_code == 0, created.output
    token = created.stdout.strip().splitlines()[-1]
    assert token.startswith("ssk_")
    assert " " not in token
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
    assert "newest schema" in result.stdout
    assert "applied" not in result.stdout


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


def test_keys_revoke_takes_the_short_id_keys_list_shows(runner: CliRunner) -> None:
    runner.invoke(main, ["keys", "create", "--name", "laptop"])
    table = runner.invoke(main, ["keys", "list"]).stdout
    key_id = json.loads(runner.invoke(main, ["keys", "list", "--json"]).stdout)[0]["id"]
    assert key_id[:8] in table
    revoked = runner.invoke(main, ["keys", "revoke", key_id[:8]])
    assert revoked.exit_code == 0, revoked.output
    assert revoked.stdout.strip() == f"Revoked key {key_id}."
    assert runner.invoke(main, ["keys", "revoke", key_id]).exit_code == 0  # twice is fine


def test_keys_revoke_refuses_an_ambiguous_or_short_prefix(
    runner: CliRunner, database: Database, cx: Context
) -> None:
    with database.pool.connection() as conn:
        for n, ident in enumerate(("abcd1111-0000-4000-8000-000000000000",
                                   "abcd2222-0000-4000-8000-000000000000")):  # fmt: skip
            conn.execute(
                "insert into kb.api_keys (workspace_id, id, user_id, key_prefix, key_hash) "
                "values (%s, %s, %s, 'ssk_x', %s)",
                (cx.actor.workspace_id, UUID(ident), cx.actor.user_id, f"hash{n}"),
            )
    ambiguous = runner.invoke(main, ["keys", "revoke", "abcd"])
    assert ambiguous.exit_code == 1
    assert "starts the ids of several keys" in ambiguous.output
    assert runner.invoke(main, ["keys", "revoke", "ab"]).exit_code == 1
    assert "at least its first 4 characters" in runner.invoke(main, ["keys", "revoke", "ab"]).output
    assert runner.invoke(main, ["keys", "revoke", "abcd2"]).exit_code == 0
    with database.pool.connection() as conn:
        revoked = conn.execute(
            "select id::text from kb.api_keys where revoked_at is not null"
        ).fetchall()
    assert revoked == [{"id": "abcd2222-0000-4000-8000-000000000000"}]


def test_ask_answers_in_process_and_prints_json(
    runner: CliRunner, cx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    from subspace import commands
    from subspace.answers import runs
    from tests.answers.test_runs import Quoting

    monkeypatch.setattr(runs, "default_strategies", lambda: {"rag-direct": Quoting()})
    page = commands.create_page(cx, "Launch")
    beta = commands.add_node(cx, page.id, "The beta ships on Friday.")
    result = runner.invoke(main, ["ask", "beta", "--strategy", "rag-direct", "--page", "launch",
                                  "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert set(printed) == {"run_id", "strategy", "found", "answer"}
    assert printed["strategy"] == "rag-direct"
    assert printed["found"] is True
    assert printed["answer"] == [{"text": "The beta ships on Friday.", "refs": [f"node:{beta.id}"]}]
    streamed = runner.invoke(main, ["ask", "beta", "--strategy", "rag-direct"])
    assert streamed.exit_code == 0, streamed.output
    assert f"- The beta ships on Friday. [node:{beta.id}]" in streamed.stdout
    assert "kb.search beta" in streamed.stdout
    missing = runner.invoke(main, ["ask", "beta", "--page", "Nowhere"])
    assert missing.exit_code == 1
    assert "No page titled 'Nowhere'" in missing.output


def test_ask_leaves_the_run_to_a_running_server(
    runner: CliRunner,
    database: Database,
    settings: Settings,
    cx: Context,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import psycopg

    from subspace import commands
    from subspace.answers import runs
    from subspace.db.locks import SERVER_LOCK_KEY
    from tests.answers.test_runs import Quoting

    # The command itself has no strategy: only the server's worker can answer.
    monkeypatch.setattr(runs, "default_strategies", dict)
    page = commands.create_page(cx, "Launch")
    beta = commands.add_node(cx, page.id, "The beta ships on Friday.")
    engine = runs.RunEngine(database, settings, None, {"rag": Quoting()})
    with psycopg.connect(database.dsn, autocommit=True) as server:
        server.execute("select pg_advisory_lock_shared(%s)", (SERVER_LOCK_KEY,))
        background = Background()
        background.start_loop("runs", runs.RunWorker(engine, 1))
        try:
            result = runner.invoke(main, ["ask", "beta", "--json"])
        finally:
            background.stop()
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["answer"][0]["refs"] == [f"node:{beta.id}"]


def test_ctrl_c_cancels_the_question_and_keeps_what_was_written(
    settings: Settings, cx: Context
) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from subspace import commands

    page = commands.create_page(cx, "Launch")
    commands.add_node(cx, page.id, "The beta ships on Friday.")
    commands.add_node(cx, page.id, "The beta review is on Thursday.")
    # The strategy waits after its first bullet, long enough for the interrupt to land.
    script = (
        "import threading\n"
        "from subspace.answers import runs\n"
        "from tests.answers.test_runs import Quoting\n"
        "runs.default_strategies = lambda: {'rag': Quoting(threading.Event())}\n"
        "from subspace.cli import main\n"
        "main(['ask', 'beta', '--page', 'Launch'])\n"
    )
    env = {**os.environ, "SUBSPACE_DATABASE_URL": settings.database_url,
           "SUBSPACE_HOME": str(settings.home), "PROVIDERS": "fake"}  # fmt: skip
    root = Path(__file__).resolve().parents[2]
    # A terminal's Ctrl-C: the child must not inherit an ignored SIGINT (as under `nohup … &`).
    proc = subprocess.Popen(
        [sys.executable, "-c", script], cwd=root, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip

    def answers() -> list[str]:
        with cx.transaction() as conn:
            rows = conn.execute(
                "select text from kb.nodes where workspace_id = %s and props ? 'refs'",
                (cx.actor.workspace_id,),
            ).fetchall()
        return [row["text"] for row in rows]

    deadline = time.monotonic() + 30
    while not answers() and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1, output
    assert "Cancelling" in output
    assert "The run cancelled" in output
    assert len(answers()) == 1
    with cx.transaction() as conn:
        status = conn.execute("select status from kb.runs").fetchone()
    assert status is not None
    assert status["status"] == "cancelled"


def test_ctrl_c_while_a_bullet_prints_cancels_the_question(
    runner: CliRunner, cx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C landed while the first answer bullet was printed: the interrupt escaped the loop,
    # the command said "Aborted!" and the run went on with nobody watching.
    import threading

    from subspace import cli, commands
    from subspace.answers import runs
    from tests.answers.test_runs import Quoting

    page = commands.create_page(cx, "Launch")
    commands.add_node(cx, page.id, "The beta ships on Friday.")
    commands.add_node(cx, page.id, "The beta review is on Thursday.")
    monkeypatch.setattr(runs, "default_strategies", lambda: {"rag": Quoting(threading.Event())})
    printed = cli.console.print
    interrupted = []

    def print_or_interrupt(*args: object, **kwargs: object) -> None:
        if not interrupted and args and str(args[0]).startswith("- "):
            interrupted.append(args[0])
            raise KeyboardInterrupt
        printed(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cli.console, "print", print_or_interrupt)
    result = runner.invoke(main, ["ask", "beta", "--page", "Launch"])
    assert interrupted, result.output
    assert result.exit_code == 1, result.output
    assert "Cancelling" in result.output, result.output
    assert "The run cancelled" in result.output, result.output
    with cx.transaction() as conn:
        status = conn.execute("select status from kb.runs").fetchone()
    assert status == {"status": "cancelled"}
