"""The registry of searchable kinds: the built-in declarations, and a kind added in a test
schema that the search finds without any other module knowing it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

import pytest

from subspace import commands
from subspace.agents.tools import call_tool
from subspace.answers.evidence import Evidence, parse_line
from subspace.answers.strategy import AnswerBullet
from subspace.commands.pages import resolve_kb
from subspace.context import Context
from subspace.database import Database
from subspace.errors import InvalidInput, NotFound
from subspace.ingest.worker import extract_pending
from subspace.outbox.append import append_event
from subspace.outbox.events import Event, declared
from subspace.search import registry
from subspace.search.filters import resolve_scope
from subspace.search.grep import grep
from subspace.search.lexical.terms import build_tsqueries
from subspace.search.options import KINDS
from subspace.search.query import parse_query
from tests.samples import make_pdf
from tests.search_helpers import lexical_hits, run

# A kind stored in its own schema: a text, its generated tsvector and length (as the
# migrations declare them for pages and bullets), a knowledge base, and the BM25 statistics
# kept by the triggers migration 0005 installs on every searchable table. Its writes append
# outbox events naming the note (NOTE_EVENTS), as kb-commands do for theirs.
NOTES_SCHEMA = """
create schema kindtest;
create table kindtest.notes (
    workspace_id uuid not null,
    id           uuid not null default gen_random_uuid(),
    kb_id        uuid not null,
    title        text not null,
    body         text not null,
    archived_at  timestamptz,
    created_at   timestamptz not null default now(),
    updated_at   timestamptz not null default now(),
    body_tsv     tsvector generated always as
        (search.document_tsvector(left(body, 100000))) stored,
    body_len     integer generated always as
        (search.lexeme_count(search.document_tsvector(left(body, 100000)))) stored,
    primary key (workspace_id, id)
);
create index notes_body_tsv on kindtest.notes using gin (body_tsv);
create trigger text_stats_insert after insert on kindtest.notes
    referencing new table as new_rows
    for each statement execute function search.update_text_stats('note', 'body_tsv', 'body_len');
create trigger text_stats_update after update on kindtest.notes
    referencing old table as old_rows new table as new_rows
    for each statement execute function search.update_text_stats('note', 'body_tsv', 'body_len');
create trigger text_stats_delete after delete on kindtest.notes
    referencing old table as old_rows
    for each statement execute function search.update_text_stats('note', 'body_tsv', 'body_len');
"""

NOTE_ITEM = registry.ItemSpec("note", "kindtest.notes", "t", "title", (registry.ARCHIVED,))
NOTE_EVENTS = (Event("note.added", "note", ("note_id",)),
               Event("note.archived", "note", ("note_id",)))  # fmt: skip
NOTE = registry.KindSpec(
    "note", NOTE_ITEM, "kindtest.notes", "t", key="id", item_key="id", text="body",
    tsv="body_tsv", length="body_len", source="note", row_type="note", cursor_key="t",
)  # fmt: skip


@dataclass
class Notes:
    """The registered note kind, and a way to write notes in the test's workspace."""

    database: Database
    cx: Context
    spec: registry.KindSpec

    def add(
        self, body: str, *, title: str = "A note", kb_id: UUID | None = None,
        ident: UUID | None = None,
    ) -> UUID:  # fmt: skip
        """A note in `kb_id` (default: the workspace's default knowledge base), with the id
        `ident` when given."""
        with self.cx.transaction() as conn:
            row = conn.execute(
                "insert into kindtest.notes (workspace_id, id, kb_id, title, body) "
                "values (%s, coalesce(%s::uuid, gen_random_uuid()), %s, %s, %s) returning id",
                (self.cx.actor.workspace_id, ident, resolve_kb(self.cx, conn, kb_id), title,
                 body),
            ).fetchone()  # fmt: skip
            assert row is not None
            append_event(conn, self.cx.actor.workspace_id, "note.added", note_id=row["id"])
        return UUID(str(row["id"]))

    def archive(self, note_id: UUID) -> None:
        with self.cx.transaction() as conn:
            conn.execute("update kindtest.notes set archived_at = now() where id = %s", (note_id,))
            append_event(conn, self.cx.actor.workspace_id, "note.archived", note_id=note_id)


