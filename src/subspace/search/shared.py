"""What searches share while a process runs: the vector leg's threads, the base sizes seen,
the query embeddings' threads and cache, and the lexical index's reader."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from uuid import UUID

from pgvector import HalfVector

from subspace.search.lexical.index.layout import database_folder
from subspace.search.lexical.index.reader import LexicalReader
from subspace.shares import Shares

LARGE_BASE_TTL_S = 60.0  # how long a base found to hold EXACT_SCAN_ROWS vectors stays "large"
EMBED_THREADS = 4  # query embeddings waited on at once; a hung provider holds only these
QUERY_CACHE_SIZE = 512  # recent query embeddings kept, for a palette typing and retyping
# Searches one workspace runs at once in one process: one per core keeps the cores busy, and
# a workspace sending many leaves room for the others' (each waits its turn, then 429).
# Beside another workspace, a web process also counts them over the host (host_shares.py).
SEARCHES_PER_WORKSPACE = max(2, os.cpu_count() or 2)
SEARCH_WAIT_S = 2.0  # how long a search waits for its workspace's turn


class LargeBases:
    """Knowledge bases found to hold many vectors of a model, and when; kept for `ttl_s`.

    Counting a large base costs more than searching it, so one found large is trusted for a
    while. Thread-safe: searches running at once read and update it.
    """

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._seen: dict[tuple[str, UUID], tuple[float, int]] = {}  # -> (when, count then)
        self._lock = threading.Lock()

    def known(self, model: str, *, at_least: int) -> dict[UUID, int]:
        """Every base of `model` remembered within the TTL with a count of at least
        `at_least`, and that count."""
        now = time.monotonic()
        with self._lock:
            return {
                kb_id: counted
                for (seen_model, kb_id), (seen, counted) in self._seen.items()
                if seen_model == model and counted >= at_least and now - seen < self.ttl_s
            }

    def remember(self, model: str, kb_id: UUID, count: int) -> None:
        with self._lock:
            self._seen[(model, kb_id)] = (time.monotonic(), count)

    def forget(self, model: str, kb_id: UUID) -> None:
        """Count the base again next time. Safe to call for a base never remembered."""
        with self._lock:
            self._seen.pop((model, kb_id), None)


class QueryVectors:
    """The most recently used query embeddings, by (model, text), at most `size` of them.

    Thread-safe: searches running at once read and fill it.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._vectors: OrderedDict[tuple[str, str], HalfVector] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, model: str, text: str) -> HalfVector | None:
        """The vector kept for the text, which becomes the most recently used; None if none."""
        with self._lock:
            found = self._vectors.get((model, text))
            if found is not None:
                self._vectors.move_to_end((model, text))
            return found

    def put(self, model: str, text: str, vector: HalfVector) -> None:
        """Keep the vector, dropping the least recently used beyond `size`."""
        with self._lock:
            self._vectors[(model, text)] = vector
            self._vectors.move_to_end((model, text))
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)


class SearchRuntime:
    """The state searches share, created once per Database (by the app, the CLI or a test)
    and closed with it; nothing of it lives on a module, so two runtimes share nothing."""

    def __init__(
        self,
        *,
        large_base_ttl_s: float = LARGE_BASE_TTL_S,
        query_cache_size: int = QUERY_CACHE_SIZE,
        searches_per_workspace: int = SEARCHES_PER_WORKSPACE,
    ) -> None:
        self.large_bases = LargeBases(large_base_ttl_s)
        # Query embeddings run on threads of their own, so a search waits for one at most
        # its timeout while a hung provider holds only these (search/vector.embed_query).
        # Threads start on first use, so a process that never searches starts none.
        self.embed_threads = ThreadPoolExecutor(
            max_workers=EMBED_THREADS, thread_name_prefix="query-embed"
        )
        self.query_vectors = QueryVectors(query_cache_size)
        self.searches = Shares("searches in flight", total=None, per_key=searches_per_workspace)
        self._lexical: dict[Path, LexicalReader] = {}
        self._lexical_lock = threading.Lock()

    def lexical_reader(self, root: Path, identity: Callable[[], str]) -> LexicalReader:
        """The reader of the lexical index under `root` for this runtime's database; the
        database's identity is asked for once."""
        with self._lexical_lock:
            reader = self._lexical.get(root)
            if reader is None:
                database = identity()
                reader = LexicalReader(database_folder(root, database), database)
                self._lexical[root] = reader
            return reader

    def close(self) -> None:
        """Wait for the query embeddings running, then stop their threads. Safe
        to call twice.

        An embedding a search stopped waiting for is still waited for here (the provider's
        own timeout bounds it), so no thread outlives the runtime.
        """
        self.embed_threads.shutdown(wait=True, cancel_futures=True)
