"""Inputs and situations a hostile or unlucky client brings, each found against a running server."""

from __future__ import annotations

import psycopg

from subspace.indexer.reindex import SERVER_LOCK_KEY
from subspace.runtime import Database
from subspace.workspaces import create_workspace, list_workspaces


def test_a_workspace_can_be_created_while_a_server_holds_the_database(database: Database) -> None:
    # `subspace serve` holds its shared lock for its lifetime; creating a workspace (the CLI or
    # POST /api/admin/workspaces) must not wait for that lock, or it waits forever.
    with psycopg.connect(database.dsn, autocommit=True) as server:
        server.execute("select pg_advisory_lock_shared(%s)", (SERVER_LOCK_KEY,))
        with database.pool.connection() as conn:
            conn.execute("set lock_timeout = '2s'")
            actor = create_workspace(conn, "Acme")
            assert [w.name for w in list_workspaces(conn, actor.workspace_id)] == ["Acme"]
