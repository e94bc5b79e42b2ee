"""What a search may see: knowledge bases, kinds, typed tag filters and visibility.

Every predicate here is shared by the lexical leg, the vector leg, hydration, grep and read,
so an item hidden from one is hidden from all. SQL uses named parameters: %(ws)s for the
workspace and %(user)s for the acting user, plus the tag filters' own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from subspace.commands.tags import coerce_tag_value
from subspace.db.pool import Conn
from subspace.errors import InvalidInput, NotFound, TooLarge
from subspace.models import TagDefinition
from subspace.search.options import KIND_ALIASES as KIND_ALIASES
from subspace.search.options import KINDS as KINDS
from subspace.search.options import OPS_BY_TYPE as OPS_BY_TYPE

_COMPARISONS = {"eq": "=", "neq": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_COLUMNS = {"text": "value_text", "number": "value_number", "date": "value_date",
            "boolean": "value_bool"}  # fmt: skip


@dataclass(frozen=True)
class TagFilter:
    """A filter as the caller wrote it: tag name, operator, value (and a second for between)."""

    tag: str
    op: str
    value: Any
    value2: Any = None


@dataclass(frozen=True)
class ResolvedTagFilter:
    name: str
    tag_ids: tuple[UUID, ...]
    type: str
    op: str
    values: tuple[Any, ...]


@dataclass
class Scope:
    """Everything that limits which items a search can return."""

    workspace_id: UUID
    user_id: UUID
    kb_ids: list[UUID]
    kb_names: dict[UUID, str]
    kinds: frozenset[str]
    tags: list[ResolvedTagFilter] = field(default_factory=list)
    sources_only: bool = False  # leave out the bullets answer runs asked with or wrote

    def params(self) -> dict[str, Any]:
        values: dict[str, Any] = {"ws": self.workspace_id, "user": self.user_id,
                                  "kbs": self.kb_ids}  # fmt: skip
        for index, tag in enumerate(self.tags):
            values[f"tag{index}_ids"] = list(tag.tag_ids)
            for position, value in enumerate(tag.values):
                values[f"tag{index}_v{position}"] = value
        return values


def normalize_kinds(kinds: list[str] | None) -> frozenset[str]:
    if not kinds:
        return frozenset(KINDS)
    found = set()
    for kind in kinds:
        name = KIND_ALIASES.get(kind.strip().lower(), kind.strip().lower())
        if name not in KINDS:
            raise InvalidInput(f"Unknown kind {kind!r}. Use any of: {', '.join(KINDS)}.")
        found.add(name)
    return frozenset(found)


def resolve_scope(
    conn: Conn,
    workspace_id: UUID,
    user_id: UUID,
    *,
    kb_ids: list[UUID] | None,
    kinds: list[str] | None,
    tags: list[TagFilter] | None,
    max_knowledge_bases: int,
    sources_only: bool = False,
) -> Scope:
    """Check the filters against the workspace and resolve names to ids.

    A knowledge base of another workspace is NotFound; an unknown tag, an operator that does
    not fit the tag's type, or a value of the wrong type is InvalidInput, never ignored.
    """
    rows = conn.execute(
        "select id, name from kb.knowledge_bases where workspace_id = %s order by name, id",
        (workspace_id,),
    ).fetchall()
    names = {row["id"]: row["name"] for row in rows}
    if kb_ids:
        if len(set(kb_ids)) > max_knowledge_bases:
            raise TooLarge(
                f"The search names {len(set(kb_ids))} knowledge bases; the limit is "
                f"{max_knowledge_bases} (SUBSPACE_MAX_KNOWLEDGE_BASES). Search fewer at once."
            )
        for kb_id in kb_ids:
            if kb_id not in names:
                raise NotFound("knowledge base", kb_id)
        chosen = sorted(set(kb_ids), key=lambda k: (names[k], str(k)))
    else:
        chosen = list(names)
    scope = Scope(
        workspace_id, user_id, chosen, names, normalize_kinds(kinds), sources_only=sources_only
    )
    scope.tags = [_resolve_tag(conn, workspace_id, chosen, f) for f in tags or []]
    return scope


def _resolve_tag(conn: Conn, ws: UUID, kb_ids: list[UUID], wanted: TagFilter) -> ResolvedTagFilter:
    rows = conn.execute(
        "select id, kb_id, name, type, created_at from kb.tag_definitions "
        "where workspace_id = %s and kb_id = any(%s) and name = %s",
        (ws, kb_ids, wanted.tag),
    ).fetchall()
    if not rows:
        known = conn.execute(
            "select distinct name from kb.tag_definitions where workspace_id = %s "
            "and kb_id = any(%s) order by name",
            (ws, kb_ids),
        ).fetchall()
        listing = ", ".join(r["name"] for r in known) or "none"
        raise InvalidInput(
            f"Unknown tag {wanted.tag!r} in the knowledge bases searched (known: {listing})."
        )
    types = {r["type"] for r in rows}
    if len(types) > 1:
        raise InvalidInput(
            f"Tag {wanted.tag!r} has different types in the knowledge bases searched "
            f"({', '.join(sorted(types))}); search one knowledge base at a time."
        )
    tag_type = types.pop()
    allowed = OPS_BY_TYPE[tag_type]
    if wanted.op not in allowed:
        raise InvalidInput(
            f"Operator {wanted.op!r} does not fit tag {wanted.tag!r} of type {tag_type}. "
            f"Use one of: {', '.join(allowed)}."
        )
    definition = TagDefinition(**rows[0])
    raw_values = [wanted.value] + ([wanted.value2] if wanted.op == "between" else [])
    if wanted.op == "between" and wanted.value2 is None:
        raise InvalidInput(f"Operator 'between' on tag {wanted.tag!r} needs two values.")
    values = tuple(coerce_tag_value(definition, _from_text(tag_type, v))[1] for v in raw_values)
    return ResolvedTagFilter(wanted.tag, tuple(r["id"] for r in rows), tag_type, wanted.op, values)


def _from_text(tag_type: str, value: Any) -> Any:
    """Values typed on a command line or in a URL arrive as text; read them by the tag's type."""
    if not isinstance(value, str):
        return value
    if tag_type == "number":
        try:
            return float(value)
        except ValueError:
            return value
    if tag_type == "boolean" and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


