"""The outbox events, declared once: each name, the payload it carries, and the item it
changes for the indexes (a page, a file, a mail), with the rows of that item it changed when
it changed only some.

An event about no item changes nothing an index holds: tags, exclusions and knowledge bases
are read by each search itself. `append_event` refuses a name declared nowhere, so a
misspelt event fails its command instead of silently never being indexed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

_NAME = re.compile(r"[a-z_]+\.[a-z_]+")  # noun.verb: page.created


@dataclass(frozen=True)
class Event:
    """One declared event. `item` names the item kind it changes (search/registry.py's
    ItemSpec.name) and the payload carries its id under `item_key`; `rows`, when set, is
    the payload key that lists the only rows of the item it changed (a bullet's edit
    changes that bullet, not its page's title): an event without it changed the whole item.
    `payload` lists every key it may carry."""

    name: str
    item: str | None
    payload: tuple[str, ...]
    rows: str | None = None

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"expected an event name like 'page.created', got {self.name!r}")
        named = [key for key in (self.item_key, self.rows) if key is not None]
        if missing := [key for key in named if key not in self.payload]:
            raise ValueError(f"event {self.name!r} does not declare {', '.join(missing)}")

    @property
    def item_key(self) -> str | None:
        """The payload key holding the item's id: page_id for an event about a page."""
        return None if self.item is None else f"{self.item}_id"


def _about(item: str, *verbs: str, extra: tuple[str, ...] = ()) -> list[Event]:
    """Events about one item kind, each carrying its id (and `extra`)."""
    return [Event(f"{item}.{verb}", item, (f"{item}_id", *extra)) for verb in verbs]


_TAG = ("tag_id", "target_kind", "target_id")
_EVENTS: dict[str, Event] = {
    event.name: event
    for event in (
        # Pages and their bullets (commands/pages.py, commands/nodes.py, commands/states.py).
        Event("page.created", "page", ("page_id", "nodes")),
        *_about("page", "renamed", "archived", "deleted", "restored"),
        Event("nodes.changed", "page", ("page_id", "node_ids"), rows="node_ids"),
        Event("nodes.moved", "page", ("page_id", "node_ids"), rows="node_ids"),
        Event("nodes.deleted", "page", ("page_id", "deleted_node_ids"), rows="deleted_node_ids"),
        # Files (commands/files.py; extraction: ingest/worker.py).
        *_about("file", "uploaded", "archived", "deleted", "restored", "enabled", "disabled"),
        Event("file.extracted", "file", ("file_id", "ok")),
        # Mail (commands/mail.py).
        *_about("mail", "added", "archived", "deleted", "restored"),
        # About no item an index holds: each search reads these itself.
        Event("knowledge_base.created", None, ("kb_id",)),
        Event("tag.defined", None, ("tag_id",)),
        Event("tag.set", None, _TAG),
        Event("tag.removed", None, _TAG),
        Event("item.excluded", None, ("user_id", "target_kind", "target_id")),
        Event("item.included", None, ("user_id", "target_kind", "target_id")),
    )
}


def declared_event(name: str) -> Event:
    """The declaration of the event called `name`; ValueError for a name declared nowhere."""
    event = _EVENTS.get(name)
    if event is None:
        raise ValueError(
            f"undeclared outbox event {name!r}: declare it in subspace/outbox/events.py"
        )
    return event


def all_events() -> tuple[Event, ...]:
    """Every declared event, in the order declared."""
    return tuple(_EVENTS.values())


@contextmanager
def declared(*events: Event) -> Iterator[None]:
    """Declare `events` for the duration (a test's kind, or a state no command sets yet)."""
    clashing = [event.name for event in events if event.name in _EVENTS]
    if clashing:
        raise ValueError(f"events already declared: {', '.join(clashing)}")
    _EVENTS.update((event.name, event) for event in events)
    try:
        yield
    finally:
        for event in events:
            del _EVENTS[event.name]
