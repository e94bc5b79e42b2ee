"""A request's work, stopped when its client goes away: the palette aborts the search a
keystroke has superseded, and the server should not finish it for no one (cancel.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
from starlette.requests import Request

from subspace.cancel import Cancel

T = TypeVar("T")


async def unless_gone(request: Request, work: Callable[[Cancel], T]) -> T:
    """Run `work` in a worker thread while the client's connection is watched; once it
    closes, the Cancel given to `work` is set and `work` raises CallerGone soon after."""
    cancel = Cancel()

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass  # a body the route has read already: nothing else arrives before the end
        # Not on the event loop: sending Postgres its cancel is a connection of its own.
        threading.Thread(target=cancel.cancel, name="cancel-search", daemon=True).start()

    failed: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        try:
            done = await anyio.to_thread.run_sync(work, cancel)
        except Exception as exc:  # raised below as itself, not in the group's ExceptionGroup
            failed = exc
        finally:
            group.cancel_scope.cancel()
    if failed is not None:
        raise failed
    return done
