"""The lexical leg: full-text search over titles, bullets, file chunks and mail.

Two queries: the first asks Postgres to turn the parsed query into tsqueries (its own output,
so always valid), the second ranks ids and scores on the GIN-indexed tsvector columns. Text
is read only later, for the rows that survive fusion and the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from subspace.db.pool import Conn
from subspace.search.filters import Scope, file_visible, mail_visible, page_visible, tag_predicates
from subspace.search.fusion import Hit
from subspace.search.query import ParsedQuery

CONFIG = "english"


@dataclass(frozen=True)
class TsQueries:
    """The query as tsqueries: any word (recall), every clause (precision), and exclusions."""

    any_words: str
    all_words: str
    excluded: str

    @property
    def is_empty(self) -> bool:
        return not self.any_words


def build_tsqueries(conn: Conn, parsed: ParsedQuery) -> TsQueries:
    """Let Postgres turn each term into a tsquery and combine them with its operators.

    A term of stopwords only contributes nothing; an identifier stays one phrase.
    """
    if parsed.is_empty:
        return TsQueries("", "", "")
    params: list[str] = []

    def term(text: str) -> str:
        params.append(text)
        return f"phraseto_tsquery('{CONFIG}', %s)"

    def any_of(texts: list[str]) -> str:
        return "(" + " || ".join(term(t) for t in texts) + ")"

    any_words = any_of(parsed.alternatives)
    all_words = " && ".join(any_of(list(c.alternatives)) for c in parsed.clauses)
    excluded = any_of(list(parsed.negated)) if parsed.negated else "''::tsquery"
    row = conn.execute(
        f"select ({any_words})::text as any_words, ({all_words})::text as all_words, "
        f"({excluded})::text as excluded",
        params,
    ).fetchone()
    assert row is not None
    return TsQueries(row["any_words"], row["all_words"], row["excluded"])


@dataclass(frozen=True)
class Source:
    """One searchable table: how to reach its tsvector, its kb, its visibility."""

    kind: str  # the kind of its hits (nodes also yield memory)
    sql: str  # select ... from ... where <visibility>; must expose tsv, kb_id, target_id, ...


def _sources(scope: Scope) -> list[Source]:
    found = []
    if "page" in scope.kinds:
        found.append(
            Source(
                "page",
                f"""
            select 'page' as kind, p.id as target_id, p.id as item_id, p.kb_id,
                   'page:' || p.id as ref, p.title_tsv as tsv
            from kb.pages p
            where p.workspace_id = %(ws)s and p.kb_id = any(%(kbs)s) and {page_visible("p")}
            {tag_predicates(scope, "p", "page")}""",
            )
        )
    node_kinds = {"node", "memory"} & scope.kinds
    if node_kinds:
        memory = "n.props->'memory' = 'true'::jsonb"
        only = (
            ""
            if len(node_kinds) == 2
            else (
                f"and {memory}" if "memory" in node_kinds else f"and not coalesce({memory}, false)"
            )
        )
        found.append(
            Source(
                "node",
                f"""
            select case when {memory} then 'memory' else 'node' end as kind,
                   n.id as target_id, n.page_id as item_id, p.kb_id,
                   'node:' || n.id as ref, n.text_tsv as tsv
            from kb.nodes n
            join kb.pages p on p.workspace_id = n.workspace_id and p.id = n.page_id
            where n.workspace_id = %(ws)s and p.kb_id = any(%(kbs)s) and {page_visible("p")}
            {tag_predicates(scope, "p", "page")} {only}""",
            )
        )
    if "file" in scope.kinds:
        found.append(
            Source(
                "file",
                f"""
            select 'file' as kind, f.id as target_id, f.id as item_id, f.kb_id,
                   'file:' || f.id || ':' || c.n as ref, c.text_tsv as tsv
            from search.file_chunks c
            join kb.files f on f.workspace_id = c.workspace_id and f.id = c.file_id
            where c.workspace_id = %(ws)s and f.kb_id = any(%(kbs)s) and c.enabled
            and {file_visible("f")} {tag_predicates(scope, "f", "file")}""",
            )
        )
    if "mail" in scope.kinds:
        found.append(
            Source(
                "mail",
                f"""
            select 'mail' as kind, m.id as target_id, m.id as item_id, m.kb_id,
                   'mail:' || m.id as ref, m.mail_tsv as tsv
            from kb.mail m
            where m.workspace_id = %(ws)s and m.kb_id = any(%(kbs)s) and {mail_visible("m")}
            {tag_predicates(scope, "m", "mail")}""",
            )
        )
    return found


def lexical_sql(scope: Scope, tsq: TsQueries) -> str:
    """The ranking query: per source and knowledge base, the best `cap` targets by
    (contains every clause, rank), then all of them in one global order."""
    excluded = "and not (s.tsv @@ %(excluded)s::tsquery)" if tsq.excluded else ""
    parts = []
    for source in _sources(scope):
        # One row per target: the best chunk of a file stands for the file.
        parts.append(f"""
        (select kind, target_id, item_id, kb_id, ref, every, score from (
            select *, row_number() over (
                partition by kb_id order by every desc, score desc, target_id) as kb_rank
            from (
                select distinct on (s.target_id) s.kind, s.target_id, s.item_id, s.kb_id, s.ref,
                       s.tsv @@ %(all_words)s::tsquery as every,
                       ts_rank_cd(s.tsv, %(any_words)s::tsquery) as score
                from ({source.sql}) s
                where s.tsv @@ %(any_words)s::tsquery {excluded}
                order by s.target_id, every desc, score desc, s.ref
            ) best
        ) ranked where kb_rank <= %(cap)s)""")
    union = " union all ".join(parts)
    return f"select * from ({union}) hits order by every desc, score desc, kind, target_id"


def lexical_leg(conn: Conn, scope: Scope, tsq: TsQueries, *, cap: int) -> list[Hit]:
    """The leg's hits, best first, at most `cap` per source and knowledge base."""
    if tsq.is_empty or not scope.kb_ids:
        return []
    params: dict[str, Any] = scope.params() | {
        "any_words": tsq.any_words,
        "all_words": tsq.all_words or tsq.any_words,
        "excluded": tsq.excluded,
        "cap": cap,
    }
    rows = conn.execute(lexical_sql(scope, tsq), params).fetchall()
    return [
        Hit(
            target=("node" if r["kind"] == "memory" else r["kind"], r["target_id"]),
            kind=r["kind"],
            ref=r["ref"],
            kb_id=r["kb_id"],
            item_id=r["item_id"],
            # Every clause matched counts above any rank, so short lookups favour documents
            # with all their words; the fraction keeps the rank order inside each group.
            score=float(r["every"]) + float(r["score"]) / (1.0 + float(r["score"])),
        )
        for r in rows
    ]
