"""Grouping fused results: the best row of each page, with an exact count of the rest, and a
mail's attachment folded into its mail when both were found."""

from __future__ import annotations

from uuid import UUID

from subspace.db.pool import Conn
from subspace.search import registry
from subspace.search.filters import Scope, asked_by_run
from subspace.search.fusion import Fused, TargetKey
from subspace.search.lexical.terms import TsQueries

GROUPED_ITEM = "page"  # the item whose rows are grouped (its name)


def page_of(item: Fused) -> UUID | None:
    """The page a fused row belongs to (a page's title or one of its bullets); None for a
    row of another item (a file, a mail)."""
    spec = registry.get(item.target[0])
    if spec.item.name != GROUPED_ITEM:
        return None
    return item.target[1] if spec.in_item_table else item.best_hit.item_id


def group_by_page(conn: Conn, scope: Scope, fused: list[Fused], tsq: TsQueries) -> list[Fused]:
    """Keep the best row of each page; count exactly how many other matches it has."""
    kept: list[Fused] = []
    on_page: dict[UUID, set[TargetKey]] = {}
    for item in fused:
        page_id = page_of(item)
        if page_id is None:
            kept.append(item)
            continue
        if page_id not in on_page:
            on_page[page_id] = set()
            kept.append(item)
        on_page[page_id].add(item.target)
    if on_page and tsq.any_words:
        # Lexical matches beyond the legs' windows count too: the count is exact.
        params = {"ws": scope.workspace_id, "pages": list(on_page), "q": tsq.any_words}
        for r in conn.execute(_matches_on_pages(scope), params):
            on_page[r["page_id"]].add((r["kind"], r["id"]))
    for item in kept:
        page_id = page_of(item)
        if page_id is not None:
            item.more_on_page = len(on_page[page_id]) - 1
    return kept


def _matches_on_pages(scope: Scope) -> str:
    """SQL: every row of the pages %(pages)s whose text matches %(q)s and that the search
    would show (its kinds, its answers filter), as (kind, id, page_id) with the target it
    counts as: one SELECT per BM25 source of the page's kinds in scope (a memory is a node,
    and shares its table)."""
    parts = []
    for source in dict.fromkeys(spec.source for spec in registry.of_item(GROUPED_ITEM)):
        declared = registry.of_source(source)
        wanted = [spec for spec in declared if spec.name in scope.kinds]
        if not wanted:
            continue
        spec = declared[0]
        a = spec.alias
        only = ""
        if len(wanted) < len(declared):
            only = (
                " and ("
                + " or ".join(f"coalesce({k.only(a)}, false)" if k.only else "true" for k in wanted)
                + ")"
            )
        parts.append(
            f"select '{spec.target_kind}' as kind, {a}.{spec.key} as id, "
            f"{a}.{spec.item_key} as page_id from {spec.table} {a} where {a}.workspace_id = "
            f"%(ws)s and {a}.{spec.item_key} = any(%(pages)s) and {a}.{spec.tsv} @@ %(q)s::tsquery"
            f"{only}{asked_by_run(scope, spec, a)}"
        )
    return (
        " union all ".join(parts)
        or "select null::text as kind, null::uuid as id, null::uuid as page_id where false"
    )


def fold_attachments(conn: Conn, workspace_id: UUID, fused: list[Fused]) -> list[Fused]:
    """The rows without the attachments whose mail is among them, the mail taking the better
    place of the two: a message and the delivery report attached to it are one message to
    its reader ("recipient reached disk quota" found the report first, then its mail)."""
    files = [item.target[1] for item in fused if item.target[0] == "file"]
    if not files or not any(item.target[0] == "mail" for item in fused):
        return fused
    rows = conn.execute(
        "select id, mail_id from kb.files where workspace_id = %s and id = any(%s) "
        "and mail_id is not null",
        (workspace_id, files),
    ).fetchall()
    mail_of = {("file", r["id"]): ("mail", r["mail_id"]) for r in rows}
    found = {item.target: item for item in fused}
    folded: list[Fused] = []
    placed: set[TargetKey] = set()
    for item in fused:
        shown = found.get(mail_of.get(item.target, item.target), item)
        if shown.target not in placed:
            placed.add(shown.target)
            folded.append(shown)
    return folded
