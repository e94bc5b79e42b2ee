"""Refs are read back by the registry's ref formats: every kind's prefix, and nothing else."""

from __future__ import annotations

from uuid import UUID

import pytest

from subspace import commands
from subspace.agents.tools import call_tool
from subspace.context import Context
from subspace.database import Database
from subspace.errors import InvalidInput
from subspace.search import registry
from subspace.search.reading import ref_target
from subspace.search.refs import kind_named

ID = "6f1c0a4e-2b9d-4c53-9a51-0d6f3c1e8b27"


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        (ID, ("page", UUID(ID), None)),
        (f" {ID.replace('-', '')} ", ("page", UUID(ID), None)),
        (f"page:{ID}", ("page", UUID(ID), None)),
        (f"node:{ID}", ("node", UUID(ID), None)),
        (f"mem:{ID}", ("node", UUID(ID), None)),
        (f"memory:{ID}", ("node", UUID(ID), None)),
        (f"file:{ID}", ("file", UUID(ID), None)),
        (f"file:{ID}:3", ("file", UUID(ID), 3)),
        (f"mail:{ID}", ("mail", UUID(ID), None)),
        (f"node:{ID}:3", None),  # only a file's ref has a chunk number
        (f"file:{ID}:3:4", None),
        (f"file:{ID}:x", None),
        (f"FILE:{ID}", None),
        (f"note:{ID}", None),
        (f"page:{ID[:-1]}", None),
        ("page:", None),
        ("", None),
    ],
)
def test_refs_parse_by_the_kinds_ref_formats(
    text: str, parsed: tuple[str, UUID, int | None] | None
) -> None:
    assert ref_target(text) == parsed


def test_a_ref_prefix_names_the_kind_a_hit_counts_as() -> None:
    for spec in registry.registered():
        named = kind_named(spec.prefix)
        assert named is not None
        assert named.target_kind == spec.target_kind
    assert kind_named("mem") == registry.get("memory")


def test_node_read_takes_a_memory_or_bullet_ref_and_refuses_others(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Trip")
    memo = commands.add_node(cx, page.id, "Keep the receipt", props={"memory": True})
    for ref in (f"mem:{memo.id}", f"memory:{memo.id}", f"node:{memo.id}", str(memo.id)):
        shown = call_tool(cx, database.searcher(None), "kb.node.read", {"ref": ref})
        assert shown.splitlines()[1] == f"- Keep the receipt [memory] (node:{memo.id})", ref
    with pytest.raises(InvalidInput, match="not a bullet's ref"):
        call_tool(cx, database.searcher(None), "kb.node.read", {"ref": f"page:{page.id}"})