# -- SQL predicates ------------------------------------------------------------------------


def _not_excluded(alias: str, kind: str) -> str:
    return (
        f"not exists (select 1 from kb.exclusions x where x.workspace_id = {alias}.workspace_id "
        f"and x.user_id = %(user)s and x.target_kind = '{kind}' and x.target_id = {alias}.id)"
    )


def page_visible(alias: str) -> str:
    """The page is neither archived, deleted nor excluded by the user."""
    return (
        f"{alias}.archived_at is null and {alias}.deleted_at is null "
        f"and {_not_excluded(alias, 'page')}"
    )


def file_visible(alias: str) -> str:
    """The file is enabled, extracted, neither archived, deleted nor excluded."""
    return (
        f"{alias}.enabled and {alias}.status = 'ready' and {alias}.archived_at is null "
        f"and {alias}.deleted_at is null and {_not_excluded(alias, 'file')}"
    )


def mail_visible(alias: str) -> str:
    return (
        f"{alias}.archived_at is null and {alias}.deleted_at is null "
        f"and {_not_excluded(alias, 'mail')}"
    )


def node_is_source(scope: Scope, alias: str) -> str:
    """`and ...` leaving out, for a search that wants sources only, the node at `alias` when an
    answer run asked with it or wrote it (both carry the run in their props)."""
    return f" and not ({alias}.props ? 'run')" if scope.sources_only else ""


def tag_predicates(scope: Scope, alias: str, kind: str) -> str:
    """`and ...` conditions for every tag filter on the page, file or mail at `alias`."""
    parts = []
    for index, tag in enumerate(scope.tags):
        column = f"tv.{_COLUMNS[tag.type]}"
        v0, v1 = f"%(tag{index}_v0)s", f"%(tag{index}_v1)s"
        if tag.type == "text":
            lowered = f"lower({column})"
            condition = {
                "eq": f"{lowered} = lower({v0})",
                "neq": f"{lowered} <> lower({v0})",
                "contains": f"strpos({lowered}, lower({v0})) > 0",
                "not_contains": f"strpos({lowered}, lower({v0})) = 0",
                "starts_with": f"left({lowered}, length({v0})) = lower({v0})",
                "ends_with": f"right({lowered}, length({v0})) = lower({v0})",
            }[tag.op]
        elif tag.op == "between":
            condition = f"{column} between {v0} and {v1}"
        else:
            condition = f"{column} {_COMPARISONS[tag.op]} {v0}"
        parts.append(
            f" and exists (select 1 from kb.tag_values tv where tv.workspace_id = "
            f"{alias}.workspace_id and tv.tag_id = any(%(tag{index}_ids)s) and tv.target_kind = "
            f"'{kind}' and tv.target_id = {alias}.id and {condition})"
        )
    return "".join(parts)


