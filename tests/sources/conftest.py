"""Sources: a workspace's settings with a key for mailbox passwords, and a real IMAP server."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.sources.model import SyncedSource
from subspace.sources.runner import SourceSync
from subspace.sources.secrets import new_key
from tests import imap_server
from tests.conftest import free_port


@pytest.fixture
def keyed(settings: Settings) -> Settings:
    return dataclasses.replace(settings, sources_key=new_key(), source_scan_s=60)


@pytest.fixture
def keyed_cx(database: Database, keyed: Settings) -> Context:
    return database.default_context(keyed)


@pytest.fixture
def dovecot() -> Iterator[imap_server.Dovecot]:
    """A Dovecot of its own for each test: its mailbox starts empty."""
    if not imap_server.available():
        pytest.skip(imap_server.MISSING)
    server = imap_server.start_dovecot(free_port())
    yield server
    server.stop()


def sync(database: Database, settings: Settings, source: SyncedSource) -> dict[str, int]:
    """One round of the source, as the server's would run it; its counts."""
    syncer = SourceSync(database, settings, source.workspace_id, source.id)
    try:
        counts = syncer.round(wait=True)
    finally:
        syncer.close()
    assert counts is not None
    return dict(counts)
