"""Run one extraction in a child process with a memory cap and a deadline."""

from __future__ import annotations

import multiprocessing
import resource
from multiprocessing.connection import Connection
from typing import Any

from subspace.ingest.extract import Extracted, ExtractionFailed, ExtractLimits, extract

_MiB = 1024 * 1024


def _context() -> Any:
    # forkserver: children fork from a clean, single-threaded server rather than from the
    # server process with its pool and request threads (forking those can deadlock).
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["subspace.ingest.extract"])
    return ctx


def _child(
    conn: Connection,
    data: bytes,
    name: str,
    content_type: str,
    limits: ExtractLimits,
    memory_bytes: int,
) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    try:
        conn.send(("ok", extract(data, name, content_type, limits)))
    except ExtractionFailed as exc:
        conn.send(("failed", exc.reason))
    except MemoryError:
        conn.send(("failed", _memory_reason(memory_bytes)))
    except RecursionError:
        conn.send(("failed", "the document is nested too deeply to read"))
    except Exception as exc:  # a hostile file can make any library raise anything
        conn.send(("failed", f"the file could not be read ({type(exc).__name__}: {exc})"))


def _memory_reason(memory_bytes: int) -> str:
    return (
        f"extraction needed more than {memory_bytes // _MiB} MB of memory "
        "(SUBSPACE_EXTRACT_MEMORY_MB)"
    )


def extract_isolated(
    data: bytes,
    name: str,
    content_type: str,
    limits: ExtractLimits,
    *,
    timeout_s: float,
    memory_bytes: int,
) -> Extracted:
    """Extract in a child process; raise ExtractionFailed on failure, timeout or OOM."""
    ctx = _context()
    receiver, sender = ctx.Pipe(duplex=False)
    process = ctx.Process(
        target=_child,
        args=(sender, data, name, content_type, limits, memory_bytes),
        daemon=True,
    )
    process.start()
    sender.close()
    try:
        if not receiver.poll(timeout_s):
            process.kill()
            raise ExtractionFailed(
                f"extraction took longer than {timeout_s:g} s (SUBSPACE_EXTRACT_TIMEOUT_S)"
            )
        try:
            status, payload = receiver.recv()
        except EOFError:
            # The child died without answering: killed for memory, or crashed in C code.
            process.join(5)
            raise ExtractionFailed(
                _memory_reason(memory_bytes)
                if process.exitcode in (-9, 137)
                else f"the extractor crashed (exit code {process.exitcode})"
            ) from None
    finally:
        receiver.close()
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()
    if status == "failed":
        raise ExtractionFailed(str(payload))
    assert isinstance(payload, Extracted)
    return payload