@pytest.fixture
def notes(database: Database, cx: Context) -> Iterator[Notes]:
    """A `note` kind: its table in a schema of the test's database, registered for the test
    and forgotten afterwards."""
    with database.pool.connection() as conn:
        conn.execute(NOTES_SCHEMA)
    spec = registry.register(NOTE)
    try:
        with declared(*NOTE_EVENTS):
            yield Notes(database, cx, spec)
    finally:
        registry.unregister(spec.name)


def test_the_built_in_kinds_are_the_options_kinds_with_their_refs_and_rows() -> None:
    assert registry.filter_names() == KINDS
    assert registry.names() == (*KINDS, "file_name", "mail_subject")
    assert registry.target_of("memory") == "node"
    assert registry.target_of("file_name") == "file"
    assert registry.row_types() == {
        "page": "page", "node": "node", "memory": "mem", "file": "file", "mail": "mail",
        "file_name": "file", "mail_subject": "mail",
    }  # fmt: skip
    assert [registry.get(k).ref_format for k in ("page", "node", "memory", "file", "mail")] == [
        "page:<id>", "node:<id>", "node:<id>", "file:<file_id>:<n>", "mail:<id>"
    ]  # fmt: skip
    assert registry.get("file").ref_of("f1", 3) == "file:f1:3"
    assert registry.sources() == ("page", "node", "file", "mail", "file_name", "mail_subject")
    assert registry.with_parts(frozenset({"file"})) == {"file", "file_name"}
    assert [reason.name for reason in registry.get("file").reasons] == [
        "disabled", "processing", "archived", "deleted", "excluded", "chunk_disabled"
    ]  # fmt: skip


def test_a_kind_is_registered_once_and_its_names_must_be_plain() -> None:
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.get("page"))
    with pytest.raises(ValueError, match="lowercase"):
        registry.register(registry.KindSpec(
            "Bad'", NOTE_ITEM, "kindtest.notes", "t", key="id", item_key="id", text="body",
            tsv="body_tsv", length="body_len", source="note", row_type="note",
        ))  # fmt: skip
    assert "Bad'" not in registry.names()


def test_a_registered_kind_is_found_by_the_lexical_search(
    database: Database, notes: Notes, cx: Context
) -> None:
    page = commands.create_page(cx, "Garden")
    commands.add_node(cx, page.id, "the heron waits by the pond")
    wanted = notes.add("a quetzal nests in the cloud forest")
    notes.add("the pond freezes in winter")

    response = run(database, cx, "quetzal", mode="lexical")
    assert response.legs["lexical"].candidates == 1

    with notes.database.pool.connection() as conn:
        scope = resolve_scope(conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=None,
                              kinds=None, tags=None, max_knowledge_bases=10)  # fmt: skip
        assert "note" in scope.kinds
        tsq = build_tsqueries(conn, parse_query("quetzal"), cx.actor.workspace_id)
        # The migrations' triggers keep its statistics.
        counted = conn.execute(
            "select source, lexeme, ndoc from search.term_stats "
            "where workspace_id = %s and lexeme = any(%s)",
            (cx.actor.workspace_id, list(tsq.lexemes)),
        ).fetchall()
        assert [(r["source"], r["lexeme"], r["ndoc"]) for r in counted] == [("note", "quetzal", 1)]
        pond = build_tsqueries(conn, parse_query("pond"), cx.actor.workspace_id)
        only_notes = resolve_scope(conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=None,
                                   kinds=["note"], tags=None, max_knowledge_bases=10)  # fmt: skip
        no_notes = resolve_scope(conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=None,
                                 kinds=["node"], tags=None, max_knowledge_bases=10)  # fmt: skip
    for engine in (True, False):  # the index holds notes as it holds the built-in kinds
        hits = lexical_hits(notes.database, cx, scope, tsq, cap=10, engine=engine)
        assert [(h.kind, h.target, h.ref, h.kb_id) for h in hits] == [
            ("note", ("note", wanted), f"note:{wanted}", page.kb_id)
        ]
        # Both documents share "pond" with a bullet: BM25 ranks each source by its own
        # statistics, and the kinds filter picks one or the other.
        found = {
            name: {h.kind for h in lexical_hits(notes.database, cx, s, pond, cap=10,
                                                  engine=engine)}
            for name, s in (("all", scope), ("notes", only_notes), ("nodes", no_notes))
        }  # fmt: skip
        assert found == {"all": {"note", "node"}, "notes": {"note"}, "nodes": {"node"}}

    # Its declared reasons hide it: an archived note is not found.
    notes.archive(wanted)
    assert run(database, cx, "quetzal", mode="lexical").legs["lexical"].candidates == 0
    # The vector leg reads the same declarations (it has no note vectors to find).
    assert not run(database, cx, "quetzal", mode="hybrid").degraded


