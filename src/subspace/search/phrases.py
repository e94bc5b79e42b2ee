"""Quoted phrases mean phrases, identifiers are exact first: a row of any leg (the vector leg's
too) is kept only when its target holds every quoted phrase, its words in that order, as the
lexical leg matches them (stemmed, accents folded); rows holding the query's identifiers whole
come first. A target holds a phrase in any of its searched texts: a page in its title, a bullet
in its text, a file in its name or any chunk, a mail in its subject or body."""

from __future__ import annotations

from uuid import UUID

from subspace.db.pool import Conn
from subspace.search import registry
from subspace.search.fusion import Fused
from subspace.search.lexical.terms import CONFIG


def holding_phrases(
    conn: Conn, workspace_id: UUID, fused: list[Fused], phrases: tuple[str, ...]
) -> list[Fused]:
    """The fused rows whose targets hold every phrase (ParsedQuery.quoted), in their order;
    all of them when the query quotes none. Each phrase is analysed as the lexical leg
    analyses a term (search.fold, then phraseto_tsquery), whichever legs ran."""
    if not phrases or not fused:
        return fused
    row = conn.execute(
        "select string_agg(format('( %%s )', q), ' & ') as q from (select "
        "phraseto_tsquery(%s::regconfig, search.fold(p))::text as q "
        "from unnest(%s::text[]) p) t where q <> ''",
        (CONFIG, list(phrases)),
    ).fetchone()
    tsquery = row["q"] if row is not None else None
    if not tsquery:
        return fused  # phrases of stopwords only: nothing to hold
    wanted: dict[str, set[UUID]] = {}
    for item in fused:
        kind, ident = item.target
        wanted.setdefault(kind, set()).add(ident)
    held: set[tuple[str, UUID]] = set()
    # Kinds sharing a table, key and tsvector (a bullet and a memory) are read once.
    asked: set[tuple[str, str, str, str]] = set()
    for spec in registry.registered():
        ids = wanted.get(spec.target_kind)
        shape = (spec.target_kind, spec.table, spec.key, spec.tsv)
        if not ids or shape in asked:
            continue
        asked.add(shape)
        rows = conn.execute(
            f"select distinct {spec.key} as id from {spec.table} "
            f"where workspace_id = %s and {spec.key} = any(%s) and {spec.tsv} @@ %s::tsquery",
            (workspace_id, list(ids), tsquery),
        ).fetchall()
        held.update((spec.target_kind, row["id"]) for row in rows)
    return [item for item in fused if item.target in held]


def identifiers_first(
    conn: Conn, workspace_id: UUID, fused: list[Fused], identifiers: tuple[str, ...]
) -> list[Fused]:
    """The rows whose targets hold every identifier of the query whole (ParsedQuery.identifiers:
    CVE-2022-21658, E0382) first, then the rest, each group in its order: a row holding the exact
    identifier is not out-voted by rows holding only its parts or only a near meaning."""
    if not identifiers:
        return fused
    holding = holding_phrases(conn, workspace_id, fused, identifiers)
    held = {item.target for item in holding}
    return holding + [item for item in fused if item.target not in held]
