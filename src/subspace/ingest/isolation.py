"""Run extractions and other parses of untrusted bytes in a child process with a memory cap
and a deadline per document."""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import resource
import signal
import sys
import threading
from collections.abc import Callable, Hashable, Iterator
from multiprocessing.connection import Connection
from typing import Any, TypeVar, cast

from subspace.ingest.extract import Extracted, ExtractLimits, extract
from subspace.ingest.failures import ExtractionFailed
from subspace.priority import own_session, yield_cores
from subspace.shares import Shares

T = TypeVar("T")

_MiB = 1024 * 1024
JOBS_PER_CHILD = 500  # a fresh child now and then returns whatever memory the last ones kept
PARSER_NICENESS = 10  # how much less of the cores a parser child claims than a web process
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
EXTRACTION = "extraction"  # the task named in reasons, unless a caller names another
# A child's exit code when it ran out of memory and could not even allocate the answer that
# says so; the parent reads it as the kernel's kill for memory.
OUT_OF_MEMORY_EXIT = 75


def _context() -> Any:
    # forkserver: children fork from a clean, single-threaded server rather than from the
    # server process with its pool and request threads (forking those can deadlock).
    ctx = multiprocessing.get_context("forkserver")
    # Preloading the parsers once makes each child start warm (about 50 ms saved per child).
    ctx.set_forkserver_preload(
        [
            "subspace.ingest.extract",
            "subspace.ingest.mail",
            "subspace.ingest.markdown",
            "pypdf",
            "docx",
            "selectolax.lexbor",
            "charset_normalizer",
        ]
    )
    return ctx


def _memory_reason(task: str, memory_bytes: int) -> str:
    return (
        f"{task} needed more than {memory_bytes // _MiB} MB of memory (SUBSPACE_EXTRACT_MEMORY_MB)"
    )


def _answer_out_of_memory(conn: Connection, task: str, memory_bytes: int) -> None:
    """Tell the parent the document did not fit; exit with OUT_OF_MEMORY_EXIT when even the
    answer cannot be allocated."""
    try:
        conn.send(("failed", _memory_reason(task, memory_bytes)))
    except MemoryError:
        os._exit(OUT_OF_MEMORY_EXIT)


def _die_with_parent(lifeline: Connection) -> None:
    """Make this child exit when the process that asked for it dies, even mid-document.

    The child's parent is the forkserver, which outlives the server while any child holds
    its pipe open; so the server's end of `lifeline` is watched as well: the kernel closes
    it when the server dies, however it dies.
    """
    if sys.platform == "linux":
        # Killed by the kernel if the forkserver dies; no Python code has to run for it.
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    def watch() -> None:
        with contextlib.suppress(EOFError, OSError):
            while True:
                lifeline.recv_bytes()
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="lifeline", daemon=True).start()


def _serve(conn: Connection, lifeline: Connection, memory_bytes: int) -> None:
    """The child: run the jobs it is sent until told to stop or it runs out."""
    _die_with_parent(lifeline)
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    # Parsing yields the cores to the processes answering requests: a flood of heavy
    # documents from one workspace slows its own uploads, not another's searches. A session
    # of its own, or its niceness would count only against its parent's other children.
    own_session()
    yield_cores(PARSER_NICENESS)
    task = EXTRACTION
    while True:
        try:
            job = conn.recv()
        except MemoryError:  # the document alone did not fit
            _answer_out_of_memory(conn, task, memory_bytes)
            return
        except EOFError:  # the parent let this child go (recycled, or the parent exited)
            return
        if job is None:
            return
        function, args, kwargs, task = job
        try:
            conn.send(("ok", function(*args, **kwargs)))
        except ExtractionFailed as exc:
            conn.send(("failed", exc.reason))
        except MemoryError:
            # The heap may be left fragmented: answer, then make way for a fresh child.
            _answer_out_of_memory(conn, task, memory_bytes)
            return
        except RecursionError:
            conn.send(("failed", "the document is nested too deeply to read"))
        except Exception as exc:  # a hostile file can make any library raise anything
            conn.send(("failed", f"the file could not be read ({type(exc).__name__}: {exc})"))


