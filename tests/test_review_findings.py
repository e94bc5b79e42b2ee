"""What a new user ran into following the README against a running server, kept fixed."""

from __future__ import annotations

import pytest

from subspace import commands
from subspace.context import Context
from subspace.runtime import Database
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
    response = run(cx, "ferry", mode="lexical", kinds=kinds)
    assert response.degraded == []
    assert response.legs["lexical"].ran
    assert [row.type for row in response.rows] == found
