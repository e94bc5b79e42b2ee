"""kb-commands: rows and their outbox event commit together or not at all."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.db import queries
from subspace.errors import Conflict, InvalidInput, NotFound


def events(cx: Context) -> list[dict[str, Any]]:
    with cx.transaction() as conn:
        return conn.execute(
            "select event, payload from kb.outbox where workspace_id = %s order by id",
            (cx.actor.workspace_id,),
        ).fetchall()


def test_each_command_appends_its_event(cx: Context) -> None:
    kb = commands.create_knowledge_base(cx, "Research")
    page = commands.create_page(cx, "Plan", kb_id=kb.id)
    node = commands.add_node(cx, page.id, "first")
    commands.edit_node(cx, node.id, "first, edited")
    commands.set_memory(cx, node.id, True)
    commands.rename_page(cx, page.id, "Plan B")
    file = commands.upload_file(cx, "a.txt", b"hello", content_type="text/plain")
    mail = commands.add_mail(cx, message_id="<m1@x>", subject="Hi", body_text="body")
    tag = commands.create_tag(cx, "status", "text")
    commands.set_tag(cx, tag.id, "file", file.id, "draft")
    commands.exclude(cx, "mail", mail.id)
    commands.delete_node(cx, node.id)
    commands.archive_page(cx, page.id)
    got = [(e["event"], e["payload"]) for e in events(cx)]
    assert got == [
        ("knowledge_base.created", {"kb_id": str(kb.id)}),
        ("page.created", {"page_id": str(page.id)}),
        ("nodes.changed", {"page_id": str(page.id), "node_ids": [str(node.id)]}),
        ("nodes.changed", {"page_id": str(page.id), "node_ids": [str(node.id)]}),
        ("nodes.changed", {"page_id": str(page.id), "node_ids": [str(node.id)]}),
        ("page.renamed", {"page_id": str(page.id)}),
        ("file.uploaded", {"file_id": str(file.id)}),
        ("mail.added", {"mail_id": str(mail.id)}),
        ("tag.defined", {"tag_id": str(tag.id)}),
        ("tag.set", {"tag_id": str(tag.id), "target_kind": "file", "target_id": str(file.id)}),
        (
            "item.excluded",
            {"user_id": str(cx.actor.user_id), "target_kind": "mail", "target_id": str(mail.id)},
        ),
        ("nodes.deleted", {"page_id": str(page.id), "deleted_node_ids": [str(node.id)]}),
        ("page.archived", {"page_id": str(page.id)}),
    ]


def test_a_failing_outbox_write_leaves_no_rows(cx: Context, database: Database) -> None:
    with database.pool.connection() as conn:
        conn.execute(
            "create function fail_outbox() returns trigger language plpgsql as "
            "$$ begin raise exception 'outbox is down'; end $$"
        )
        conn.execute(
            "create trigger fail_outbox before insert on kb.outbox "
            "for each row execute function fail_outbox()"
        )
    with pytest.raises(psycopg.errors.RaiseException):
        commands.create_page(cx, "Never stored")
    with cx.transaction() as conn:
        assert queries.list_pages(conn, cx.actor.workspace_id, include_hidden=True) == []
        blobs = conn.execute("select count(*) as n from kb.blobs").fetchone()
    with pytest.raises(psycopg.errors.RaiseException):
        commands.upload_file(cx, "x.txt", b"data")
    with cx.transaction() as conn:
        assert queries.list_files(conn, cx.actor.workspace_id) == []
        assert conn.execute("select count(*) as n from kb.blobs").fetchone() == blobs


def test_a_failing_row_write_leaves_no_event(cx: Context) -> None:
    page = commands.create_page(cx, "P")
    before = len(events(cx))
    with pytest.raises(NotFound):
        commands.add_node(cx, page.id, "child", parent_id=uuid4())
    with pytest.raises(Conflict):
        commands.create_knowledge_base(cx, "Default")
    assert len(events(cx)) == before


def test_text_tsv_matches_a_bullet_inside_its_own_transaction(cx: Context) -> None:
    page = commands.create_page(cx, "P")
    with cx.transaction() as conn:
        node = commands.add_node(cx.on(conn), page.id, "Rotate the staging certificates")
        row = conn.execute(
            "select id from kb.nodes where workspace_id = %s "
            "and text_tsv @@ websearch_to_tsquery('english', 'certificate rotation')",
            (cx.actor.workspace_id,),
        ).fetchone()
        assert row is not None
        assert row["id"] == node.id
        # Rolling back the outer transaction takes the node and its event with it.
        raise psycopg.Rollback()
    with cx.transaction() as conn:
        assert queries.get_page_tree(conn, cx.actor.workspace_id, page.id).nodes == []


def test_composed_commands_undo_alone_inside_an_outer_transaction(cx: Context) -> None:
    with cx.transaction() as conn:
        bound = cx.on(conn)
        kept = commands.create_page(bound, "Kept")
        with pytest.raises(Conflict):
            commands.create_knowledge_base(bound, "Default")
    with cx.transaction() as conn:
        assert queries.get_page(conn, cx.actor.workspace_id, kept.id).title == "Kept"


def test_page_states_archive_delete_restore(cx: Context) -> None:
    page = commands.create_page(cx, "P")
    assert commands.archive_page(cx, page.id).archived_at is not None
    deleted = commands.delete_page(cx, page.id)
    assert deleted.deleted_at is not None
    with cx.transaction() as conn:
        assert queries.list_pages(conn, cx.actor.workspace_id) == []
    restored = commands.restore_page(cx, page.id)
    assert (restored.archived_at, restored.deleted_at) == (None, None)
    with cx.transaction() as conn:
        assert [p.id for p in queries.list_pages(conn, cx.actor.workspace_id)] == [page.id]


def test_files_share_blobs_by_content(cx: Context) -> None:
    a = commands.upload_file(cx, "a.txt", b"same bytes")
    b = commands.upload_file(cx, "b.txt", b"same bytes")
    assert a.sha256 == b.sha256
    assert a.id != b.id
    assert a.status == "processing"
    assert a.enabled
    with cx.transaction() as conn:
        n = conn.execute("select count(*) as n from kb.blobs").fetchone()
        assert n == {"n": 1}
        assert queries.read_blob(conn, cx.actor.workspace_id, a.sha256) == b"same bytes"
    assert commands.set_file_enabled(cx, a.id, False).enabled is False


def test_duplicate_message_id_is_a_conflict_and_keeps_the_first(cx: Context) -> None:
    first = commands.add_mail(cx, message_id="<same@x>", subject="one", body_text="first body")
    with pytest.raises(Conflict, match="same@x"):
        commands.add_mail(cx, message_id="<same@x>", subject="two", body_text="second")
    with cx.transaction() as conn:
        stored = queries.list_mail(conn, cx.actor.workspace_id)
    assert [(m.id, m.subject) for m in stored] == [(first.id, "one")]
    assert first.snippet == "first body"


@pytest.mark.parametrize(
    ("type_", "good", "bad"),
    [
        ("text", "draft", 5),
        ("number", 4.5, "four"),
        ("date", "2026-01-31", "31/01/2026"),
        ("boolean", True, "yes"),
    ],
)
def test_tag_values_are_checked_against_the_tag_type(
    cx: Context, type_: str, good: object, bad: object
) -> None:
    page = commands.create_page(cx, "P")
    tag = commands.create_tag(cx, f"t-{type_}", type_)
    commands.set_tag(cx, tag.id, "page", page.id, good)
    with pytest.raises(InvalidInput, match=type_):
        commands.set_tag(cx, tag.id, "page", page.id, bad)
    assert commands.remove_tag(cx, tag.id, "page", page.id) is True
    assert commands.remove_tag(cx, tag.id, "page", page.id) is False


def test_a_tag_only_applies_inside_its_knowledge_base(cx: Context) -> None:
    other = commands.create_knowledge_base(cx, "Other")
    page = commands.create_page(cx, "P", kb_id=other.id)
    tag = commands.create_tag(cx, "status", "text")  # in the default knowledge base
    with pytest.raises(InvalidInput, match="another knowledge base"):
        commands.set_tag(cx, tag.id, "page", page.id, "x")


def test_exclude_and_include(cx: Context) -> None:
    page = commands.create_page(cx, "P")
    commands.exclude(cx, "page", page.id)
    commands.exclude(cx, "page", page.id)  # twice is fine
    with cx.transaction() as conn:
        rows = conn.execute("select target_id from kb.exclusions").fetchall()
    assert [r["target_id"] for r in rows] == [page.id]
    commands.include(cx, "page", page.id)
    with cx.transaction() as conn:
        assert conn.execute("select count(*) as n from kb.exclusions").fetchone() == {"n": 0}


def test_unknown_ids_are_not_found(cx: Context) -> None:
    missing = UUID(int=1)
    for call in (
        lambda: commands.rename_page(cx, missing, "x"),
        lambda: commands.edit_node(cx, missing, "x"),
        lambda: commands.delete_file(cx, missing),
        lambda: commands.archive_mail(cx, missing),
        lambda: commands.exclude(cx, "page", missing),
        lambda: commands.create_page(cx, "x", kb_id=missing),
    ):
        with pytest.raises(NotFound):
            call()
