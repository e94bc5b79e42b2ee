"""Refs as search and grep print them, read back by the registry's ref formats (search/registry.py):
`page:<id>`, `node:<id>`, `file:<id>:<n>`, `mail:<id>`, and any registered kind's own."""

from __future__ import annotations

import re
from dataclasses import dataclass
from uuid import UUID

from subspace.search import registry

_UUID = re.compile(
    r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
)
_NUMBER = re.compile(r"\d+")  # a ref's later parts (a chunk's number)


@dataclass(frozen=True)
class Ref:
    """A parsed ref: the kind it names, the target's id and the values of the kind's further
    ref columns that were given (a file chunk's number); `kind` is None for a bare id."""

    kind: registry.KindSpec | None
    id: UUID
    more: tuple[int, ...] = ()

    @property
    def chunk(self) -> int | None:
        return self.more[0] if self.more else None


def kind_named(name: str) -> registry.KindSpec | None:
    """The kind a ref prefix names: a kind's prefix, its name or its row type (`mem:` and
    `memory:` name a memory, which a ref otherwise spells `node:`); None for an unknown one."""
    for spec in registry.registered():  # node comes before memory, which shares its prefix
        if name in (spec.prefix, spec.name, spec.row_type):
            return spec
    return None


def ref_words() -> tuple[str, ...]:
    """The words a ref begins with as the tools print and cite them, in the order registered:
    each kind's prefix and its row type (`mem:` for a memory)."""
    words = (word for spec in registry.registered() for word in (spec.prefix, spec.row_type))
    return tuple(dict.fromkeys(words))


def ref_parts() -> int:
    """How many parts after the id a ref has at most (a file chunk's number: 1)."""
    return max((len(spec.ref) - 1 for spec in registry.registered()), default=0)


def parse_ref(text: str) -> Ref | None:
    """The ref `text` names, or None when it is none: an unknown prefix, more parts than the
    kind's ref format has, or a part of the wrong shape.

    >>> parse_ref("file:6f1c0a4e-2b9d-4c53-9a51-0d6f3c1e8b27:3").chunk
    3
    """
    parts = text.strip().split(":")
    if len(parts) == 1:
        return Ref(None, UUID(parts[0])) if _UUID.fullmatch(parts[0]) else None
    spec = kind_named(parts[0])
    values = parts[1:]
    if spec is None or len(values) > len(spec.ref) or not _UUID.fullmatch(values[0]):
        return None
    if not all(_NUMBER.fullmatch(value) for value in values[1:]):
        return None
    return Ref(spec, UUID(values[0]), tuple(int(value) for value in values[1:]))