def embedding_not_excluded(alias: str = "e") -> str:
    """For a search.embeddings row: its source text has none of the query's -excluded words
    (%(excluded)s), so an exclusion holds on the vector leg as on the lexical one. Row by row,
    like embedding_visible."""
    return (
        f"not exists (select 1 from kb.nodes n where {alias}.kind in ('node', 'memory') "
        f"and n.workspace_id = {alias}.workspace_id and n.id = {alias}.target_id "
        "and n.text_tsv @@ %(excluded)s::tsquery offset 0) "
        f"and not exists (select 1 from kb.pages p where {alias}.kind = 'page' "
        f"and p.workspace_id = {alias}.workspace_id and p.id = {alias}.target_id "
        "and p.title_tsv @@ %(excluded)s::tsquery offset 0) "
        f"and not exists (select 1 from search.file_chunks c where {alias}.kind = 'file' "
        f"and c.workspace_id = {alias}.workspace_id and c.file_id = {alias}.item_id "
        f"and c.n = nullif(split_part({alias}.ref, ':', 3), '')::int "
        "and c.text_tsv @@ %(excluded)s::tsquery offset 0) "
        f"and not exists (select 1 from kb.mail m where {alias}.kind = 'mail' "
        f"and m.workspace_id = {alias}.workspace_id and m.id = {alias}.target_id "
        "and m.mail_tsv @@ %(excluded)s::tsquery offset 0)"
    )


def _embedded_node_is_source(scope: Scope, alias: str) -> str:
    if not scope.sources_only:
        return ""
    return (
        f" and not exists (select 1 from kb.nodes n where {alias}.kind in ('node', 'memory') "
        f"and n.workspace_id = {alias}.workspace_id and n.id = {alias}.target_id "
        f"and n.props ? 'run' offset 0)"
    )


def embedding_visible(scope: Scope, alias: str = "e") -> str:
    """For a search.embeddings row: its page, file (and chunk) or mail is visible and tagged.

    Checked row by row as the index is walked: `offset 0` keeps the planner from turning each
    check into a hash of every visible page, file and chunk of the table, which costs tens of
    milliseconds on a large workspace while the walk only meets a few hundred rows.
    """
    page_kinds = [k for k in ("page", "node", "memory") if k in scope.kinds]
    parts = []
    if page_kinds:
        kinds = ", ".join(f"'{k}'" for k in page_kinds)
        parts.append(
            f"({alias}.kind in ({kinds}) and exists (select 1 from kb.pages p where "
            f"p.workspace_id = {alias}.workspace_id and p.id = {alias}.item_id and "
            f"{page_visible('p')}{tag_predicates(scope, 'p', 'page')} offset 0)"
            + _embedded_node_is_source(scope, alias)
            + ")"
        )
    if "file" in scope.kinds:
        parts.append(
            f"({alias}.kind = 'file' and exists (select 1 from kb.files f where "
            f"f.workspace_id = {alias}.workspace_id and f.id = {alias}.item_id and "
            f"{file_visible('f')}{tag_predicates(scope, 'f', 'file')} offset 0) and exists ("
            f"select 1 from search.file_chunks c where c.workspace_id = {alias}.workspace_id "
            f"and c.file_id = {alias}.item_id and c.enabled "
            f"and c.n = nullif(split_part({alias}.ref, ':', 3), '')::int offset 0))"
        )
    if "mail" in scope.kinds:
        parts.append(
            f"({alias}.kind = 'mail' and exists (select 1 from kb.mail m where "
            f"m.workspace_id = {alias}.workspace_id and m.id = {alias}.item_id and "
            f"{mail_visible('m')}{tag_predicates(scope, 'm', 'mail')} offset 0))"
        )
    return "(" + " or ".join(parts) + ")" if parts else "false"
