"""SQL fragments that carry the parameters they bind, and joining their parameters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Fragment:
    """SQL text and the values of the named parameters (`%(name)s`) it binds.

    The builder that writes a placeholder also gives its value, so no name is made in one
    place and filled in another; a query joins its fragments' text and `bind`s their values.
    """

    sql: str
    params: Mapping[str, Any] = field(default_factory=dict)


def bind(*fragments: Fragment) -> dict[str, Any]:
    """The parameters of all `fragments`; a name two of them bind must have one value."""
    params: dict[str, Any] = {}
    for fragment in fragments:
        for name, value in fragment.params.items():
            if name in params and params[name] != value:
                raise ValueError(f"parameter {name!r} bound to {params[name]!r} and {value!r}")
            params[name] = value
    return params
