"""Answers are derived content: the bullets an answer run asked with or wrote ("/rag …" and
its answers) restate their sources, so a search that shows them beside sources (answers:
include, the default) ranks each below any source with the same evidence, and never above
an item it cites that the search found too.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from subspace.db.pipeline import Later, prepared
from subspace.db.pool import Conn
from subspace.search import registry
from subspace.search.fusion import Fused, TargetKey
from subspace.search.refs import parse_ref

# An answer's fused score counts this much: it needs twice a source's evidence to pass it.
ANSWER_DISCOUNT = 0.5


def queue_has_answers(conn: Conn, workspace_id: UUID) -> Later[bool]:
    """Whether the workspace was ever asked a question (runs are kept): without one there is
    no answer to rank below its sources, and the search skips the lookup's round trip."""
    return prepared(
        conn,
        "select exists (select 1 from kb.runs where workspace_id = %s) as asked",
        (workspace_id,),
        lambda rows: bool(rows[0]["asked"]),
    )


def answer_citations(
    conn: Conn, workspace_id: UUID, candidates: list[Fused]
) -> dict[TargetKey, set[TargetKey]]:
    """The candidates an answer run asked with or wrote, each with the targets it cites."""
    found: dict[TargetKey, set[TargetKey]] = {}
    for spec in registry.registered():
        if spec.asked_by_run is None or spec.name != spec.target_kind:
            continue  # a memory's targets are nodes: read once, with the node kind
        ids = [item.target[1] for item in candidates if item.target[0] == spec.target_kind]
        if not ids:
            continue
        a = spec.alias
        rows = conn.execute(
            f"select {a}.{spec.key} as id, {a}.props->'refs' as refs from {spec.table} {a} "
            f"where {a}.workspace_id = %s and {a}.{spec.key} = any(%s) "
            f"and coalesce({spec.asked_by_run(a)}, false)",
            (workspace_id, ids),
        ).fetchall()
        for row in rows:
            found[(spec.target_kind, row["id"])] = _cited(row["refs"])
    return found


def _cited(refs: Any) -> set[TargetKey]:
    """The targets an answer's refs name (a file's chunk counts as its file)."""
    targets = set()
    for text in refs if isinstance(refs, list) else []:
        ref = parse_ref(text) if isinstance(text, str) else None
        if ref is not None and ref.kind is not None:
            targets.add((ref.kind.target_kind, ref.id))
    return targets


def below_sources(candidates: list[Fused], answers: dict[TargetKey, set[TargetKey]]) -> list[Fused]:
    """The candidates with each answer's score discounted, in the new order, and each answer
    held back until every candidate it cites has been placed."""
    if not answers:
        return candidates
    for item in candidates:
        if item.target in answers:
            item.score *= ANSWER_DISCOUNT
            item.answer = True
    # A stable sort: sources before answers of the same score, the fused order otherwise.
    ordered = sorted(candidates, key=lambda item: (-item.score, item.answer))
    present = {item.target for item in ordered}
    placed: set[TargetKey] = set()
    waiting: list[Fused] = []
    result: list[Fused] = []

    def ready(item: Fused) -> bool:
        return ((answers[item.target] & present) - {item.target}) <= placed

    for item in ordered:
        if item.answer and not ready(item):
            waiting.append(item)
            continue
        result.append(item)
        placed.add(item.target)
        while released := [w for w in waiting if ready(w)]:
            for answer in released:
                waiting.remove(answer)
                result.append(answer)
                placed.add(answer.target)
    result.extend(waiting)  # answers citing each other in a circle: last, in order
    return result
