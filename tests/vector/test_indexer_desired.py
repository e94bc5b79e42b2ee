"""The indexer's sources read the kinds' tables and reasons from the registry: an item gone by
a declared reason has nothing to embed, one merely hidden keeps its embeddings."""

from __future__ import annotations

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.indexer.desired import GONE, ITEM_KINDS, IndexTarget, all_targets, desired_chunks
from subspace.ingest.worker import extract_pending
from subspace.search import registry


def test_the_reasons_that_prune_are_declared_by_the_items() -> None:
    items = {item.name: item for item in registry.items()}
    assert set(ITEM_KINDS) <= set(items)
    declared = {reason.name for name in ITEM_KINDS for reason in items[name].reasons}
    assert set(GONE) <= declared


def test_deleted_and_unextracted_items_have_nothing_to_embed_hidden_ones_keep_theirs(
    database: Database, cx: Context
) -> None:
    archived = commands.create_page(cx, "Archived")
    commands.add_node(cx, archived.id, "kept while archived")
    commands.archive_page(cx, archived.id)
    deleted = commands.create_page(cx, "Deleted")
    commands.delete_page(cx, deleted.id)
    ready = commands.upload_file(cx, "ready.txt", b"extracted text")
    extract_pending(database, cx.settings)
    waiting = commands.upload_file(cx, "waiting.txt", b"not extracted yet")
    mail = commands.add_mail(cx, message_id="<a@x>", subject="Hello", body_text="Kept.")
    gone = commands.add_mail(cx, message_id="<b@x>", subject="Bye", body_text="Gone.")
    commands.delete_mail(cx, gone.id)
    ws = cx.actor.workspace_id
    with database.pool.connection() as conn:
        listed = {(t.kind, t.item_id) for t in all_targets(conn, workspace_id=ws)}
        assert listed == {("page", archived.id), ("file", ready.id), ("mail", mail.id)}
        targets = [IndexTarget(ws, kind, ident) for kind, ident in (
            ("page", archived.id), ("page", deleted.id), ("file", ready.id),
            ("file", waiting.id), ("mail", mail.id), ("mail", gone.id))]  # fmt: skip
        chunks = desired_chunks(conn, ws, targets)
    assert {ident for ident, found in chunks.items() if found} == {archived.id, ready.id, mail.id}
    assert set(chunks) == {t.item_id for t in targets}
    assert any(c.text == "kept while archived" for c in chunks[archived.id])
