"""Bringing a page's bullets up to date with a new outline of its file, keeping the ids (and so
the embeddings, tags and links) of the bullets that did not change. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from difflib import SequenceMatcher
from uuid import UUID, uuid4

from subspace.ingest.outline import OutlineItem


@dataclass(frozen=True)
class Bullet:
    """One bullet where it sits: a page's stored bullet, or one the plan places."""

    id: UUID
    parent_id: UUID | None
    position: int
    text: str


@dataclass
class BulletPlan:
    """What to write: bullets to insert (parents before children), bullets to keep with their
    new place or text (`moved` or `edited` when either changed), and ids to delete."""

    added: list[Bullet] = field(default_factory=list)
    kept: list[Bullet] = field(default_factory=list)
    edited: list[UUID] = field(default_factory=list)
    moved: list[UUID] = field(default_factory=list)
    deleted: list[UUID] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.edited or self.moved or self.deleted)


def plan_bullets(stored: list[Bullet], items: list[OutlineItem]) -> BulletPlan:
    """The writes that turn the `stored` bullets into the outline `items`.

    Both trees are read in document order and matched as two sequences of texts (difflib's
    longest matching blocks): a bullet whose text is found in the same order keeps its id; in a
    run of bullets replaced by another run, the first ones pair up and keep their ids with new
    text (an edited paragraph stays the same bullet); the rest are added or deleted.

    >>> a, b = uuid4(), uuid4()
    >>> stored = [Bullet(a, None, 0, "one"), Bullet(b, None, 1, "two")]
    >>> plan = plan_bullets(stored, [OutlineItem("one"), OutlineItem("three")])
    >>> [x.id for x in plan.kept] == [a, b], plan.edited == [b], plan.added, plan.deleted
    (True, True, [], [])
    """
    old = _in_order(stored)
    new: list[tuple[OutlineItem, int | None]] = []  # each item and its parent's index in `new`

    def walk(children: list[OutlineItem], parent: int | None) -> None:
        for item in children:
            new.append((item, parent))
            walk(item.children, len(new) - 1)

    walk(items, None)
    matcher = SequenceMatcher(
        None, [b.text for b in old], [item.text for item, _ in new], autojunk=False
    )
    ids: list[UUID | None] = [None] * len(new)
    matched: set[UUID] = set()
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("equal", "replace"):
            for offset in range(min(i2 - i1, j2 - j1)):
                ids[j1 + offset] = old[i1 + offset].id
                matched.add(old[i1 + offset].id)
    by_id = {b.id: b for b in old}
    plan = BulletPlan(deleted=[b.id for b in old if b.id not in matched])
    final = [found or uuid4() for found in ids]
    positions: dict[int | None, int] = {}
    for index, (item, parent) in enumerate(new):
        position = positions.get(parent, 0)
        positions[parent] = position + 1
        placed = Bullet(
            final[index], None if parent is None else final[parent], position, item.text
        )
        before = by_id.get(placed.id)
        if before is None:
            plan.added.append(placed)
            continue
        plan.kept.append(placed)
        if before.text != placed.text:
            plan.edited.append(placed.id)
        if (before.parent_id, before.position) != (placed.parent_id, placed.position):
            plan.moved.append(placed.id)
    return plan


def _in_order(bullets: list[Bullet]) -> list[Bullet]:
    """The bullets in document order: each before its children, siblings by position."""
    children: dict[UUID | None, list[Bullet]] = {}
    for bullet in bullets:
        children.setdefault(bullet.parent_id, []).append(bullet)
    ordered: list[Bullet] = []
    stack = sorted(children.get(None, []), key=lambda b: b.position, reverse=True)
    while stack:
        bullet = stack.pop()
        ordered.append(bullet)
        stack.extend(sorted(children.get(bullet.id, []), key=lambda b: b.position, reverse=True))
    return ordered