def test_an_unregistered_kind_is_unknown_again(
    database: Database, notes: Notes, cx: Context
) -> None:
    registry.unregister("note")
    registry.unregister("note")  # safe twice
    with pytest.raises(InvalidInput, match="Unknown kind 'note'"):
        run(database, cx, "quetzal", kinds=["note"])
    registry.register(NOTE)  # the fixture forgets it again


@pytest.mark.parametrize(
    ("wanted", "found"),
    [(["memory"], {"memory"}), (["node"], {"node"}), (["node", "memory"], {"node", "memory"}),
     (["memory", "page"], {"memory", "page"})],
)  # fmt: skip
def test_memories_and_bullets_share_a_table_and_the_kinds_filter_tells_them_apart(
    database: Database, cx: Context, wanted: list[str], found: set[str]
) -> None:
    page = commands.create_page(cx, "Otters")
    commands.add_node(cx, page.id, "otters hold hands while they sleep")
    commands.add_node(cx, page.id, "the otter den is under the willow", props={"memory": True})
    response = run(database, cx, "otter", mode="lexical", kinds=wanted)
    assert {row.type.replace("mem", "memory") for row in response.rows} == found
    assert len(response.rows) == len(found)


def test_a_registered_kind_is_shown_explained_grepped_and_read(
    database: Database, notes: Notes, cx: Context
) -> None:
    wanted = notes.add("a quetzal nests in the cloud forest", title="Birds")
    other = notes.add("the quetzal flew off", title="Sightings")

    rows = run(database, cx, "quetzal nests", mode="lexical").rows
    assert [(r.type, r.id, r.ref, r.title) for r in rows] == [
        ("note", wanted, f"note:{wanted}", "Birds"), ("note", other, f"note:{other}", "Sightings")
    ]  # fmt: skip
    assert [rows[0].passage[a:b] for a, b in rows[0].highlights] == ["quetzal", "nests"]

    found = grep(cx, "QUETZAL")
    assert [(m.ref, m.title, m.count) for m in found.matches] == sorted(
        [(f"note:{wanted}", "Birds", 1), (f"note:{other}", "Sightings", 1)],
        key=lambda m: str(m[0]).split(":")[1],
    )
    assert call_tool(cx, database.searcher(None), "kb.read", {"ref": f"note:{wanted}"}) == (
        f"# Birds (note:{wanted})\na quetzal nests in the cloud forest"
    )

    # One of its declared reasons hides it: explain names that reason, grep and read agree.
    notes.archive(wanted)
    response = run(database, cx, "quetzal nests", mode="lexical", explain_target=f"note:{wanted}")
    assert wanted not in [r.id for r in response.rows]
    assert response.absent == {
        "target": f"note:{wanted}", "shown": False, "reasons": ["filtered: archived"]
    }  # fmt: skip
    bare = run(database, cx, "quetzal", mode="lexical", explain_target=str(wanted))
    assert bare.absent is not None
    assert bare.absent["reasons"] == ["filtered: archived"]
    assert [m.ref for m in grep(cx, "quetzal").matches] == [f"note:{other}"]
    with pytest.raises(NotFound):
        call_tool(cx, database.searcher(None), "kb.read", {"ref": f"note:{wanted}"})


def test_a_cursor_key_taken_by_another_kind_is_refused() -> None:
    # A note would be listed in cursors by its initial, which nodes use: a cursor could not
    # tell a note from a node of the same id.
    with pytest.raises(ValueError, match="which 'node' uses; declare another cursor_key"):
        registry.register(replace(NOTE, cursor_key=""))
    with pytest.raises(ValueError, match="which 'file' uses"):
        registry.register(replace(NOTE, cursor_key="f"))
    with pytest.raises(ValueError, match="one lowercase letter"):
        registry.register(replace(NOTE, cursor_key="tt"))
    assert "note" not in registry.names()
    assert {spec.name: spec.cursor_letter for spec in registry.registered()} == {
        "page": "p", "node": "n", "memory": "n", "file": "f", "mail": "m", "file_name": "f",
        "mail_subject": "m",
    }  # fmt: skip


