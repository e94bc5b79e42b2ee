"""Request bodies refuse what they do not declare: a misspelt field answers 422 naming it and
the fields that exist, instead of being ignored (`{"q": "x"}` searched for nothing)."""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict


class RequestBody(BaseModel):
    """The base of every JSON request body of the API."""

    model_config = ConfigDict(extra="forbid")


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation holds: `Model`, `Model | None`, `list[Model]` …"""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) in (Union, types.UnionType, list, tuple, set):
        return [m for arg in get_args(annotation) for m in _models_in(arg)]
    return []


def fields_at(model: Any, path: list[str | int]) -> list[str]:
    """The field names of the object at `path` inside a body of `model` (list indexes skipped),
    by their JSON names."""
    models = _models_in(model)
    for step in path:
        if isinstance(step, int):
            continue
        inner: list[type[BaseModel]] = []
        for candidate in models:
            field = candidate.model_fields.get(step) or next(
                (f for f in candidate.model_fields.values() if f.alias == step), None
            )
            if field is not None:
                inner.extend(_models_in(field.annotation))
        models = inner
    names: list[str] = []
    for candidate in models:
        names.extend(f.alias or name for name, f in candidate.model_fields.items())
    return list(dict.fromkeys(names))
