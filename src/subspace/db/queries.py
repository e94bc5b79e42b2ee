"""Reading rows of the kb schema into models, always within one workspace."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from subspace.db.pool import Conn
from subspace.errors import NotFound
from subspace.models import (
    File,
    KnowledgeBase,
    Mail,
    Node,
    Page,
    PageSummary,
    TagDefinition,
    TreeNode,
)

PAGE_COLUMNS = (
    "id, kb_id, title, archived_at, deleted_at, created_at, updated_at, version, source_path"
)
NODE_COLUMNS = "id, page_id, parent_id, position, text, props, created_at, updated_at"
FILE_COLUMNS = (
    "id, kb_id, name, title, content_type, size, blob_sha256 as sha256, status, status_reason, "
    "enabled, mail_id, archived_at, deleted_at, created_at, updated_at, source_path, "
    "(select t.truncated from search.file_text t where t.workspace_id = kb.files.workspace_id "
    "and t.file_id = kb.files.id) as text_truncated"
)
MAIL_COLUMNS = (
    "id, kb_id, message_id, subject, sender, recipients, sent_at, snippet, body_text, "
    "archived_at, deleted_at, created_at, updated_at, quoted_text"
)
KB_COLUMNS = "id, name, is_default, created_at"
TAG_COLUMNS = "id, kb_id, name, type, created_at"


def _one(conn: Conn, sql: str, params: tuple[Any, ...], kind: str, ident: object) -> dict[str, Any]:
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise NotFound(kind, ident)
    return row


def get_knowledge_base(conn: Conn, workspace_id: UUID, kb_id: UUID) -> KnowledgeBase:
    row = _one(
        conn,
        f"select {KB_COLUMNS} from kb.knowledge_bases where workspace_id = %s and id = %s",
        (workspace_id, kb_id),
        "knowledge base",
        kb_id,
    )
    return KnowledgeBase(**row)


def default_knowledge_base(conn: Conn, workspace_id: UUID) -> KnowledgeBase:
    row = _one(
        conn,
        f"select {KB_COLUMNS} from kb.knowledge_bases where workspace_id = %s and is_default",
        (workspace_id,),
        "default knowledge base",
        workspace_id,
    )
    return KnowledgeBase(**row)


def list_knowledge_bases(conn: Conn, workspace_id: UUID) -> list[KnowledgeBase]:
    rows = conn.execute(
        f"select {KB_COLUMNS} from kb.knowledge_bases where workspace_id = %s order by name",
        (workspace_id,),
    ).fetchall()
    return [KnowledgeBase(**row) for row in rows]


def knowledge_base_counts(conn: Conn, workspace_id: UUID, kb_id: UUID) -> dict[str, int]:
    """Live pages, files and mail of a base: what is neither archived nor deleted."""
    get_knowledge_base(conn, workspace_id, kb_id)  # another workspace's base: 404
    live = "workspace_id = %(ws)s and kb_id = %(kb)s and archived_at is null and deleted_at is null"
    row = conn.execute(
        f"select (select count(*) from kb.pages where {live}) as pages, "
        f"(select count(*) from kb.files where {live}) as files, "
        f"(select count(*) from kb.mail where {live}) as mail",
        {"ws": workspace_id, "kb": kb_id},
    ).fetchone()
    assert row is not None
    return {name: int(value) for name, value in row.items()}


def get_page(conn: Conn, workspace_id: UUID, page_id: UUID, *, lock: bool = False) -> PageSummary:
    """The page without its nodes. `lock` takes a row lock that serialises edits of one page."""
    suffix = " for update" if lock else ""
    row = _one(
        conn,
        f"select {PAGE_COLUMNS} from kb.pages where workspace_id = %s and id = %s{suffix}",
        (workspace_id, page_id),
        "page",
        page_id,
    )
    return PageSummary(**row)


def get_page_tree(conn: Conn, workspace_id: UUID, page_id: UUID) -> Page:
    """The page with its nodes nested under `nodes` in outline order."""
    page = Page(**vars(get_page(conn, workspace_id, page_id)))
    rows = conn.execute(
        f"select {NODE_COLUMNS} from kb.nodes where workspace_id = %s and page_id = %s "
        "order by position",
        (workspace_id, page_id),
    ).fetchall()
    by_id = {row["id"]: TreeNode(**row) for row in rows}
    for node in by_id.values():
        if node.parent_id is None:
            page.nodes.append(node)
        else:
            by_id[node.parent_id].children.append(node)
    return page


# A bullet as the API writes it, by Postgres (row_to_json writes it compact): times in UTC with
# a Z, as pydantic writes them elsewhere. page_tree_json splices in its children.
_UTC = '\'YYYY-MM-DD"T"HH24:MI:SS.US"Z"\''
_NODE_ROW = (
    "select id, page_id, parent_id, position, text, props, "
    f"to_char(created_at at time zone 'UTC', {_UTC}) as created_at, "
    f"to_char(updated_at at time zone 'UTC', {_UTC}) as updated_at from kb.nodes"
)


def page_tree_json(conn: Conn, workspace_id: UUID, page_id: UUID, page_json: bytes) -> bytes:
    """get_page_tree's page as JSON, `page_json` being its summary's with `"nodes":[]`: each
    bullet written by Postgres and nested here as text, so a page of 10,000 bullets is not
    parsed into objects only to be written out again."""
    rows = conn.execute(
        "select n.id::text, n.parent_id::text, row_to_json(n)::text as json "
        f"from ({_NODE_ROW} where workspace_id = %s and page_id = %s) n order by n.position",
        (workspace_id, page_id),
    ).fetchall()
    written = {row["id"]: row["json"] for row in rows}
    children: dict[str | None, list[str]] = {}
    for row in rows:
        children.setdefault(row["parent_id"], []).append(row["id"])
    # Written without recursion: an outline may nest deeper than Python's stack.
    out: list[str] = []
    stack: list[tuple[list[str], int]] = [(children.get(None, []), 0)]
    while stack:
        siblings, index = stack.pop()
        if index == len(siblings):
            if stack:
                out.append("]}")
            continue
        if index:
            out.append(",")
        stack.append((siblings, index + 1))
        node = siblings[index]
        out.append(written[node][:-1] + ',"children":[')
        stack.append((children.get(node, []), 0))
    nodes = "".join(out).encode()
    return page_json.replace(b'"nodes":[]', b'"nodes":[' + nodes + b"]", 1)


def list_pages(
    conn: Conn, workspace_id: UUID, *, kb_id: UUID | None = None, include_hidden: bool = False
) -> list[PageSummary]:
    """Pages newest first; archived and deleted ones only with `include_hidden`."""
    sql = f"select {PAGE_COLUMNS} from kb.pages where workspace_id = %s"
    params: list[Any] = [workspace_id]
    if kb_id is not None:
        get_knowledge_base(conn, workspace_id, kb_id)  # another workspace's base: 404
        sql += " and kb_id = %s"
        params.append(kb_id)
    if not include_hidden:
        sql += " and archived_at is null and deleted_at is null"
    sql += " order by updated_at desc, id"
    return [PageSummary(**row) for row in conn.execute(sql, params).fetchall()]


def get_node(conn: Conn, workspace_id: UUID, node_id: UUID) -> Node:
    row = _one(
        conn,
        f"select {NODE_COLUMNS} from kb.nodes where workspace_id = %s and id = %s",
        (workspace_id, node_id),
        "node",
        node_id,
    )
    return Node(**row)


def get_file(conn: Conn, workspace_id: UUID, file_id: UUID) -> File:
    row = _one(
        conn,
        f"select {FILE_COLUMNS} from kb.files where workspace_id = %s and id = %s",
        (workspace_id, file_id),
        "file",
        file_id,
    )
    return File(**row)


def list_files(conn: Conn, workspace_id: UUID, *, kb_id: UUID | None = None) -> list[File]:
    sql = f"select {FILE_COLUMNS} from kb.files where workspace_id = %s and deleted_at is null"
    params: list[Any] = [workspace_id]
    if kb_id is not None:
        get_knowledge_base(conn, workspace_id, kb_id)  # another workspace's base: 404
        sql += " and kb_id = %s"
        params.append(kb_id)
    sql += " order by created_at desc, id"
    return [File(**row) for row in conn.execute(sql, params).fetchall()]


def read_blob(conn: Conn, workspace_id: UUID, sha256: str) -> bytes:
    row = _one(
        conn,
        "select data from kb.blobs where workspace_id = %s and sha256 = %s",
        (workspace_id, sha256),
        "blob",
        sha256,
    )
    return bytes(row["data"])


def get_mail(conn: Conn, workspace_id: UUID, mail_id: UUID) -> Mail:
    row = _one(
        conn,
        f"select {MAIL_COLUMNS} from kb.mail where workspace_id = %s and id = %s",
        (workspace_id, mail_id),
        "mail",
        mail_id,
    )
    return Mail(**row)


def list_mail(conn: Conn, workspace_id: UUID, *, kb_id: UUID | None = None) -> list[Mail]:
    sql = f"select {MAIL_COLUMNS} from kb.mail where workspace_id = %s and deleted_at is null"
    params: list[Any] = [workspace_id]
    if kb_id is not None:
        get_knowledge_base(conn, workspace_id, kb_id)  # another workspace's base: 404
        sql += " and kb_id = %s"
        params.append(kb_id)
    sql += " order by sent_at desc nulls last, id"
    return [Mail(**row) for row in conn.execute(sql, params).fetchall()]


def get_tag(conn: Conn, workspace_id: UUID, tag_id: UUID) -> TagDefinition:
    row = _one(
        conn,
        f"select {TAG_COLUMNS} from kb.tag_definitions where workspace_id = %s and id = %s",
        (workspace_id, tag_id),
        "tag",
        tag_id,
    )
    return TagDefinition(**row)


def list_tags(conn: Conn, workspace_id: UUID, *, kb_id: UUID | None = None) -> list[TagDefinition]:
    sql = f"select {TAG_COLUMNS} from kb.tag_definitions where workspace_id = %s"
    params: list[Any] = [workspace_id]
    if kb_id is not None:
        get_knowledge_base(conn, workspace_id, kb_id)  # another workspace's base: 404
        sql += " and kb_id = %s"
        params.append(kb_id)
    sql += " order by name"
    return [TagDefinition(**row) for row in conn.execute(sql, params).fetchall()]


def target_kb(conn: Conn, workspace_id: UUID, kind: str, target_id: UUID) -> UUID:
    """The knowledge base of a page, file or mail; NotFound when it is not in the workspace."""
    table = {"page": "kb.pages", "file": "kb.files", "mail": "kb.mail"}[kind]
    row = _one(
        conn,
        f"select kb_id from {table} where workspace_id = %s and id = %s",
        (workspace_id, target_id),
        kind,
        target_id,
    )
    return UUID(str(row["kb_id"]))


def list_file_chunks(conn: Conn, workspace_id: UUID, file_id: UUID) -> list[dict[str, Any]]:
    """The file's extracted text as the indexer chunked it: `n`, `text`, `enabled`, in order."""
    get_file(conn, workspace_id, file_id)  # another workspace's file: 404
    return conn.execute(
        "select n, text, enabled from search.file_chunks where workspace_id = %s "
        "and file_id = %s order by n",
        (workspace_id, file_id),
    ).fetchall()


