"""Bring the embeddings of some pages, files and mail in line with their current text."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

from subspace.db.pool import Conn
from subspace.db.vector_index import register_vector_model
from subspace.indexer import store
from subspace.indexer.chunking import Chunk
from subspace.indexer.desired import IndexTarget, desired_chunks
from subspace.providers.base import EmbeddingProvider, checked_vectors
from subspace.providers.breaker import failure_reason, index_stats_for


@dataclass
class Outcome:
    """What one reconcile did. `busy` targets were being reconciled by someone else."""

    embedded: int = 0  # texts sent to the provider
    reused: int = 0  # texts whose vector was already stored under the same model
    unchanged: int = 0
    deleted: int = 0
    busy: list[IndexTarget] = field(default_factory=list)
    done: list[IndexTarget] = field(default_factory=list)

    def add(self, other: Outcome) -> None:
        self.embedded += other.embedded
        self.reused += other.reused
        self.unchanged += other.unchanged
        self.deleted += other.deleted
        self.busy.extend(other.busy)
        self.done.extend(other.done)


def lock_targets(
    conn: Conn, targets: Sequence[IndexTarget]
) -> tuple[list[IndexTarget], list[IndexTarget]]:
    """Take a transaction lock on each target; return (locked, busy).

    Two indexers never reconcile one item at once, so the one that runs later reads the
    newer text, and a target held elsewhere is left for the next round.
    """
    locked: list[IndexTarget] = []
    busy: list[IndexTarget] = []
    for target in targets:
        row = conn.execute(
            "select pg_try_advisory_xact_lock(hashtextextended(%s, 0)) as ok", (target.lock_key,)
        ).fetchone()
        (locked if row and row["ok"] else busy).append(target)
    return locked, busy


SLICE = 32  # targets whose chunks are read at once: a budget cut wastes at most one slice's reads


def reconcile(
    conn: Conn,
    provider: EmbeddingProvider,
    targets: Sequence[IndexTarget],
    *,
    batch_size: int = 128,
    budget: int | None = None,
    reuse_table: str = "search.embeddings",
) -> Outcome:
    """Embed what changed, reuse vectors of texts already embedded, prune what is gone.

    Targets are served in the order given. With a `budget`, no text is sent to the provider
    once `budget` texts have been: the targets left whole or in part are not in `done`, and
    the next call takes up where this one stopped (what was written is found unchanged), so
    one transaction never holds a big import's whole work.

    Runs inside the caller's transaction; the caller commits. Raises ProviderError when the
    provider fails, leaving the transaction to be rolled back.
    """
    outcome = Outcome()
    # Before this transaction writes a row: a new model's index is built here, and building
    # waits for the other writers' transactions, which must not be waiting for this one.
    register_vector_model(conn, provider.model, provider.dimensions)
    by_workspace: dict[object, list[IndexTarget]] = defaultdict(list)
    for target in targets:
        by_workspace[target.workspace_id].append(target)
    for workspace_targets in by_workspace.values():
        locked, busy = lock_targets(conn, sorted(workspace_targets))
        outcome.busy.extend(busy)
        held = set(locked)
        ordered = [t for t in workspace_targets if t in held]
        for start in range(0, len(ordered), SLICE):
            left = None if budget is None else budget - outcome.embedded
            if left is not None and left <= 0:
                break
            batch = ordered[start : start + SLICE]
            outcome.add(_reconcile_slice(conn, provider, batch, batch_size, left, reuse_table))
    return outcome


def _reconcile_slice(
    conn: Conn,
    provider: EmbeddingProvider,
    targets: list[IndexTarget],
    batch_size: int,
    budget: int | None,
    reuse_table: str,
) -> Outcome:
    ws = targets[0].workspace_id
    model = provider.model
    outcome = Outcome()
    desired = desired_chunks(conn, ws, targets)
    stored = store.stored_embeddings(conn, ws, model, [t.item_id for t in targets])
    wanted_refs = {chunk.ref for chunks in desired.values() for chunk in chunks}
    outcome.deleted = store.delete_refs(
        conn, ws, model, [r for r in stored if r not in wanted_refs]
    )

    changed: list[Chunk] = []
    moved: list[Chunk] = []
    for target in targets:
        for chunk in desired[target.item_id]:
            previous = stored.get(chunk.ref)
            if previous is None or previous[1].text_hash != chunk.text_hash:
                changed.append(chunk)
            elif (previous[1].kind, previous[1].kb_id) != (chunk.kind, chunk.kb_id):
                moved.append(chunk)
            else:
                outcome.unchanged += 1
    store.update_metadata(conn, ws, model, moved)
    outcome.unchanged += len(moved)

    reusable = store.reusable_vectors(
        conn, ws, model, sorted({c.text_hash for c in changed}), reuse_table
    )
    reused = [c for c in changed if c.text_hash in reusable]
    store.upsert_embeddings(conn, ws, model, reused, [reusable[c.text_hash] for c in reused])
    outcome.reused = len(reused)

    # One provider call per distinct text: identical bullets share a vector. The groups keep
    # the targets' order, so a budget cut leaves the later targets waiting.
    fresh: dict[str, list[Chunk]] = defaultdict(list)
    for chunk in changed:
        if chunk.text_hash not in reusable:
            fresh[chunk.text_hash].append(chunk)
    groups = list(fresh.values())
    if budget is not None:
        groups, waiting = groups[:budget], groups[budget:]
        unfinished = {chunk.item_id for group in waiting for chunk in group}
    else:
        unfinished = set()
    outcome.done = [t for t in targets if t.item_id not in unfinished]
    for start in range(0, len(groups), batch_size):
        outcome.embedded += _embed_batch(conn, provider, ws, groups[start : start + batch_size])
    return outcome


def _embed_batch(
    conn: Conn, provider: EmbeddingProvider, ws: UUID, batch: list[list[Chunk]]
) -> int:
    """Embed one text per group and store it for every chunk of the group; return the texts."""
    model = provider.model
    stats, started = index_stats_for(provider), time.perf_counter()
    try:
        raw = provider.embed([group[0].text for group in batch])
    except Exception as exc:
        stats.record(time.perf_counter() - started, failure_reason(exc))
        raise
    stats.record(time.perf_counter() - started)
    vectors = checked_vectors(raw, count=len(batch), model=model, dimensions=provider.dimensions)
    chunks = [chunk for group in batch for chunk in group]
    expanded = [vector for group, vector in zip(batch, vectors, strict=True) for _ in group]
    store.upsert_embeddings(conn, ws, model, chunks, expanded)
    return len(batch)
