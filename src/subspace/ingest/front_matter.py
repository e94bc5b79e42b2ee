"""A Markdown file's YAML front matter: read safely, its title apart, and its keys sorted into
the tags they fit (a typed value per page) and the rest, kept on the page as YAML. Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import yaml

_BLOCK = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_TITLE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.M)
MAX_FRONT_MATTER_CHARS = 64 * 1024  # metadata, not a document: larger is kept as written
LABEL_KEYS = ("tags", "tag", "keywords")  # lists of labels: each label a tag set to true
MAX_LABELS = 50  # labels taken from one page; more stay in its YAML
MAX_TAG_NAME_CHARS = 100  # as commands/tags.py limits a tag's name
MAX_TEXT_VALUE_CHARS = 1_000  # as tag_values.py limits a text tag's value


@dataclass
class FrontMatter:
    """What front matter said: its title, its other keys as parsed (`properties`), and its
    text as written when it is not YAML Subspace can read (`raw`)."""

    title: str = ""
    properties: dict[str, Any] = field(default_factory=dict)
    raw: str = ""


def split_front_matter(text: str) -> tuple[FrontMatter, str]:
    """The document's front matter and the text after it.

    >>> front, rest = split_front_matter("---\\ntitle: Trip\\ndraft: true\\n---\\n# Day one")
    >>> front.title, front.properties, rest
    ('Trip', {'draft': True}, '# Day one')
    """
    found = _BLOCK.match(text)
    if found is None:
        return FrontMatter(), text
    body, rest = found[1], text[found.end() :]
    parsed: Any = None
    if len(body) <= MAX_FRONT_MATTER_CHARS:
        try:
            parsed = yaml.safe_load(body)
        except yaml.YAMLError:
            parsed = None
    if not isinstance(parsed, dict):
        title = _TITLE.search(body)
        kept = _TITLE.sub("", body).strip("\n")
        return FrontMatter(title[1].strip("'\"") if title else "", raw=kept), rest
    title = parsed.pop("title", "")
    properties = {str(key): value for key, value in parsed.items()}
    return FrontMatter(str(title or "").strip(), properties), rest


@dataclass(frozen=True)
class FrontMatterTag:
    """A tag a page gets from its front matter: its name, type and value."""

    name: str
    type: str  # text, number, date or boolean
    value: Any


def fit_tags(
    properties: dict[str, Any], existing: dict[str, str]
) -> tuple[list[FrontMatterTag], dict[str, Any]]:
    """The tags the properties fit, and the properties that fit none. A scalar is a tag of its
    type (text, number, date, boolean), a list of labels under `tags` (or `tag`, `keywords`) a
    boolean tag per label; a key whose tag exists (`existing`: name → type) with another type,
    a list, or a mapping stays a property.

    >>> tags, rest = fit_tags({"draft": True, "tags": ["travel"], "people": ["Ana"]}, {})
    >>> [(t.name, t.type, t.value) for t in tags], rest
    ([('draft', 'boolean', True), ('travel', 'boolean', True)], {'people': ['Ana']})
    """
    tags: list[FrontMatterTag] = []
    rest: dict[str, Any] = {}
    for key, value in properties.items():
        if key.lower() in LABEL_KEYS:
            labels = _labels(value)
            if labels is not None and all(existing.get(n, "boolean") == "boolean" for n in labels):
                tags.extend(FrontMatterTag(label, "boolean", True) for label in labels)
                continue
            rest[key] = value
            continue
        kind = _scalar_type(value)
        name = " ".join(key.split())
        fits = kind is not None and 0 < len(name) <= MAX_TAG_NAME_CHARS
        if fits and existing.get(name, kind) == kind:
            tags.append(FrontMatterTag(name, str(kind), _scalar(value)))
        else:
            rest[key] = value
    return tags, rest


def _labels(value: Any) -> list[str] | None:
    """Labels as a YAML list or a comma- or space-separated string; None when they are not."""
    if isinstance(value, str):
        value = re.split(r"[,\s]+", value)
    if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
        return None
    labels = [" ".join(str(v).lstrip("#").split()) for v in value]
    labels = list(dict.fromkeys(label for label in labels if label))
    if len(labels) > MAX_LABELS or any(len(label) > MAX_TAG_NAME_CHARS for label in labels):
        return None
    return labels


def _scalar_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number" if math.isfinite(value) else None
    if isinstance(value, date):  # a datetime is a date too: its day is kept
        return "date"
    if isinstance(value, str):
        return "text" if 0 < len(value) <= MAX_TEXT_VALUE_CHARS else None
    return None


def _scalar(value: Any) -> Any:
    return value.date() if isinstance(value, datetime) else value


def front_matter_text(properties: dict[str, Any]) -> str:
    """Properties as the YAML bullet a page keeps them in."""
    dumped = yaml.safe_dump(
        properties, sort_keys=False, allow_unicode=True, default_flow_style=False
    )
    return f"```yaml\n{dumped.rstrip()}\n```"