def list_mail_attachments(conn: Conn, workspace_id: UUID, mail_id: UUID) -> list[File]:
    """The files that came attached to a message, deleted ones left out."""
    get_mail(conn, workspace_id, mail_id)  # another workspace's message: 404
    rows = conn.execute(
        f"select {FILE_COLUMNS} from kb.files where workspace_id = %s and mail_id = %s "
        "and deleted_at is null order by name, id",
        (workspace_id, mail_id),
    ).fetchall()
    return [File(**row) for row in rows]


def list_tag_values(
    conn: Conn, workspace_id: UUID, target_kind: str, target_id: UUID
) -> list[dict[str, Any]]:
    """The tags set on a page, file or mail: `tag_id`, `name`, `type` and `value`, by name."""
    target_kb(conn, workspace_id, target_kind, target_id)  # another workspace's item: 404
    return conn.execute(
        "select d.id as tag_id, d.name, d.type, "
        "coalesce(to_jsonb(v.value_text), to_jsonb(v.value_number), "
        "to_jsonb(to_char(v.value_date, 'YYYY-MM-DD')), to_jsonb(v.value_bool)) as value "
        "from kb.tag_values v join kb.tag_definitions d "
        "on d.workspace_id = v.workspace_id and d.id = v.tag_id "
        "where v.workspace_id = %s and v.target_kind = %s and v.target_id = %s "
        "order by d.name",
        (workspace_id, target_kind, target_id),
    ).fetchall()
