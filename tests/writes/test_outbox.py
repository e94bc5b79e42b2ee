"""The outbox: events are declared once, an undeclared one cannot be appended, and each row
names the item (and rows) its declaration says it changes."""

from __future__ import annotations

from uuid import uuid4

import pytest

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.outbox.append import append_event
from subspace.outbox.events import Event, all_events, declared, declared_event
from subspace.outbox.reading import current_snapshot, items_after
from subspace.search import registry


def test_an_undeclared_event_cannot_be_appended_and_its_transaction_writes_nothing(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Spelt right")
    with database.pool.connection() as conn:
        before = conn.execute("select count(*) as n from kb.outbox").fetchone()
        with pytest.raises(ValueError, match=r"undeclared outbox event 'page\.renammed'"):
            append_event(conn, cx.actor.workspace_id, "page.renammed", page_id=page.id)
        conn.rollback()
        after = conn.execute("select count(*) as n from kb.outbox").fetchone()
    assert before == after


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"page_id": uuid4(), "colour": "red"}, "carries no colour"),
        ({"node_ids": []}, "must carry page_id"),
    ],
)
def test_a_declared_event_refuses_a_payload_it_does_not_declare(
    database: Database, cx: Context, payload: dict[str, object], message: str
) -> None:
    with database.pool.connection() as conn, pytest.raises(ValueError, match=message):
        append_event(conn, cx.actor.workspace_id, "nodes.changed", **payload)


def test_every_declared_item_is_a_kind_of_the_registry() -> None:
    items = {item.name for item in registry.items()}
    assert {event.item for event in all_events() if event.item is not None} == items
    assert declared_event("nodes.deleted").rows == "deleted_node_ids"
    with pytest.raises(ValueError, match="does not declare node_ids"):
        Event("nodes.bad", "page", ("page_id",), rows="node_ids")
    with (
        pytest.raises(ValueError, match="already declared"),
        declared(Event("page.created", "page", ("page_id",))),
    ):
        pass


def test_each_row_names_its_item_and_the_reader_gathers_them_per_item(
    database: Database, cx: Context
) -> None:
    def position() -> str:
        with database.pool.connection() as conn:
            return current_snapshot(conn)

    def changed_after(at: str) -> list[tuple[str, object, int, object]]:
        with database.pool.connection() as conn:
            return [(c.kind, c.item_id, c.events, c.rows) for c in items_after(conn, at)]

    start = position()
    page = commands.create_page(cx, "Tides")
    created = position()
    first = commands.add_node(cx, page.id, "spring tide")
    second = commands.add_node(cx, page.id, "neap tide")
    commands.create_tag(cx, "topic", "text")  # about no item: no reader sees it
    with database.pool.connection() as conn:
        rows = conn.execute(
            "select event, item_kind, item_id, item_rows from kb.outbox "
            "where workspace_id = %s order by id",
            (cx.actor.workspace_id,),
        ).fetchall()
    assert [(r["event"], r["item_kind"], r["item_id"], r["item_rows"]) for r in rows[-4:]] == [
        ("page.created", "page", page.id, None),
        ("nodes.changed", "page", page.id, [first.id]),
        ("nodes.changed", "page", page.id, [second.id]),
        ("tag.defined", None, None, None),
    ]
    # From the start the page changed whole (its creation); after it, two of its bullets.
    assert changed_after(start) == [("page", page.id, 3, None)]
    assert changed_after(created) == [("page", page.id, 2, frozenset({first.id, second.id}))]
    assert changed_after(position()) == []
