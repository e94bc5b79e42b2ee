"""Each visibility state hides an item from both legs, grep, read and hydration; restoring
brings it back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

import pytest

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.errors import NotFound
from subspace.ingest.worker import extract_pending
from subspace.outbox.append import append_event
from subspace.outbox.events import Event, declared
from subspace.providers.fake import FakeProvider
from subspace.search.filters import resolve_scope
from subspace.search.fusion import Fused, Hit
from subspace.search.grep import grep
from subspace.search.hydrate import hydrate
from subspace.search.lexical.terms import TsQueries, build_tsqueries
from subspace.search.query import parse_query
from subspace.search.reading import kb_read
from subspace.search.vector import embed_query
from tests.search_helpers import ids, index, lexical_hits, run, vector_hits

WORD = "zeppelin"


@dataclass
class Corpus:
    page_id: UUID
    node_id: UUID
    file_id: UUID
    mail_id: UUID


@pytest.fixture
def corpus(database: Database, cx: Context) -> Corpus:
    page = commands.create_page(cx, "Airships")
    node = commands.add_node(cx, page.id, f"The {WORD} hangar opens at dawn")
    file = commands.upload_file(cx, "airship.txt", f"Notes on the {WORD} route.".encode())
    mail = commands.add_mail(cx, message_id="<z@x>", subject=f"{WORD} tickets",
                             body_text="Two seats.")  # fmt: skip
    extract_pending(database, cx.settings)
    index(database, cx)
    return Corpus(page.id, node.id, file.id, mail.id)


# States no command sets yet, written as a command would: with an outbox event naming the
# file, which the lexical index follows.
def disable_chunk(cx: Context, database: Database, c: Corpus, on: bool) -> None:
    with database.pool.connection() as conn:
        conn.execute(
            "update search.file_chunks set enabled = %s where file_id = %s", (not on, c.file_id)
        )
        with declared(Event("file.chunks_enabled", "file", ("file_id",))):
            append_event(conn, cx.actor.workspace_id, "file.chunks_enabled", file_id=c.file_id)


def set_processing(cx: Context, database: Database, c: Corpus, on: bool) -> None:
    with database.pool.connection() as conn:
        conn.execute(
            "update kb.files set status = %s where id = %s",
            ("processing" if on else "ready", c.file_id),
        )
        with declared(Event("file.status", "file", ("file_id",))):
            append_event(conn, cx.actor.workspace_id, "file.status", file_id=c.file_id)


STATES: dict[str, tuple[str, Callable[[Context, Database, Corpus, bool], None]]] = {
    "chunk disabled": ("file", disable_chunk),
    "file disabled": ("file", lambda cx, db, c, on: commands.set_file_enabled(cx, c.file_id,
                                                                              not on)),
    "file processing": ("file", set_processing),
    "page excluded": ("page", lambda cx, db, c, on: (commands.exclude if on else
                                                     commands.include)(cx, "page", c.page_id)),
    "file excluded": ("file", lambda cx, db, c, on: (commands.exclude if on else
                                                     commands.include)(cx, "file", c.file_id)),
    "mail excluded": ("mail", lambda cx, db, c, on: (commands.exclude if on else
                                                     commands.include)(cx, "mail", c.mail_id)),
    "page archived": ("page", lambda cx, db, c, on: (commands.archive_page if on else
                                                     commands.restore_page)(cx, c.page_id)),
    "page deleted": ("page", lambda cx, db, c, on: (commands.delete_page if on else
                                                    commands.restore_page)(cx, c.page_id)),
    "file archived": ("file", lambda cx, db, c, on: (commands.archive_file if on else
                                                     commands.restore_file)(cx, c.file_id)),
    "file deleted": ("file", lambda cx, db, c, on: (commands.delete_file if on else
                                                    commands.restore_file)(cx, c.file_id)),
    "mail archived": ("mail", lambda cx, db, c, on: (commands.archive_mail if on else
                                                     commands.restore_mail)(cx, c.mail_id)),
    "mail deleted": ("mail", lambda cx, db, c, on: (commands.delete_mail if on else
                                                    commands.restore_mail)(cx, c.mail_id)),
}  # fmt: skip


def found(database: Database, cx: Context, c: Corpus) -> dict[str, set[str]]:
    """Which of the corpus items each path can see: each leg on its own (before hydration;
    the lexical one from its index and ranked in Postgres), each mode's final rows, and
    grep."""
    names = {c.node_id: "page", c.file_id: "file", c.mail_id: "mail", c.page_id: "page"}
    seen: dict[str, set[str]] = {}
    with cx.transaction() as conn:
        scope = resolve_scope(conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=None,
                              kinds=None, tags=None, max_knowledge_bases=50)  # fmt: skip
        tsq = build_tsqueries(conn, parse_query(WORD), cx.actor.workspace_id)
        query = embed_query(database.search_runtime, FakeProvider(), WORD, timeout_s=5)
        legs = {
            "lexical leg": lexical_hits(database, cx, scope, tsq, cap=100),
            "lexical leg in postgres": lexical_hits(
                database, cx, scope, tsq, cap=100, engine=False
            ),
            "vector leg": vector_hits(conn, scope, query, FakeProvider(), cap=100)[0],
        }
    for name, hits in legs.items():
        seen[name] = {names[h.target[1]] for h in hits if h.target[1] in names}
    for mode in ("lexical", "vector"):
        response = run(database, cx, WORD, mode=mode, limit=20)
        seen[mode] = {names[i] for i in ids(response) if i in names}
    refs = {m.ref.split(":")[0] for m in grep(cx, WORD).matches}
    seen["grep"] = {"page" if r == "node" else r for r in refs}
    return seen


@pytest.mark.parametrize("state", list(STATES))
def test_each_state_hides_the_item_everywhere_until_restored(
    database: Database, cx: Context, corpus: Corpus, state: str
) -> None:
    kind, toggle = STATES[state]
    everything = {"page", "file", "mail"}
    paths = ("lexical leg", "lexical leg in postgres", "vector leg", "lexical", "vector", "grep")
    assert found(database, cx, corpus) == dict.fromkeys(paths, everything)
    toggle(cx, database, corpus, True)
    # Hidden at once, before the index applies the change: the delta drops its old rows.
    target = {"page": corpus.node_id, "file": corpus.file_id, "mail": corpus.mail_id}[kind]
    assert target not in ids(run(database, cx, WORD, mode="lexical", limit=20)), state
    with cx.transaction() as conn:
        scope = resolve_scope(conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=None,
                              kinds=None, tags=None, max_knowledge_bases=50)  # fmt: skip
        tsq = build_tsqueries(conn, parse_query(WORD), cx.actor.workspace_id)
    stale = lexical_hits(database, cx, scope, tsq, cap=100, current=False)
    assert target not in {h.target[1] for h in stale}, state
    index(database, cx)  # the indexer prunes deleted items; hiding must not depend on it
    hidden = found(database, cx, corpus)
    assert hidden == {leg: everything - {kind} for leg in hidden}, state
    if kind == "page":
        with pytest.raises(NotFound):
            kb_read(cx, corpus.page_id)
    toggle(cx, database, corpus, False)
    index(database, cx)
    assert found(database, cx, corpus) == dict.fromkeys(paths, everything)
    if kind == "page":
        assert WORD in kb_read(cx, corpus.page_id)


def test_hydration_drops_an_item_hidden_after_ranking(
    database: Database, cx: Context, corpus: Corpus
) -> None:
    with cx.transaction() as conn:
        scope = resolve_scope(conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=None,
                              kinds=None, tags=None, max_knowledge_bases=50)  # fmt: skip
    kb_id = scope.kb_ids[0]
    ranked = [
        Fused(("node", corpus.node_id), 0.1,
              {"lexical": (1, Hit(("node", corpus.node_id), "node", f"node:{corpus.node_id}",
                                  kb_id, corpus.page_id, 1.0))}),
        Fused(("mail", corpus.mail_id), 0.05,
              {"lexical": (2, Hit(("mail", corpus.mail_id), "mail", f"mail:{corpus.mail_id}",
                                  kb_id, corpus.mail_id, 1.0))}),
    ]  # fmt: skip
    commands.archive_page(cx, corpus.page_id)  # after ranking, before hydration
    with cx.transaction() as conn:
        rows = hydrate(conn, scope, ranked, TsQueries())
    assert [row.id for row in rows] == [corpus.mail_id]
