from __future__ import annotations

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
