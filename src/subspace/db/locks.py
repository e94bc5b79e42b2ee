"""The advisory lock keys Subspace takes, declared together so no two uses share a number."""

from __future__ import annotations

# Taken by every process that migrates, for the length of the migration.
MIGRATION_LOCK_KEY = 7_201_530_117
# Held shared by `subspace serve` for its lifetime; `subspace reindex` refuses while it is taken.
SERVER_LOCK_KEY = 7_201_530_118
# Held by the one process that runs the background work the servers of a database share (the
# embeddings indexer, extraction, the run worker, the sources' sync): the others wait to be
# elected.
BACKGROUND_LOCK_KEY = 7_201_530_120
# Serialises workspace creation, so two names never collide.
WORKSPACE_LOCK_KEY = 7_201_530_119
# The class half of the two-key lock a process holds on each run it executes (the other half
# is hashtext of the run id); a 'running' run whose lock is free lost its process.
RUN_LOCK_CLASS = 720_153_012
# The class half of the two-key lock held while a source syncs (the other half is hashtext of
# the source's id): the server's round and `subspace sources sync` never run one source twice.
SOURCE_LOCK_CLASS = 720_153_013
