"""Cleaning and bounding user text before it reaches the database."""

from __future__ import annotations

import re

from subspace.errors import InvalidInput, TooLarge

# NUL cannot be stored in Postgres text; the other C0 controls (except tab, newline and
# carriage return) are never meaningful in notes and confuse terminals and tokenizers.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def clean_text(value: str) -> str:
    """Return `value` without NUL and control bytes, with lone surrogates replaced by U+FFFD.

    >>> clean_text("a\\x00b\\ud800")
    'ab\\ufffd'
    """
    value = _CONTROL.sub("", value)
    return _SURROGATE.sub("\ufffd", value)


def is_clean(text: object, max_chars: int) -> bool:
    """Whether `text` is a string the driver can take: short, no NUL, no lone surrogate."""
    return (
        isinstance(text, str)
        and len(text) <= max_chars
        and "\x00" not in text
        and not any("\ud800" <= c <= "\udfff" for c in text)
    )


def bounded(value: str, *, what: str, limit: int, setting: str, fix: str) -> str:
    """Clean `value` and raise TooLarge, naming the limit and the fix, when it is too long."""
    value = clean_text(value)
    if len(value) > limit:
        raise TooLarge(
            f"{what} is {len(value):,} characters; the limit is {limit:,} ({setting}). {fix}"
        )
    return value


def single_line(value: str, *, what: str, limit: int, setting: str, required: bool) -> str:
    """Clean a one-line field (title, name, subject): newlines become spaces, ends trimmed."""
    value = " ".join(clean_text(value).split())
    if required and not value:
        raise InvalidInput(f"{what} must not be empty. Give it some text.")
    return bounded(value, what=what, limit=limit, setting=setting, fix="Shorten it.")