def test_paging_serves_each_note_and_node_once_even_when_their_ids_are_equal(
    database: Database, notes: Notes, cx: Context
) -> None:
    page = commands.create_page(cx, "Lamps")
    bullets = [commands.add_node(cx, page.id, f"a lantern {word}").id for word in ("red", "tin")]
    twin = notes.add("the lantern by the door", ident=bullets[0])  # a note with a node's id
    notes.add("a lantern in the attic")

    served: list[tuple[str, UUID]] = []
    cursor = None
    for _ in range(10):
        response = run(database, cx, "lantern", mode="lexical", limit=1, cursor=cursor)
        served += [(row.type, row.id) for row in response.rows]
        cursor = response.next_cursor
        if cursor is None:
            break
    assert twin == bullets[0]
    assert len(served) == len(set(served)) == 4
    assert {kind for kind, _ in served} == {"note", "node"}
    assert ("note", twin) in served
    assert ("node", twin) in served


def test_grep_leaves_out_the_kinds_that_declare_grep_false(notes: Notes, cx: Context) -> None:
    page = commands.create_page(cx, "Zebra crossing")  # a page title: grep=False
    commands.add_node(cx, page.id, "the zebra stripes")
    notes.add("a zebra note")
    assert sorted(m.ref.split(":")[0] for m in grep(cx, "zebra").matches) == ["node", "note"]
    registry.unregister("note")
    registry.register(replace(NOTE, grep=False))  # the fixture forgets it again
    assert [m.ref.split(":")[0] for m in grep(cx, "zebra").matches] == ["node"]


def test_an_answer_cites_a_registered_kind_by_its_ref(
    database: Database, notes: Notes, cx: Context
) -> None:
    wanted = notes.add("herons nest in the reeds")
    printed = call_tool(cx, database.searcher(None), "kb.search", {"query": "herons nest"})
    evidence = Evidence(budget=10_000)
    evidence.add_text(printed)
    assert evidence.has(f"note:{wanted}")
    bullet = parse_line(f"- Herons nest in the reeds [NOTE:{wanted}]", evidence)
    assert bullet == AnswerBullet("Herons nest in the reeds", [f"note:{wanted}"])


def test_browsing_lists_every_kind_of_item_newest_first(
    notes: Notes, database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Oldest page")
    pdf = commands.upload_file(cx, "guide.pdf", make_pdf(["Ferry times: every 20 minutes"]))
    extract_pending(database, cx.settings)
    mail = commands.add_mail(cx, message_id="<b@x>", subject="A mail", body_text="hello")
    note = notes.add("the newest thing written")

    def browsed(**options: Any) -> list[tuple[str, str]]:
        response = run(database, cx, "", **options)
        assert response.notes == [
            "No query: the most recently changed items that match the filters."
        ]
        return [(row.type, row.ref) for row in response.rows]

    every = list(registry.filter_names())  # a browse needs a filter
    assert browsed(kinds=every) == [
        ("note", f"note:{note}"), ("mail", f"mail:{mail.id}"), ("file", f"file:{pdf.id}:0"),
        ("page", f"page:{page.id}"),
    ]  # fmt: skip
    assert browsed(kinds=every, limit=2) == [("note", f"note:{note}"), ("mail", f"mail:{mail.id}")]
    assert browsed(kinds=["memory"]) == [("page", f"page:{page.id}")]  # a page's kinds: the page
    assert browsed(kinds=["note", "file"]) == [
        ("note", f"note:{note}"), ("file", f"file:{pdf.id}:0")
    ]  # fmt: skip
    notes.archive(note)  # its declared reasons hide it from a browse too
    assert browsed(kinds=["note"]) == []


def test_rows_of_a_kind_whose_row_type_is_not_its_name_are_explained(
    database: Database, notes: Notes, cx: Context
) -> None:
    registry.unregister("note")
    registry.register(replace(NOTE, row_type="jot"))  # the fixture forgets it again
    with pytest.raises(ValueError, match="row type 'jot', which 'note' uses"):
        registry.register(replace(NOTE, name="memo", cursor_key="o", row_type="jot", source="memo",
                               table="kindtest.memos"))  # fmt: skip
    wanted = notes.add("a quetzal nests in the cloud forest")
    response = run(database, cx, "quetzal", mode="lexical", explain=True)
    assert [(row.type, row.id) for row in response.rows] == [("jot", wanted)]
    assert response.rows[0].explain is not None
    assert response.rows[0].explain["terms"][0]["leg"] == "lexical"
    (listed,) = response.leg_rows["lexical"]
    assert listed.explain == response.rows[0].explain
