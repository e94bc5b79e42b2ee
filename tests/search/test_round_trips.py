"""How many times a search waits on Postgres, counted from libpq's own protocol trace."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.pq import Trace
from psycopg_pool import ConnectionPool

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.db.pool import _configure
from subspace.providers.fake import FakeProvider
from subspace.search.request import SearchRequest
from subspace.search.service import search
from tests.search_helpers import index


class Traced:
    """A pool whose connections write libpq's trace of every protocol message to a file each.

    Each wait of the client on the server ends with the server's ReadyForQuery, once per
    query outside a pipeline and once per sync inside one: counting them counts round trips.
    """

    def __init__(self, dsn: str, directory: Path) -> None:
        self.directory = directory
        self.files: list[Any] = []
        self.file_of: dict[int, Any] = {}  # each connection's own trace file, by id
        self.pool: ConnectionPool[Any] = ConnectionPool(
            dsn,
            min_size=2,
            max_size=2,
            kwargs={"row_factory": psycopg.rows.dict_row},
            configure=self._configure,
            open=True,
        )
        self.pool.wait()

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        _configure(conn)
        # Named by the server process: the pool opens its connections on two threads at once.
        trace = open(self.directory / f"conn{conn.pgconn.backend_pid}.trace", "w")  # noqa: SIM115
        self.files.append(trace)
        self.file_of[id(conn)] = trace
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)

    def checkpoint(self) -> list[int]:
        """Flush every connection's trace (libpq buffers it) and return each file's size."""
        held = [self.pool.getconn() for _ in self.files]
        for conn in held:
            conn.pgconn.untrace()  # flushes
        sizes = [os.path.getsize(trace.name) for trace in self.files]
        for conn in held:  # the pool hands them out in any order: each to its own file
            conn.pgconn.trace(self.file_of[id(conn)].fileno())
            conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
            self.pool.putconn(conn)
        return sizes

    def trips_since(self, sizes: list[int]) -> list[list[list[str]]]:
        """Per connection, the messages the client sent before each wait for the server, since
        the checkpoint that returned `sizes`: a wait is the server answering what the client
        asked for by ending what it sent with a Flush or a Sync."""
        ends = self.checkpoint()
        found = []
        for trace, start, end in zip(self.files, sizes, ends, strict=True):
            with open(trace.name) as handle:
                handle.seek(start)
                lines = handle.read(end - start).splitlines()
            trips: list[list[str]] = []
            sent: list[str] = []
            for line in lines:
                parts = line.split("\t")
                if len(parts) < 3:
                    continue
                direction, _, message, *rest = parts
                if direction == "F":
                    sent.append(f"{message} {' '.join(rest)}")
                elif direction == "B" and sent and sent[-1].split()[0] in ("Flush", "Sync"):
                    # The client asked and waits. (Results it had the server send early, read
                    # while it still sends, end no trip: search/lexical/leg.py's marker.)
                    trips.append(sent)
                    sent = []
            found.append(trips)
        return found

    def close(self) -> None:
        self.pool.close()
        for trace in self.files:
            trace.close()


@pytest.fixture
def traced(db_dsn: str) -> Iterator[Traced]:
    with tempfile.TemporaryDirectory() as directory:
        pool = Traced(db_dsn, Path(directory))
        yield pool
        pool.close()


def test_a_hybrid_search_waits_on_postgres_at_most_three_times(
    database: Database, cx: Context, traced: Traced
) -> None:
    page = commands.create_page(cx, "Tide tables")
    for text in ["High tide at dawn", "Low tide at noon", "Tide pools hold crabs"]:
        commands.add_node(cx, page.id, text)
    index(database, cx)
    on_traced = replace(cx, db=traced.pool)
    searcher = database.searcher(FakeProvider())
    search(on_traced, searcher, SearchRequest(query="tide pools"))  # warm: caches, prepares
    sizes = traced.checkpoint()
    response = search(on_traced, searcher, SearchRequest(query="tide pools"))
    assert response.rows
    assert not response.degraded
    trips = traced.trips_since(sizes)
    # One connection: the scope and the query's analysis; the two legs; the rows and COMMIT.
    assert sorted(len(t) for t in trips) == [0, 3], trips
    first, legs, rows = next(t for t in trips if t)
    assert any("begin" in m for m in first)
    assert any("phraseto_tsquery" in m for m in first)
    assert any("<=>" in m for m in legs)
    # The lexical leg's marker is answered at once, not behind the vector leg's walk: the
    # engine is searched while the walk runs (search/lexical/leg.py).
    marker = next(n for n, m in enumerate(legs) if '"select 1"' in m)
    walk = next(n for n, m in enumerate(legs) if "<=>" in m)
    assert "Flush" in [m.split()[0] for m in legs[marker:walk]], legs
    assert any("ts_headline" in m for m in rows)
    assert any("commit" in m for m in rows)
