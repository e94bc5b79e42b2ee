"""search()'s steps, each on a real database: what explaining a target is told by the other
steps (the pages served before, the legs that ran), and the cursor step on its own."""

from __future__ import annotations

from subspace import commands
from subspace.context import Context
from subspace.runtime import Database
from tests.search_helpers import ids, index, run


def test_explain_names_a_target_an_earlier_page_served(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Paged")
    for text in ("narwhal one", "narwhal two", "narwhal three"):
        commands.add_node(cx, page.id, text)
    index(database, cx)
    first = run(cx, "narwhal", mode="lexical", limit=1)
    assert first.next_cursor is not None
    served = first.rows[0].id
    second = run(
        cx,
        "narwhal",
        mode="lexical",
        limit=1,
        cursor=first.next_cursor,
        explain_target=f"node:{served}",
    )
    assert served not in ids(second)
    assert second.absent == {
        "target": f"node:{served}",
        "shown": False,
        "reasons": ["served on an earlier page"],
    }


def test_explain_names_each_leg_and_a_target_not_embedded_yet(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Legs")
    commands.add_node(cx, page.id, "a beluga surfaced")
    commands.add_node(cx, page.id, "beluga pod")
    index(database, cx)
    late = commands.add_node(cx, page.id, "the beluga sang")  # written after the indexer ran
    response = run(cx, "beluga", limit=1, explain_target=f"node:{late.id}")
    assert response.absent is not None and not response.absent["shown"]
    reasons = response.absent["reasons"]
    assert any(r.startswith("lexical leg: rank") for r in reasons)
    assert "vector leg: not embedded yet (the indexer has not reached it)" in reasons
    assert any(r.startswith("cut by the limit: fused position") for r in reasons)
