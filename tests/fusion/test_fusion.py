"""Reciprocal-rank fusion and its fair tie-break, table-driven (pure, no database)."""

from __future__ import annotations

from uuid import UUID

import pytest

from subspace.search.fusion import Hit, Leg, dedupe, fuse

KB = UUID(int=999)


def hit(name: str, kind: str = "node", ref: str | None = None) -> Hit:
    ident = UUID(int=sum(ord(c) * 31**i for i, c in enumerate(name)) % (2**64))
    return Hit((kind, ident), kind, ref or f"{kind}:{name}", KB, ident, 0.0)


def names(rows: list, limit: int | None = None) -> list[str]:  # type: ignore[type-arg]
    found = [row.best_hit.ref.split(":")[1] for row in rows]
    return found[:limit] if limit else found


def legs(lexical: list[str], vector: list[str], *, lw: float = 1.0, vw: float = 1.0) -> list[Leg]:
    return [
        Leg("lexical", [hit(n) for n in lexical], weight=lw),
        Leg("vector", [hit(n) for n in vector], weight=vw),
    ]


@pytest.mark.parametrize(
    ("lexical", "vector", "limit", "expected"),
    [
        # A total tie at limit 1 returns the lexical exact match.
        (["exact"], ["near"], 1, ["exact"]),
        # A shared rank-1 hit counts against both legs, so at limit 2 the lexical-only row stays.
        (["both", "lex"], ["both", "vec"], 2, ["both", "lex"]),
        # Ties drain round-robin: neither leg is starved.
        (["l1", "l2", "l3"], ["v1", "v2", "v3"], 6, ["l1", "v1", "l2", "v2", "l3", "v3"]),
        # One leg empty: the other's order, untouched.
        ([], ["v1", "v2"], 2, ["v1", "v2"]),
        (["l1", "l2"], [], 2, ["l1", "l2"]),
        # Both empty.
        ([], [], 5, []),
        # The vector leg's top hit is also deep in the lexical list, so it counts for both:
        # entering the rank-2 tie, lexical has served 2 rows and vector 1, and vector's turn
        # comes first even though lexical wins a complete tie.
        (["a1", "a2", *[f"pad{i}" for i in range(47)], "s"], ["s", "b2"], 3, ["s", "a1", "b2"]),
        # Found by both legs beats found by one, whatever the ranks.
        (["a", "b", "c"], ["c", "d", "e"], 1, ["c"]),
    ],
)
def test_fusion_cases(
    lexical: list[str], vector: list[str], limit: int, expected: list[str]
) -> None:
    assert names(fuse(legs(lexical, vector)), limit) == expected


def test_scores_and_terms() -> None:
    rows = fuse(legs(["a", "b"], ["b"]))
    by_name = {row.best_hit.ref: row for row in rows}
    assert by_name["node:b"].score == pytest.approx(1 / 62 + 1 / 61)
    assert [(t.leg, t.rank) for t in by_name["node:b"].terms] == [("lexical", 2), ("vector", 1)]
    assert by_name["node:a"].tie_group == 1
    weighted = fuse(legs(["a", "b"], ["b"], vw=0.5))
    for row in weighted:  # the terms explain the score exactly
        assert sum(t.value for t in row.terms) == row.score
        assert all(t.weight == {"lexical": 1.0, "vector": 0.5}[t.leg] for t in row.terms)


def test_weights_change_the_order() -> None:
    assert names(fuse(legs(["l"], ["v"], vw=2.0)), 1) == ["v"]
    assert names(fuse(legs(["l"], ["v"], lw=0.0)), 1) == ["v"]


def test_tie_reason_is_reported() -> None:
    rows = fuse(legs(["l"], ["v"]))
    assert rows[0].tie_group == 2
    assert rows[0].tie_reason.startswith("lexical leg")
    assert rows[1].tie_reason.startswith("vector leg")


def test_all_chunks_of_a_file_are_one_row() -> None:
    chunks = [hit("f", "file", "file:f:3"), hit("f", "file", "file:f:1"), hit("g", "file")]
    assert [h.ref for h in dedupe(chunks)] == ["file:f:3", "file:g"]
    rows = fuse([Leg("lexical", chunks), Leg("vector", [hit("f", "file", "file:f:1")])])
    assert len(rows) == 2
    assert rows[0].best_hit.ref == "file:f:3"
    assert set(rows[0].hits) == {"lexical", "vector"}


def test_the_same_input_gives_the_same_order() -> None:
    lexical = [f"x{i}" for i in range(30)]
    vector = [f"x{i}" for i in reversed(range(0, 30, 2))] + [f"y{i}" for i in range(10)]
    first = names(fuse(legs(lexical, vector)))
    assert all(names(fuse(legs(lexical, vector))) == first for _ in range(5))
    assert len(first) == len(set(first)) == 40
