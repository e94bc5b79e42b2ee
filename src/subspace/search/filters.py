"""What a search may see: knowledge bases, kinds, typed tag filters and visibility.

Every predicate here is shared by the lexical leg, the vector leg, hydration, grep and read,
so an item hidden from one is hidden from all; they are built from the declarations in
search/registry.py. SQL uses named parameters: %(ws)s for the workspace, %(user)s for the acting
user and %(kbs)s for the knowledge bases searched (Scope.shared); the builders that bind more
(tag filters, kinds, exclusions) return a Fragment carrying them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any
from uuid import UUID

from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic.dataclasses import dataclass as pydantic_dataclass

from subspace.db.pipeline import Later, prepared
from subspace.db.pool import Conn
from subspace.errors import InvalidInput, NotFound, TooLarge
from subspace.models import TagDefinition
from subspace.search import registry
from subspace.search.fragments import Fragment, bind
from subspace.search.options import KIND_ALIASES as KIND_ALIASES
from subspace.search.options import KINDS as KINDS
from subspace.search.options import OPS_BY_TYPE as OPS_BY_TYPE
from subspace.search.options import TAG_OPS
from subspace.tag_values import coerce_tag_value

_COMPARISONS = {"eq": "=", "neq": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_COLUMNS = {"text": "value_text", "number": "value_number", "date": "value_date",
            "boolean": "value_bool"}  # fmt: skip


TagFilterValue = StrictBool | StrictInt | StrictFloat | StrictStr


@pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class TagFilter:
    """A filter as the caller wrote it: tag name, operator, value (and a second for between).
    The operator is checked against the tag's type when the search resolves it, whose message
    names the operators that fit; the schema lists them all."""

    tag: StrictStr
    op: Annotated[StrictStr, Field(json_schema_extra={"enum": list(TAG_OPS)})]
    value: TagFilterValue
    value2: TagFilterValue | None = None


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
    answers: str = "include"  # the bullets answer runs asked with or wrote (options.ANSWERS)

    def shared(self) -> Fragment:
        """The parameters every predicate of the scope may name: %(ws)s, %(user)s, %(kbs)s."""
        return Fragment("", {"ws": self.workspace_id, "user": self.user_id, "kbs": self.kb_ids})


def normalize_kinds(kinds: list[str] | None) -> frozenset[str]:
    """The kinds a search reads: those named (every kind when none is) and their fields (a
    file's name with "file")."""
    known = registry.filter_names()  # options.KINDS, and any kind registered since
    if not kinds:
        return frozenset(registry.names())
    found = set()
    for kind in kinds:
        name = KIND_ALIASES.get(kind.strip().lower(), kind.strip().lower())
        if name not in known:
            raise InvalidInput(f"Unknown kind {kind!r}. Use any of: {', '.join(known)}.")
        found.add(name)
    return registry.with_parts(frozenset(found))


def queue_knowledge_bases(conn: Conn, workspace_id: UUID) -> Later[dict[UUID, str]]:
    """The workspace's knowledge bases, id to name, in name order; the statement queued."""
    return prepared(
        conn,
        "select id, name from kb.knowledge_bases where workspace_id = %s order by name, id",
        (workspace_id,),
        lambda rows: {row["id"]: row["name"] for row in rows},
    )


def resolve_scope(
    conn: Conn,
    workspace_id: UUID,
    user_id: UUID,
    *,
    kb_ids: list[UUID] | None,
    kinds: list[str] | None,
    tags: list[TagFilter] | None,
    max_knowledge_bases: int,
    answers: str = "include",
    bases: Later[dict[UUID, str]] | None = None,
) -> Scope:
    """Check the filters against the workspace and resolve names to ids; `bases` are the
    workspace's knowledge bases if already queued (queue_knowledge_bases).

    A knowledge base of another workspace is NotFound; an unknown tag, an operator that does
    not fit the tag's type, or a value of the wrong type is InvalidInput, never ignored.
    """
    names = (bases or queue_knowledge_bases(conn, workspace_id)).result()
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
    wanted = normalize_kinds(kinds)
    if answers == "only":  # only kinds whose rows an answer run can write
        wanted = frozenset(k for k in wanted if registry.get(k).asked_by_run is not None)
    scope = Scope(workspace_id, user_id, chosen, names, wanted, answers=answers)
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


def any_of(column: str, name: str, values: list[str]) -> Fragment:
    """`column` is one of `values`, bound as the array %(name)s.

    A single value is bound as itself (`column = %(name)s`), as Postgres reads `in ('x')`:
    the planner merges a repeated equality into one condition but counts a repeated
    `= any(array)` twice, and that lower estimate turned an index scan into a bitmap scan.
    """
    if len(values) == 1:
        return Fragment(f"{column} = %({name})s", {name: values[0]})
    return Fragment(f"{column} = any(%({name})s)", {name: values})


def page_visible(alias: str) -> str:
    """The page is neither archived, deleted nor excluded by the user."""
    return registry.get("page").item.visible(alias)


def asked_by_run(scope: Scope, spec: registry.KindSpec, alias: str) -> str:
    """`and ...` keeping the row of `spec` at `alias` as the scope's `answers` asks: without
    the rows an answer run asked with or wrote (exclude), or with only those (only); empty
    when it takes both (include) or the kind has no such rows."""
    if scope.answers == "include" or spec.asked_by_run is None:
        return ""
    if scope.answers == "only":
        return f" and coalesce({spec.asked_by_run(alias)}, false)"
    return f" and not coalesce({spec.asked_by_run(alias)}, false)"


def tag_filter(scope: Scope, alias: str, item: str, key: str = "id") -> Fragment:
    """`and ...` conditions for every tag filter on the item (page, file, mail...) at `alias`,
    with the values they bind: tag<i>_ids and tag<i>_v<n> for the scope's i-th filter."""
    parts = []
    params: dict[str, Any] = {}
    for index, tag in enumerate(scope.tags):
        ids = f"tag{index}_ids"
        values = [f"tag{index}_v{position}" for position in range(len(tag.values))]
        params[ids] = list(tag.tag_ids)
        params.update(zip(values, tag.values, strict=True))
        column = f"tv.{_COLUMNS[tag.type]}"
        v0 = f"%({values[0]})s"
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
            condition = f"{column} between {v0} and %({values[1]})s"
        else:
            condition = f"{column} {_COMPARISONS[tag.op]} {v0}"
        parts.append(
            f" and exists (select 1 from kb.tag_values tv where tv.workspace_id = "
            f"{alias}.workspace_id and tv.tag_id = any(%({ids})s) and tv.target_kind = "
            f"'{item}' and tv.target_id = {alias}.{key} and {condition})"
        )
    return Fragment("".join(parts), params)


def item_visible(scope: Scope, item: registry.ItemSpec, alias: str) -> Fragment:
    """The item at `alias` is hidden for none of its reasons and carries the scope's tags."""
    tags = tag_filter(scope, alias, item.name, item.key)
    return Fragment(f"{item.visible(alias)}{tags.sql}", tags.params)


def embedding_not_excluded(excluded: str, alias: str = "e") -> Fragment:
    """For a search.embeddings row: its source text has none of the query's -excluded words
    (`excluded`, a tsquery), so an exclusion holds on the vector leg as on the lexical one.
    Row by row, like embedding_visible."""
    parts = []
    params: dict[str, Any] = {"excluded": excluded}
    for source in registry.sources():
        specs = registry.of_source(source)
        spec, a = specs[0], specs[0].alias
        if not spec.embedded:
            continue
        kind = any_of(f"{alias}.kind", f"{source}_source_kinds", [s.name for s in specs])
        params.update(kind.params)
        parts.append(
            f"not exists (select 1 from {spec.table} {a} where {kind.sql} "
            f"and {a}.workspace_id = {alias}.workspace_id and {spec.embedding_link(a, alias)} "
            f"and {a}.{spec.tsv} @@ %(excluded)s::tsquery offset 0)"
        )
    return Fragment(" and ".join(parts), params)


def embedding_visible(scope: Scope, alias: str = "e") -> Fragment:
    """For a search.embeddings row: its page, file (and chunk) or mail is visible and tagged.

    Checked row by row as the index is walked: `offset 0` keeps the planner from turning each
    check into a hash of every visible page, file and chunk of the table, which costs tens of
    milliseconds on a large workspace while the walk only meets a few hundred rows.
    """
    parts = []
    for item in registry.items():
        wanted = [s for s in registry.of_item(item.name) if s.name in scope.kinds and s.embedded]
        if not wanted:
            continue
        i = item.alias
        visible = item_visible(scope, item, i)
        kind = any_of(f"{alias}.kind", f"{item.name}_kinds", [s.name for s in wanted])
        checks = [
            Fragment(
                f"{kind.sql} and exists (select 1 from {item.table} {i} "
                f"where {i}.workspace_id = {alias}.workspace_id and {i}.{item.key} = "
                f"{alias}.item_id and {visible.sql} offset 0)",
                bind(visible, kind),
            )
        ]
        for source in dict.fromkeys(s.source for s in wanted):
            checks.extend(_embedded_row(scope, item, registry.of_source(source), alias))
        parts.append(Fragment("(" + " and ".join(c.sql for c in checks) + ")", bind(*checks)))
    if not parts:
        return Fragment("false")
    return Fragment("(" + " or ".join(p.sql for p in parts) + ")", bind(*parts))


def _embedded_row(
    scope: Scope, item: registry.ItemSpec, specs: tuple[registry.KindSpec, ...], alias: str
) -> list[Fragment]:
    """Checks on the row of `specs` (kinds of one source) an embedding at `alias` was made
    from: its own reasons (a disabled chunk), and for sources only, not a run's."""
    spec, a = specs[0], specs[0].alias
    kind = any_of(f"{alias}.kind", f"{spec.source}_source_kinds", [s.name for s in specs])
    found = []
    where = f"{a}.workspace_id = {alias}.workspace_id and {spec.embedding_link(a, alias)}"
    if spec.row_reasons:
        exists = f"exists (select 1 from {spec.table} {a} where {where} and " + (
            f"{spec.row_visible(a)} offset 0)"
        )
        if len(registry.of_item(item.name)) == len(specs):
            found.append(Fragment(exists))
        else:  # the item has rows of other kinds, which the check must not hide
            found.append(Fragment(f"(not {kind.sql} or {exists})", kind.params))
    if scope.answers != "include" and spec.asked_by_run is not None:
        by_run = f"{where} and {spec.asked_by_run(a)}"
        run = f"exists (select 1 from {spec.table} {a} where {by_run} offset 0)"
        # Only: the scope holds no kind without such rows (resolve_scope), so every
        # embedding checked here is of this source.
        check = run if scope.answers == "only" else f"not ({kind.sql} and {run})"
        found.append(Fragment(check, kind.params))
    return found
