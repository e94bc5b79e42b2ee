"""The running server, as the command line on the same machine finds and asks it: `subspace
serve` writes its address and a key of its own into the home's `server.json`, readable by its
owner only (as the home's database files are), and a search from the command line asks that
server instead of loading the search, a model and the database itself for one query. Only the
standard library's HTTP client is used: importing an HTTP library would cost the command line
the start it saves."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subspace.errors import InvalidInput

if TYPE_CHECKING:
    from subspace.config import Settings
    from subspace.database import Database

SERVER_FILE = "server.json"
KEY_NAME = "command line on this machine"  # the key's name in `subspace keys list`
SERVER_TIMEOUT_S = 60  # a search that takes longer has failed on the server's own timeouts


def server_file(settings: Settings) -> Path:
    return settings.home / SERVER_FILE


def local_url(settings: Settings) -> str:
    """Where a process on this machine reaches the server (a wildcard address by loopback)."""
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{settings.port}"


def announce(db: Database, settings: Settings) -> None:
    """Write server.json for this process: its address, its pid and a key for the command
    line, the one written before while it is still valid (a new one once it is revoked)."""
    from subspace.errors import Unauthorized
    from subspace.keys import authenticate, create_key

    path = server_file(settings)
    key = _read(path).get("key")
    cx = db.default_context(settings)
    with cx.transaction() as conn:
        if isinstance(key, str):
            try:
                if authenticate(conn, key) != cx.actor:
                    key = None
            except Unauthorized:
                key = None
        if not isinstance(key, str):
            _, key = create_key(conn, cx.actor, KEY_NAME)
    _write(path, {"url": local_url(settings), "pid": os.getpid(), "key": key})


def withdraw(settings: Settings) -> None:
    """The server has stopped: forget its address, keep its key for the next start. Safe to
    call twice, and a no-op for a file another server wrote since."""
    path = server_file(settings)
    held = _read(path)
    if held.get("pid") == os.getpid() and isinstance(held.get("key"), str):
        _write(path, {"key": held["key"]})


def running_server(settings: Settings) -> tuple[str, str] | None:
    """The address and key of the server serving this home, or None when none is running (no
    file, a file from a server that stopped, or one whose process is gone after a kill)."""
    held = _read(server_file(settings))
    url, pid, key = held.get("url"), held.get("pid"), held.get("key")
    if not (isinstance(url, str) and isinstance(pid, int) and isinstance(key, str)):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, and another user's: its address may still answer
        pass
    return url, key


def search_by_server(
    url: str, key: str, body: dict[str, Any], kb_names: tuple[str, ...] = ()
) -> dict[str, Any] | None:
    """The server's answer to the search `body` (a SearchRequest's JSON), the bases named by
    `kb_names`; None when it cannot give one (it has stopped, or no longer takes its key), for
    the caller to search itself. A refusal of the search itself (a limit, an unknown base) is
    raised as InvalidInput with the server's message."""
    from subspace.text import clean_text

    try:
        if kb_names:
            bases = {kb["name"]: kb["id"] for kb in _ask(url, key, "/api/knowledge-bases")}
            wanted = [" ".join(clean_text(name).split()) for name in kb_names]
            missing = [name for name, clean in zip(kb_names, wanted, strict=True)
                       if clean not in bases]  # fmt: skip
            if missing:
                raise InvalidInput(no_base_named(missing[0]))
            body = {**body, "kb_ids": [bases[clean] for clean in wanted]}
        answer = _ask(url, key, "/api/search", body)
    except _ServerGone:
        return None
    return answer if isinstance(answer, dict) else None


def no_base_named(name: str) -> str:
    return f"No knowledge base named {name!r}. See `subspace kb list` for their names."


class _ServerGone(Exception):
    """The server did not answer as a Subspace server does."""


def _ask(url: str, key: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """The JSON the server answers to GET `path` (POST with a `body`); an error it explains is
    InvalidInput, anything else _ServerGone."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        url + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"authorization": f"Bearer {key}", "content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=SERVER_TIMEOUT_S) as reply:
            return json.load(reply)
    except urllib.error.HTTPError as exc:
        try:
            message = str(json.load(exc)["error"]["message"])
        except (ValueError, KeyError, TypeError):
            raise _ServerGone from None
        if exc.code in (401, 403) or exc.code >= 500:  # its key revoked, or a server in trouble
            raise _ServerGone from None
        raise InvalidInput(message) from None
    except (OSError, ValueError):  # refused, reset, timed out, or not JSON
        raise _ServerGone from None


def _read(path: Path) -> dict[str, Any]:
    try:
        held = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent, unreadable or damaged: as if there were none
        return {}
    return held if isinstance(held, dict) else {}


def _write(path: Path, held: dict[str, Any]) -> None:
    """Replace the file whole (a reader never sees half of it), owner-only from its creation."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        json.dump(held, file)
    os.replace(temporary, path)
