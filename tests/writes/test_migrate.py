from __future__ import annotations

from uuid import uuid4

from psycopg.types.json import Jsonb

from subspace.db.migrate import available_migrations, migrate, pending_migrations
from subspace.db.pool import connect


def test_migrate_twice_applies_nothing_the_second_time(db_dsn: str) -> None:
    # The test database was cloned from a migrated template.
    assert migrate(db_dsn) == []
    with connect(db_dsn) as conn:
        assert pending_migrations(conn) == []
        rows = conn.execute("select version from public.schema_migrations").fetchall()
    assert [r["version"] for r in rows] == [m.version for m in available_migrations()]


def test_migrate_from_empty_creates_default_workspace(empty_dsn: str) -> None:
    applied = migrate(empty_dsn)
    assert [m.version for m in applied] == [m.version for m in available_migrations()]
    with connect(empty_dsn) as conn:
        counts = conn.execute(
            "select (select count(*) from kb.workspaces) as ws,"
            " (select count(*) from kb.users) as users,"
            " (select count(*) from kb.knowledge_bases where is_default) as kbs"
        ).fetchone()
    assert counts == {"ws": 1, "users": 1, "kbs": 1}


def test_every_table_key_includes_workspace_id(db_dsn: str) -> None:
    """Distribution by workspace_id needs it in every table, primary key and foreign key."""
    with connect(db_dsn) as conn:
        tables = conn.execute(
            "select c.oid::regclass::text as name, c.oid from pg_class c "
            "join pg_namespace n on n.oid = c.relnamespace "
            "where n.nspname in ('kb', 'search') and c.relkind = 'r'"
        ).fetchall()
        assert len(tables) >= 14
        for table in tables:
            columns = conn.execute(
                "select attname from pg_attribute where attrelid = %s and attnum > 0",
                (table["oid"],),
            ).fetchall()
            assert "workspace_id" in {c["attname"] for c in columns}, table["name"]
            keys = conn.execute(
                "select conname, contype, array(select attname from pg_attribute a"
                " where a.attrelid = c.conrelid and a.attnum = any(c.conkey)) as cols "
                "from pg_constraint c where conrelid = %s and contype in ('p', 'f', 'u')",
                (table["oid"],),
            ).fetchall()
            assert any(k["contype"] == "p" for k in keys), f"{table['name']} has no primary key"
            for key in keys:
                assert "workspace_id" in key["cols"], f"{table['name']}.{key['conname']}"


def test_concurrent_migrations_apply_each_file_once(empty_dsn: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: migrate(empty_dsn), range(3)))
    assert sorted(len(r) for r in results) == [0, 0, len(available_migrations())]
    with connect(empty_dsn) as conn:
        assert conn.execute("select count(*) as n from kb.workspaces").fetchone() == {"n": 1}


def test_pgvector_version_is_checked(db_dsn: str) -> None:
    from subspace.db.pool import MIN_PGVECTOR, _version_tuple, check_pgvector

    with connect(db_dsn) as conn:
        assert _version_tuple(check_pgvector(conn)) >= MIN_PGVECTOR
    assert _version_tuple("0.7.4") < MIN_PGVECTOR <= _version_tuple("0.8.0")


def test_0026_names_the_items_of_old_events_and_queues_what_was_waiting(empty_dsn: str) -> None:
    """An outbox written before migration 0026: its waiting events become queued items, its
    dead letters per event become one per item, and every event names its item."""
    with connect(empty_dsn, autocommit=True) as conn:
        conn.execute(
            "create table public.schema_migrations (version integer primary key, "
            "name text not null, applied_at timestamptz not null default now())"
        )
        for migration in available_migrations():
            if migration.version >= 26:
                break
            conn.execute(migration.sql)
            conn.execute(
                "insert into public.schema_migrations (version, name) values (%s, %s)",
                (migration.version, migration.name),
            )
        ws = conn.execute("select workspace_id from kb.workspaces").fetchone()["workspace_id"]  # type: ignore[index]
        page, node, mail, tag = uuid4(), uuid4(), uuid4(), uuid4()
        events = [  # (event, payload, waiting)
            ("page.created", {"page_id": str(page)}, False),
            ("nodes.changed", {"page_id": str(page), "node_ids": [str(node)]}, True),
            ("nodes.deleted", {"page_id": str(page), "deleted_node_ids": [str(node)]}, True),
            ("mail.added", {"mail_id": str(mail)}, True),
            ("tag.defined", {"tag_id": str(tag)}, True),
        ]
        ids = []
        for event, payload, waiting in events:
            row = conn.execute(
                "insert into kb.outbox (workspace_id, event, payload, indexed_at, attempts) "
                "values (%s, %s, %s, case when %s then null else now() end, %s) returning id",
                (ws, event, Jsonb(payload), waiting, 2 if event == "mail.added" else 0),
            ).fetchone()
            ids.append(row["id"])  # type: ignore[index]
        conn.execute(
            "insert into search.dead_letters (workspace_id, event_id, event, payload, error, "
            "attempts) values (%s, %s, 'page.created', '{}', 'provider is down', 5)",
            (ws, ids[0]),
        )
    assert [m.version for m in migrate(empty_dsn)][:1] == [26]
    with connect(empty_dsn) as conn:
        named = conn.execute(
            "select event, item_kind, item_id, item_rows from kb.outbox order by id"
        ).fetchall()
        queued = conn.execute(
            "select item_kind, item_id, events, attempts from search.embedding_queue "
            "order by item_kind"
        ).fetchall()
        dead = conn.execute("select item_kind, item_id, events, error from search.dead_letters")
        dead_rows = dead.fetchall()
    assert [(r["event"], r["item_kind"], r["item_id"], r["item_rows"]) for r in named] == [
        ("page.created", "page", page, None),
        ("nodes.changed", "page", page, [node]),
        ("nodes.deleted", "page", page, [node]),
        ("mail.added", "mail", mail, None),
        ("tag.defined", None, None, None),
    ]
    assert queued == [
        {"item_kind": "mail", "item_id": mail, "events": 1, "attempts": 2},
        {"item_kind": "page", "item_id": page, "events": 2, "attempts": 0},
    ]
    assert dead_rows == [
        {"item_kind": "page", "item_id": page, "events": 1, "error": "provider is down"}
    ]
