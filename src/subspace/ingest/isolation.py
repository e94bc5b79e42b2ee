"""Run extractions in a child process with a memory cap and a deadline per document."""

from __future__ import annotations

import contextlib
import multiprocessing
import resource
from multiprocessing.connection import Connection
from typing import Any

from subspace.ingest.extract import Extracted, ExtractionFailed, ExtractLimits, extract

_MiB = 1024 * 1024
JOBS_PER_CHILD = 500  # a fresh child now and then returns whatever memory the last ones kept


def _context() -> Any:
    # forkserver: children fork from a clean, single-threaded server rather than from the
    # server process with its pool and request threads (forking those can deadlock).
    ctx = multiprocessing.get_context("forkserver")
    # Preloading the parsers once makes each child start warm (about 50 ms saved per child).
    ctx.set_forkserver_preload(
        ["subspace.ingest.extract", "pypdf", "docx", "selectolax.lexbor", "charset_normalizer"]
    )
    return ctx


def _memory_reason(memory_bytes: int) -> str:
    return (
        f"extraction needed more than {memory_bytes // _MiB} MB of memory "
        "(SUBSPACE_EXTRACT_MEMORY_MB)"
    )


def _serve(conn: Connection, memory_bytes: int) -> None:
    """The child: extract the documents it is sent until told to stop or it runs out."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    while True:
        try:
            job = conn.recv()
        except MemoryError:  # the document alone did not fit
            conn.send(("failed", _memory_reason(memory_bytes)))
            return
        except EOFError:  # the parent let this child go (recycled, or the parent exited)
            return
        if job is None:
            return
        data, name, content_type, limits = job
        try:
            conn.send(("ok", extract(data, name, content_type, limits)))
        except ExtractionFailed as exc:
            conn.send(("failed", exc.reason))
        except MemoryError:
            # The heap may be left fragmented: answer, then make way for a fresh child.
            conn.send(("failed", _memory_reason(memory_bytes)))
            return
        except RecursionError:
            conn.send(("failed", "the document is nested too deeply to read"))
        except Exception as exc:  # a hostile file can make any library raise anything
            conn.send(("failed", f"the file could not be read ({type(exc).__name__}: {exc})"))


class IsolatedExtractor:
    """Extracts documents one at a time in a child process capped at `memory_bytes`.

    The child is reused across documents and replaced whenever it times out, dies or runs
    out of memory. Not thread-safe: give each worker thread its own.
    """

    def __init__(self, memory_bytes: int) -> None:
        self.memory_bytes = memory_bytes
        self._process: Any = None
        self._conn: Connection | None = None
        self._jobs = 0

    def _start(self) -> None:
        ctx = _context()
        parent, child = ctx.Pipe(duplex=True)
        self._process = ctx.Process(target=_serve, args=(child, self.memory_bytes), daemon=True)
        self._process.start()
        child.close()
        self._conn = parent
        self._jobs = 0

    def _discard(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join()
            self._process = None

    def close(self) -> None:
        """Stop the child. Safe to call twice."""
        if self._conn is not None and self._process is not None and self._process.is_alive():
            try:
                self._conn.send(None)
                self._process.join(2)
            except OSError:
                pass
        self._discard()

    def extract(
        self, data: bytes, name: str, content_type: str, limits: ExtractLimits, timeout_s: float
    ) -> Extracted:
        """The document's text; ExtractionFailed on a bad document, a timeout or OOM."""
        if self._conn is None or self._jobs >= JOBS_PER_CHILD or not self._process.is_alive():
            self._discard()
            self._start()
        conn = self._conn
        assert conn is not None
        self._jobs += 1
        # A child that ran out of memory stops reading; its answer below says so.
        with contextlib.suppress(OSError):
            conn.send((data, name, content_type, limits))
        try:
            if not conn.poll(timeout_s):
                self._discard()
                raise ExtractionFailed(
                    f"extraction took longer than {timeout_s:g} s (SUBSPACE_EXTRACT_TIMEOUT_S)"
                )
            status, payload = conn.recv()
        except (EOFError, OSError):
            # The child died without answering: killed for memory, or crashed in C code.
            self._process.join(5)
            code = self._process.exitcode
            self._discard()
            raise ExtractionFailed(
                _memory_reason(self.memory_bytes)
                if code in (-9, 137)
                else f"the extractor crashed (exit code {code})"
            ) from None
        if status == "failed":
            if not self._process.is_alive() or payload == _memory_reason(self.memory_bytes):
                self._discard()
            raise ExtractionFailed(str(payload))
        assert isinstance(payload, Extracted)
        return payload


def extract_isolated(
    data: bytes,
    name: str,
    content_type: str,
    limits: ExtractLimits,
    *,
    timeout_s: float,
    memory_bytes: int,
) -> Extracted:
    """Extract one document in a child process of its own."""
    extractor = IsolatedExtractor(memory_bytes)
    try:
        return extractor.extract(data, name, content_type, limits, timeout_s)
    finally:
        extractor.close()