class IsolatedExtractor:
    """Runs parses of untrusted bytes one at a time in a child process capped at
    `memory_bytes`, each under a deadline: file extraction, and mail parsing.

    The child is reused across documents and replaced whenever it times out, dies or runs
    out of memory; it exits when this process dies. Not thread-safe: give each worker
    thread its own.
    """

    def __init__(self, memory_bytes: int) -> None:
        self.memory_bytes = memory_bytes
        self._process: Any = None
        self._conn: Connection | None = None
        self._lifeline: Connection | None = None
        self._jobs = 0

    @property
    def pid(self) -> int | None:
        """The current child's process id, if one is running."""
        pid = None if self._process is None else self._process.pid
        return None if pid is None else int(pid)

    def _start(self) -> None:
        ctx = _context()
        parent, child = ctx.Pipe(duplex=True)
        watched, lifeline = ctx.Pipe(duplex=False)
        self._process = ctx.Process(
            target=_serve, args=(child, watched, self.memory_bytes), daemon=True
        )
        self._process.start()
        child.close()
        watched.close()
        self._conn = parent
        self._lifeline = lifeline
        self._jobs = 0

    def _discard(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._lifeline is not None:
            self._lifeline.close()
            self._lifeline = None
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
        return self.run(extract, (data, name, content_type, limits), timeout_s)

    def run(
        self,
        function: Callable[..., T],
        args: tuple[Any, ...],
        timeout_s: float,
        *,
        kwargs: dict[str, Any] | None = None,
        task: str = EXTRACTION,
    ) -> T:
        """`function(*args, **kwargs)` run in the child; ExtractionFailed when it raises that, takes
        longer than `timeout_s`, runs out of memory or crashes (the reason names `task`).

        `function` must be importable by name (a module-level function) and its result
        picklable.
        """
        if self._conn is None or self._jobs >= JOBS_PER_CHILD or not self._process.is_alive():
            self._discard()
            self._start()
        conn = self._conn
        assert conn is not None
        self._jobs += 1
        memory_reason = _memory_reason(task, self.memory_bytes)
        # A child that ran out of memory stops reading; its answer below says so.
        with contextlib.suppress(OSError):
            conn.send((function, args, kwargs or {}, task))
        try:
            if not conn.poll(timeout_s):
                self._discard()
                raise ExtractionFailed(
                    f"{task} took longer than {timeout_s:g} s (SUBSPACE_EXTRACT_TIMEOUT_S)"
                )
            status, payload = conn.recv()
        except (EOFError, OSError):
            # The child died without answering: killed for memory, or crashed in C code.
            self._process.join(5)
            code = self._process.exitcode
            self._discard()
            raise ExtractionFailed(
                memory_reason
                if code in (-9, 137, OUT_OF_MEMORY_EXIT)
                else f"{task} crashed (exit code {code})"
            ) from None
        if status == "failed":
            if not self._process.is_alive() or payload == memory_reason:
                self._discard()
            raise ExtractionFailed(str(payload))
        return cast(T, payload)


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


class ParserPool:
    """The children that parse untrusted bytes in this process (file extraction and mail
    alike), within one memory budget: at most `size` at work at once, each capped at
    `memory_bytes`; a workspace alone may use them all, beside another all but one.

    Children are kept between leases and reused; there are never more than `size`.
    """

    def __init__(self, memory_bytes: int, size: int) -> None:
        self.memory_bytes = memory_bytes
        self.size = max(1, size)
        self.shares = Shares(
            "mail parsers or file extractions at work",
            total=self.size,
            per_key=self.size,
            shared_per_key=max(1, self.size - 1),
        )
        self._idle: list[IsolatedExtractor] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def lease(self, workspace_id: Hashable, wait_s: float | None) -> Iterator[IsolatedExtractor]:
        """A child for the block; waits up to `wait_s` (None: for as long as it takes) for
        one to come free, then raises TooMany or Busy."""
        with self.shares.hold(workspace_id, wait_s):
            with self._lock:
                extractor = self._idle.pop() if self._idle else None
            extractor = extractor or IsolatedExtractor(self.memory_bytes)
            try:
                yield extractor
            finally:
                with self._lock:
                    self._idle.append(extractor)

    def close(self) -> None:
        """Stop the idle children. Safe to call twice."""
        with self._lock:
            idle, self._idle = self._idle, []
        for extractor in idle:
            extractor.close()


class ParserPools:
    """A database's parser pools, one per memory cap and budget (a caller's settings may
    tighten them): every importer and extraction worker of the database with the same
    settings shares one, so the budget holds for all its children together."""

    def __init__(self) -> None:
        self._pools: dict[tuple[int, int], ParserPool] = {}
        self._lock = threading.Lock()

    def get(self, memory_mb: int, budget_mb: int) -> ParserPool:
        """The pool of children capped at `memory_mb` each, as many as `budget_mb` holds and
        no more than the machine has cores: parsing is work for a core, and more children
        than cores parse no faster while leaving the server's requests no core."""
        with self._lock:
            pool = self._pools.get((memory_mb, budget_mb))
            if pool is None:
                size = min(budget_mb // max(1, memory_mb), os.cpu_count() or 1)
                pool = self._pools[(memory_mb, budget_mb)] = ParserPool(memory_mb * _MiB, size)
            return pool

    def close(self) -> None:
        """Stop every pool's idle children. Safe to call twice."""
        with self._lock:
            pools = list(self._pools.values())
        for pool in pools:
            pool.close()
