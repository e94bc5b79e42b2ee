"""The bullet tree: positions stay dense and ordered through every edit."""

from __future__ import annotations

from uuid import UUID

import pytest

from subspace import commands
from subspace.context import Context
from subspace.db import queries
from subspace.errors import Conflict, InvalidInput
from subspace.models import PageSummary, TreeNode


def outline(cx: Context, page_id: UUID) -> list[object]:
    """The page as nested [text, [children]] lists, checking positions are 0..n-1."""
    with cx.transaction() as conn:
        page = queries.get_page_tree(conn, cx.actor.workspace_id, page_id)

    def walk(nodes: list[TreeNode]) -> list[object]:
        assert [n.position for n in nodes] == list(range(len(nodes)))
        return [[n.text, walk(n.children)] if n.children else n.text for n in nodes]

    return walk(page.nodes)


@pytest.fixture
def page(cx: Context) -> PageSummary:
    return commands.create_page(cx, "Tree")


def test_add_appends_or_inserts_at_a_position(cx: Context, page: PageSummary) -> None:
    a = commands.add_node(cx, page.id, "a")
    commands.add_node(cx, page.id, "c")
    commands.add_node(cx, page.id, "b", position=1)
    commands.add_node(cx, page.id, "a1", parent_id=a.id)
    commands.add_node(cx, page.id, "z", position=99)
    assert outline(cx, page.id) == [["a", ["a1"]], "b", "c", "z"]


def test_move_within_and_across_parents(cx: Context, page: PageSummary) -> None:
    a = commands.add_node(cx, page.id, "a")
    b = commands.add_node(cx, page.id, "b")
    c = commands.add_node(cx, page.id, "c")
    commands.move_node(cx, c.id, parent_id=None, position=0)
    assert outline(cx, page.id) == ["c", "a", "b"]
    commands.move_node(cx, c.id, parent_id=None, position=None)
    assert outline(cx, page.id) == ["a", "b", "c"]
    commands.move_node(cx, a.id, parent_id=b.id)
    assert outline(cx, page.id) == [["b", ["a"]], "c"]
    commands.move_node(cx, c.id, parent_id=b.id, position=0)
    assert outline(cx, page.id) == [["b", ["c", "a"]]]


def test_indent_and_outdent(cx: Context, page: PageSummary) -> None:
    a = commands.add_node(cx, page.id, "a")
    b = commands.add_node(cx, page.id, "b")
    commands.add_node(cx, page.id, "c")
    with pytest.raises(InvalidInput, match="first bullet"):
        commands.indent_node(cx, a.id)
    with pytest.raises(InvalidInput, match="top-level"):
        commands.outdent_node(cx, a.id)
    commands.indent_node(cx, b.id)
    assert outline(cx, page.id) == [["a", ["b"]], "c"]
    commands.outdent_node(cx, b.id)
    assert outline(cx, page.id) == ["a", "b", "c"]


def test_a_node_cannot_move_under_its_own_descendant(cx: Context, page: PageSummary) -> None:
    a = commands.add_node(cx, page.id, "a")
    b = commands.add_node(cx, page.id, "b", parent_id=a.id)
    c = commands.add_node(cx, page.id, "c", parent_id=b.id)
    for target in (a.id, b.id, c.id):
        with pytest.raises(Conflict, match="descendants"):
            commands.move_node(cx, a.id, parent_id=target)
    assert outline(cx, page.id) == [["a", [["b", ["c"]]]]]


def test_a_parent_on_another_page_is_refused(cx: Context, page: PageSummary) -> None:
    other = commands.create_page(cx, "Other")
    foreign = commands.add_node(cx, other.id, "elsewhere")
    with pytest.raises(InvalidInput, match="another page"):
        commands.add_node(cx, page.id, "x", parent_id=foreign.id)
    mine = commands.add_node(cx, page.id, "mine")
    with pytest.raises(InvalidInput, match="another page"):
        commands.move_node(cx, mine.id, parent_id=foreign.id)


def test_delete_removes_the_subtree_and_closes_the_gap(cx: Context, page: PageSummary) -> None:
    a = commands.add_node(cx, page.id, "a")
    b = commands.add_node(cx, page.id, "b", parent_id=a.id)
    commands.add_node(cx, page.id, "c", parent_id=b.id)
    commands.add_node(cx, page.id, "d")
    deleted = commands.delete_node(cx, a.id)
    assert len(deleted) == 3
    assert a.id in deleted
    assert b.id in deleted
    assert outline(cx, page.id) == ["d"]


def test_props_merge_and_memory_flag(cx: Context, page: PageSummary) -> None:
    node = commands.add_node(cx, page.id, "remember this", props={"color": "red"})
    node = commands.set_memory(cx, node.id, True)
    assert node.is_memory
    assert node.props == {"color": "red", "memory": True}
    node = commands.set_memory(cx, node.id, False)
    assert not node.is_memory
    assert node.props == {"color": "red"}
    node = commands.set_props(cx, node.id, {"a": 1}, replace=True)
    assert node.props == {"a": 1}
