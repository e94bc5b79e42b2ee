"""The exception tree: each class says what went wrong, with a stable code and a message for
the user. Nothing here knows HTTP: a surface chooses how to answer each (api/errors.py maps
them to statuses, the command line to exit messages, MCP to tool errors)."""

from __future__ import annotations

import difflib


class SubspaceError(Exception):
    """Base of every error Subspace raises on purpose. The message is shown to the user."""

    code = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(SubspaceError):
    """A setting is missing or malformed."""

    code = "config"


class DatabaseError(SubspaceError):
    """The database cannot be reached or lacks what Subspace needs."""

    code = "database_unavailable"


class InvalidInput(SubspaceError):
    """The request is well-formed but its values are not acceptable."""

    code = "invalid_input"


class BadRequest(InvalidInput):
    """The body does not fit the schema of an API that answers such bodies with 400 (the
    Sim-compatible knowledge search)."""

    code = "bad_request"


class InvalidCursor(SubspaceError):
    """A paging cursor that this server did not issue, was altered, or is malformed."""

    code = "invalid_cursor"


class Busy(SubspaceError):
    """No database connection came free in time; the client should retry shortly."""

    code = "busy"
    retry_after_s = 1


class CallerGone(SubspaceError):
    """The caller went away before the answer was ready, and its work was stopped."""

    code = "cancelled"


class TooMany(SubspaceError):
    """The caller (a user or a workspace) holds as many of something as it may at once: event
    streams, searches in flight, parsers. Others are not held up by it; it may retry soon."""

    code = "too_many_requests"

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class TooLarge(SubspaceError):
    """An input is over one of the configured limits."""

    code = "too_large"


class Unauthorized(SubspaceError):
    """No API key, or one that is unknown or revoked."""

    code = "unauthorized"


class Forbidden(SubspaceError):
    """The key is valid but may not do this (an ordinary key on an operator's route)."""

    code = "forbidden"


class NotFound(SubspaceError):
    """The id names nothing in the caller's workspace."""

    code = "not_found"

    def __init__(
        self,
        kind: str,
        ident: object,
        *,
        scope: str = "in this workspace",
        message: str | None = None,
    ) -> None:
        super().__init__(message or f"No {kind} with id {ident} {scope}.")


class Conflict(SubspaceError):
    """The write would break a uniqueness or tree invariant."""

    code = "conflict"


class StalePage(Conflict):
    """A write named a page version (`base_version`) that another write has since replaced."""

    code = "stale_page"


MAX_SHOWN_NAME = 60  # of a name a message repeats back: a 100 KB one is cut


def closest(name: str, known: list[str]) -> str | None:
    """The known name `name` most likely meant: the nearest spelling, else one that starts the
    other; None when nothing is close."""
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    if near:
        return near[0]
    return next((k for k in known if k.startswith(name) or name.startswith(k)), None)


def unknown_field_message(name: str, known: list[str]) -> str:
    """`Unknown field 'q'. Did you mean 'query'? The fields are: query, mode, …`"""
    shown = name if len(name) <= MAX_SHOWN_NAME else name[:MAX_SHOWN_NAME] + "…"
    message = f"Unknown field '{shown}'."
    meant = closest(name, known)
    if meant:
        message += f" Did you mean '{meant}'?"
    if known:
        message += f" The fields are: {', '.join(known)}."
    return message
