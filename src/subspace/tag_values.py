"""A tag's value checked against its type: what setting a tag stores and what a search's tag
filter compares with, declared once for both (a module of its own, so search reads it without
importing the commands)."""

from __future__ import annotations

import math
from datetime import date
from typing import Any

from subspace.errors import InvalidInput
from subspace.models import TagDefinition
from subspace.text import clean_text

MAX_TAG_TEXT_CHARS = 1_000  # a tag value is a label, not a document


def coerce_tag_value(tag: TagDefinition, value: Any) -> tuple[str, Any]:
    """The value column and value for `tag`, or InvalidInput naming the expected type."""
    expected = f"Tag {tag.name!r} is of type {tag.type}"
    if tag.type == "text":
        if not isinstance(value, str):
            raise InvalidInput(f"{expected}; give a string.")
        text = clean_text(value)
        if len(text) > MAX_TAG_TEXT_CHARS:
            raise InvalidInput(f"{expected}; its value is limited to {MAX_TAG_TEXT_CHARS} chars.")
        return "value_text", text
    if tag.type == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidInput(f"{expected}; give a number.")
        if not math.isfinite(value):
            raise InvalidInput(f"{expected}; give a finite number.")
        return "value_number", float(value)
    if tag.type == "date":
        if isinstance(value, date):
            return "value_date", value
        try:
            return "value_date", date.fromisoformat(str(value))
        except ValueError:
            raise InvalidInput(f"{expected}; give a date as YYYY-MM-DD.") from None
    if not isinstance(value, bool):
        raise InvalidInput(f"{expected}; give true or false.")
    return "value_bool", value
