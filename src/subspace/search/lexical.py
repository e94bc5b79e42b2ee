"""The lexical leg: full-text search over titles, bullets, file chunks and mail.

Two queries: the first asks Postgres to turn the parsed query into tsqueries (its own output,
so always valid), the second ranks ids and scores. BM25 is exact: per source,
search.bm25_top_k (migrations 0014, 0016 and 0017) ranks documents from the query lexemes'
impact-ordered postings and verifies, with this module's SQL, only the documents that can
still enter the top.
Text is read only later, for the rows that survive fusion and the limit.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import psycopg

from subspace.db.pipeline import Later, later
from subspace.db.pool import Conn
from subspace.search import kinds as registry
from subspace.search.filters import Scope, asked_by_run, item_visible
from subspace.search.fragments import Fragment as Fragment  # re-exported: the leg builds on it
from subspace.search.fragments import bind as bind
from subspace.search.fusion import Hit
from subspace.search.options import RANKERS
from subspace.search.query import ParsedQuery
from subspace.search.typos import CANDIDATES_SQL, best_correction

CONFIG = "english"


@dataclass(frozen=True)
class Term:
    """One alternative of the query as its own tsquery, and the lexemes it matches."""

    tsquery: str
    lexemes: tuple[str, ...]


@dataclass(frozen=True)
class TsQueries:
    """The query as tsqueries: any word (recall), every clause (precision), and exclusions;
    its lexemes (for BM25) and the typo corrections applied (query lexeme -> vocabulary), with
    the words they are (the word as typed -> the workspace's word: "hydratoin" -> "hydration").

    `repeats` says how often each of `lexemes` occurs in the query (BM25 counts a repeated
    word as often as it appears: "cell cell growth" weighs cell twice); `clause_lexemes`
    holds, per clause with words, the lexemes a document matching it contains one of.
    `phrases` says whether a term is a phrase of several words: without one, a document
    holding a query lexeme matches the query, and its clauses are its lexemes' groups.
    `postings` says in how many documents of the workspace each lexeme is (all sources
    together), `spelled` which of the query's words gave it; `left_out` holds the words whose
    lexemes `within` took out of the scoring.
    """

    any_words: str
    all_words: str
    excluded: str
    lexemes: tuple[str, ...] = ()
    corrections: dict[str, str] = field(default_factory=dict)
    corrected_words: dict[str, str] = field(default_factory=dict)
    clauses: int = 0
    terms: tuple[Term, ...] = ()
    repeats: tuple[int, ...] = ()
    clause_lexemes: tuple[tuple[str, ...], ...] = ()
    phrases: bool = False
    postings: tuple[int, ...] = ()
    spelled: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()

    def within(self, max_postings: int, max_words: int = 0) -> TsQueries:
        """These queries searched on at most `max_words` lexemes and `max_postings` postings
        (0: no limit): without their commonest lexemes, as many as it takes, the rarest that
        some document holds always kept.

        Ranking sums every posting of the lexemes it cannot skip, about a microsecond each,
        and each lexeme adds its own list to the statement: a query of many common words, or
        of a whole paragraph's words, would otherwise hold a core for seconds. A lexeme left
        out finds no document and adds nothing to a score; documents with every clause no
        longer rank first (their clauses may have lost their words). Exclusions and phrases
        apply as written."""
        held = sorted(
            (i for i in range(len(self.lexemes)) if self.postings[i] > 0),
            key=lambda i: (-self.postings[i], i),
        )
        # Commonest first: past max_words, then past max_postings.
        left = held[: max(0, len(held) - max_words)] if max_words else []
        total = sum(self.postings) - sum(self.postings[i] for i in left)
        for i in held[len(left) : -1]:
            if not max_postings or total <= max_postings:
                break
            left.append(i)
            total -= self.postings[i]
        if not left:
            return self
        kept = sorted(set(range(len(self.lexemes))) - set(left))
        return dataclasses.replace(
            self,
            lexemes=tuple(self.lexemes[i] for i in kept),
            repeats=tuple(self.repeat(i) for i in kept),
            postings=tuple(self.postings[i] for i in kept),
            spelled=tuple(self.spelled[i] for i in kept),
            clauses=0,  # no every-clause group
            clause_lexemes=(),
            left_out=tuple(dict.fromkeys(self.spelled[i] for i in left)),
        )

    def repeat(self, index: int) -> int:
        """How often tsq.lexemes[index] occurs in the query (1 when not recorded)."""
        return self.repeats[index] if index < len(self.repeats) else 1

    @property
    def is_empty(self) -> bool:
        return not self.any_words


def build_tsqueries(
    conn: Conn, parsed: ParsedQuery, workspace_id: UUID | None = None, *, typos: bool = True
) -> TsQueries:
    """Let Postgres turn each term into a tsquery, then combine them with tsquery operators.

    A term of stopwords only contributes nothing; an identifier stays one phrase. With
    `typos`, a single word that no document of the workspace contains also matches the
    lexeme of the closest word its documents hold (search/typos.py). Postgres prints each
    term's tsquery, so the combinations built here from that text always parse.
    """
    return queue_tsqueries(conn, parsed, workspace_id, typos=typos).result()


def queue_tsqueries(
    conn: Conn, parsed: ParsedQuery, workspace_id: UUID | None = None, *, typos: bool = True
) -> Later[TsQueries]:
    """`build_tsqueries` as one statement, queued: the terms' lexemes and tsqueries, and
    each unknown single word's candidates among the workspace's words (search/typos.py)."""
    if parsed.is_empty:
        return Later(lambda: TsQueries("", "", ""))
    texts = list(dict.fromkeys([*parsed.alternatives, *parsed.negated]))
    typos = typos and workspace_id is not None
    # Only a single word of the query is corrected, never an excluded one.
    single = [typos and t in parsed.alternatives and " " not in t.strip() for t in texts]
    # search.fold, as for documents (migration 0009): accents folded, CJK runs as bigrams, so
    # a CJK term is the phrase of its bigrams. Identifier parts are only added to documents:
    # a whole identifier stays the phrase of its own tokens.
    # Each lexeme with its number of positions (a phrase that repeats a word counts it twice)
    # and the documents holding it in the workspace, all sources together. A single word is
    # also read as search.spelled_words reads documents' words (migration 0019: its one token
    # in the simple configuration), for typo tolerance to compare with theirs.
    sql = (
        "select t, coalesce(v.l, '{}') as l, coalesce(v.n, '{}') as n, coalesce(v.p, '{}') as p, "
        f"phraseto_tsquery('{CONFIG}', f)::text as q, typo.w, typo.candidates, "
        "typo.candidate_lexemes, typo.candidate_ndocs "
        "from unnest(%(texts)s::text[], %(single)s::boolean[]) with ordinality u(t, single, i) "
        "cross join lateral (select search.fold(t) as f offset 0) folded "
        "cross join lateral (select array_agg(w.lexeme order by w.lexeme) as l, "
        "array_agg(coalesce(array_length(w.positions, 1), 1) order by w.lexeme) as n, "
        "array_agg((select coalesce(sum(s.ndoc), 0) from search.term_stats s "
        "where s.workspace_id = %(ws)s and s.lexeme = w.lexeme) order by w.lexeme) as p "
        f"from unnest(to_tsvector('{CONFIG}', f)) w) v "
        "left join lateral (select * from (select v.l[1] as typed, (select min(s) from "
        "unnest(tsvector_to_array(to_tsvector('simple', f))) s having count(*) = 1) as w "
        "where u.single and cardinality(v.l) = 1 offset 0) word, lateral "
        f"({CANDIDATES_SQL}) found) typo on true order by i"
    )
    params = {"texts": texts, "single": single, "ws": workspace_id}
    return later(conn, sql, params, lambda rows: _tsqueries(parsed, rows))


def _tsqueries(parsed: ParsedQuery, rows: list[dict[str, Any]]) -> TsQueries:
    lexemes_of = {r["t"]: list(r["l"]) for r in rows}
    counts_of = {r["t"]: dict(zip(r["l"], r["n"], strict=True)) for r in rows}
    tsquery_of: dict[str, str] = {r["t"]: r["q"] for r in rows}
    postings_of = {w: int(n) for r in rows for w, n in zip(r["l"], r["p"], strict=True)}
    corrections: dict[str, str] = {}
    corrected_words: dict[str, str] = {}
    for r in rows:
        if r["candidates"]:
            ndocs = dict(zip(r["candidates"], map(int, r["candidate_ndocs"]), strict=True))
            found = best_correction(r["w"], ndocs)
            if found is not None:
                lexeme = r["candidate_lexemes"][r["candidates"].index(found)]
                corrections[r["l"][0]] = lexeme
                corrected_words[r["t"].strip()] = found
                postings_of[lexeme] = ndocs[found]

    def correction_of(text: str) -> str | None:
        words = lexemes_of[text]
        return corrections.get(words[0]) if len(words) == 1 else None

    def term(text: str) -> str:
        correction = correction_of(text)
        query = tsquery_of[text]
        if correction is None or not query:
            return query
        return f"( {query} ) | {tsquery_literal(correction)}"

    def matched_by(text: str) -> tuple[str, ...]:
        correction = correction_of(text)
        return (*lexemes_of[text], *([correction] if correction else []))

    terms = []
    # Every occurrence of an alternative counts, with each of its lexemes as often as its
    # text has it; a typo's correction counts as often as the word it corrects.
    repeats: dict[str, int] = {}
    # The word that gave each lexeme: a word of the query's own before a typo it corrects.
    spelled = {w: t for t in reversed(parsed.alternatives) for w in matched_by(t)}
    spelled |= {w: t for t in reversed(parsed.alternatives) for w in lexemes_of[t]}
    for text in parsed.alternatives:
        if query := term(text):
            terms.append(Term(query, matched_by(text)))
            for lexeme, count in counts_of[text].items():
                repeats[lexeme] = repeats.get(lexeme, 0) + count
            if correction := correction_of(text):
                repeats[correction] = (
                    repeats.get(correction, 0) + counts_of[text][lexemes_of[text][0]]
                )
    lexemes = tuple(sorted(repeats))
    clause_lexemes = tuple(
        tuple(sorted({w for t in c.alternatives if term(t) for w in matched_by(t)}))
        for c in parsed.clauses
        if any(term(t) for t in c.alternatives)
    )
    return TsQueries(
        either(t.tsquery for t in terms),
        " & ".join(f"( {q} )" for c in parsed.clauses if (q := either(map(term, c.alternatives)))),
        either(tsquery_of[t] for t in parsed.negated),
        lexemes,
        corrections,
        corrected_words,
        len(parsed.clauses),
        tuple(terms),
        tuple(repeats[w] for w in lexemes),
        clause_lexemes,
        # A phrase has several positions, if only one lexeme's ("kax kax", foo_foo).
        any(sum(counts_of[text].values()) > 1 for text in parsed.alternatives if term(text)),
        tuple(postings_of.get(w, 0) for w in lexemes),
        tuple(spelled[w] for w in lexemes),
    )


def either(tsqueries: Iterable[str]) -> str:
    """tsquery texts (as Postgres printed them) joined by OR, empty ones skipped; empty when
    there are none."""
    return " | ".join(f"( {q} )" for q in tsqueries if q)


BM25_K1 = 1.2  # term-frequency saturation (Lucene's default); migrations 0013 and 0016 too
BM25_B = 0.75  # strength of document-length normalisation; migrations 0013 and 0016 too
ALL_WORDS_CLAUSES = 3  # up to this many clauses, documents with every word rank first
MASK_BITS = 63  # bigint bit masks name a lexeme per bit in search.bm25_top_k's clauses


@dataclass(frozen=True)
class Source:
    """One searchable table: its tsvector and length, its kb, its visibility.

    A bullet's page and a chunk's file are looked up row by row (`offset 0` keeps the lateral
    subquery from being flattened into a join): the planner otherwise hashes every page or
    file of the workspace to visit a hundred matches, 57 ms for a rare word among 95,000
    files.
    """

    kind: str  # its BM25 source (page, node, file, mail...); nodes also yield memory
    query: Fragment  # exposes kind, target_id, item_id, kb_id, ref, tsv, len
    kinds: list[str]  # its kinds in scope: search.postings' lists to read


def _source_names(scope: Scope) -> list[str]:
    """The BM25 sources with kinds in scope."""
    return [
        source
        for source in registry.sources()
        if any(spec.name in scope.kinds for spec in registry.of_source(source))
    ]


def _sources(scope: Scope, *, candidates: bool = False) -> list[Source]:
    """A Source for each BM25 source with kinds in scope, generated from their declarations;
    with `candidates`, only the rows search.bm25_top_k names (see `_source_query`)."""
    found = []
    for source in _source_names(scope):
        declared = registry.of_source(source)
        wanted = tuple(spec for spec in declared if spec.name in scope.kinds)
        if scope.tags:  # tag filters write their own parameters into the text
            query = _source_query(scope, declared, wanted, candidates)
        else:
            sql = _untagged_source_sql(declared, wanted, scope.answers, candidates)
            query = Fragment(sql, scope.shared().params)
        found.append(Source(source, query, [spec.name for spec in wanted]))
    return found


@functools.lru_cache(maxsize=128)
def _untagged_source_sql(
    declared: tuple[registry.KindSpec, ...],
    wanted: tuple[registry.KindSpec, ...],
    answers: str,
    candidates: bool,
) -> str:
    """The text of `_source_query` for a scope without tag filters. It depends only on the
    kinds' declarations and on which answer rows the scope wants, so it is built once per
    shape: generating it from the declarations on every search cost a third of a
    millisecond, a tenth of a rare word's lexical search."""
    kinds = frozenset(spec.name for spec in wanted)
    shape = Scope(UUID(int=0), UUID(int=0), [], {}, kinds, answers=answers)
    return _source_query(shape, declared, wanted, candidates).sql


def _part_column(spec: registry.KindSpec) -> str | None:
    """The column that tells a document's parts apart among the rows of one key (a chunk's
    n), as search.postings' part holds it; None when each key is one document. A ref names
    a row by its key and that column: file:<file_id>:<n>."""
    return spec.ref[1] if len(spec.ref) == 2 and spec.ref[0] == spec.key else None


def _source_query(
    scope: Scope,
    declared: tuple[registry.KindSpec, ...],
    wanted: tuple[registry.KindSpec, ...],
    candidates: bool = False,
) -> Fragment:
    """The rows of the `wanted` kinds of one source (they share a table: `declared` are all
    of its kinds), visible and tagged, with their tsvector and length. With `candidates`,
    only the documents whose (doc_id, part) search.bm25_top_k passes as $1 and $2, each with
    the score and every-clause flag it passes for them in $5 and $6 (null when not known)."""
    spec, a, item = wanted[0], wanted[0].alias, wanted[0].item
    # The kind of each row: a node is a memory when its props say so.
    kind = f"'{spec.name}'"
    if len(wanted) > 1:
        kind = "case " + " ".join(f"when {_only(k, a)} then '{k.name}'" for k in wanted[1:])
        kind += f" else '{spec.name}' end"
    only = ""
    if len(wanted) < len(declared):
        picked = " or ".join(_only(k, a) for k in wanted)
        only = f" and {picked}" if len(wanted) == 1 else f" and ({picked})"
    rows = f"{a}.{spec.key} as target_id, {a}.{spec.item_key} as item_id"
    ranked = f"{spec.ref_sql(a)} as ref, {a}.{spec.tsv} as tsv, {a}.{spec.length} as len"
    own = "" if not spec.row_reasons else f" and {spec.row_visible(a)}"
    table = f"{spec.table} {a}"
    if candidates:
        # Looked up one by one (`offset 0` keeps the lookup from being flattened into a
        # join the planner could hash over the whole table).
        part = _part_column(spec)
        same_part = "" if part is None else f" and {a}.{part} = candidate.part"
        table = (
            "unnest($1::uuid[], $2::integer[], $5::float8[], $6::boolean[]) "
            f"candidate(doc_id, part, score, every) cross join lateral (select * from {spec.table} "
            f"{a} where {a}.workspace_id = %(ws)s and {a}.{spec.key} = candidate.doc_id"
            f"{same_part} offset 0) {a}"
        )
        ranked += ", candidate.score as given_score, candidate.every as given_every"
    if spec.in_item_table:
        visible = item_visible(scope, item, a)
        return Fragment(
            f"""
            select {kind} as kind, {rows}, {a}.{item.kb} as kb_id,
                   {ranked}
            from {table}
            where {a}.workspace_id = %(ws)s and {a}.{item.kb} = any(%(kbs)s) and {visible.sql}
            {own}{only}{asked_by_run(scope, spec, a)}""",
            bind(scope.shared(), visible),
        )
    i = item.alias
    visible = item_visible(scope, item, i)
    return Fragment(
        f"""
            select {kind} as kind, {rows}, {i}.kb_id,
                   {ranked}
            from {table}
            cross join lateral (select {i}.{item.kb} as kb_id from {item.table} {i}
                where {spec.item_link(a, i)}
                and {i}.{item.kb} = any(%(kbs)s) and {visible.sql} offset 0) {i}
            where {a}.workspace_id = %(ws)s{own}{only}{asked_by_run(scope, spec, a)}""",
        bind(scope.shared(), visible),
    )


def _only(spec: registry.KindSpec, alias: str) -> str:
    """SQL picking the rows of `spec` in the table it shares with the other kinds of its
    source ("true" for a kind alone in its table)."""
    return "true" if spec.only is None else spec.only(alias)


# ts_rank with every weight 1 and one lexeme gives sum(1/j^2, j = 1..tf) * 6/pi^2, found by a
# binary search in the sorted tsvector; since that sum is pi^2/6 - 1/(tf + 0.5) to well within
# rounding, tf is recovered exactly (checked for 1..255) without unnesting the document's
# tsvector, which costs ten times as much for a file-sized chunk. Every constant is float8:
# an untyped 1.2 is numeric in Postgres, and numeric arithmetic tripled the scoring time.
def _term_frequency(lexeme: str) -> str:
    return (
        "round(0.6079271018540267::float8 / (1::float8 "
        f"- ts_rank('{{1,1,1,1}}', s.tsv, %({lexeme})s::tsquery)) - 0.5::float8)"
    )


def _bm25_score(tsq: TsQueries) -> Fragment:
    """The BM25 score of a candidate at `s`, as search.bm25_top_k's verify SQL computes it:
    $3[i] is the weight of tsq.lexemes[i - 1], (k1 + 1) * idf * its repeats, and $4 the
    source's average length."""
    # Each lexeme adds search.bm25_part, as its postings do; one the document lacks has tf = 0
    # and adds nothing, one no document has weighs 0 and is not looked up.
    params: dict[str, Any] = {}
    terms = []
    for i, lexeme in enumerate(tsq.lexemes):
        name = f"lexeme_{i}"
        params[name] = tsquery_literal(lexeme)
        weight = f"$3[{i + 1}]"
        terms.append(
            f"case when {weight} > 0 then search.bm25_part({weight}, "
            f"{_term_frequency(name)}, s.len, $4) else 0 end"
        )
    return Fragment(" + ".join(terms) or "0", params)


def _every(tsq: TsQueries) -> Fragment:
    """Whether a candidate at `s` matches every clause, for a short lookup; false otherwise."""
    if 0 < tsq.clauses <= ALL_WORDS_CLAUSES:
        return Fragment(
            "s.tsv @@ %(all_words)s::tsquery", {"all_words": tsq.all_words or tsq.any_words}
        )
    return Fragment("false")


def clause_masks(tsq: TsQueries) -> list[int] | None:
    """Per clause, the bit mask of tsq.lexemes (bit i for lexemes[i]) a document matching the
    clause contains one of; None when documents with every clause do not rank first. With
    more lexemes than a mask holds, one mask that never rules a document out."""
    if not 0 < tsq.clauses <= ALL_WORDS_CLAUSES:
        return None
    if len(tsq.lexemes) > MASK_BITS:
        return [-1]
    index = {lexeme: i for i, lexeme in enumerate(tsq.lexemes)}
    return [sum(1 << index[w] for w in clause) for clause in tsq.clause_lexemes]


def _not_excluded(tsq: TsQueries, alias: str) -> Fragment:
    """`and not ...` for the query's -excluded words on the tsvector at `alias`; empty without."""
    if not tsq.excluded:
        return Fragment("")
    return Fragment(f"and not ({alias}.tsv @@ %(excluded)s::tsquery)", {"excluded": tsq.excluded})


def verify_sql(source: Source, tsq: TsQueries) -> Fragment:
    """search.bm25_top_k's `verify` for one source: the candidates it names ($1, $2) that
    are visible, in the scope and match the query, with whether they match every clause and
    their BM25 score (search.bm25_hit's columns).

    The score search.bm25_scan passes ($5, summed from the postings) is taken as it is, and
    without phrases a candidate, met in a query lexeme's postings, matches the query: a plain
    query's scanned candidates are checked for visibility and exclusions only, and the
    tsvector is not read (a file-sized chunk's is stored out of line)."""
    every, score, excluded = _every(tsq), _bm25_score(tsq), _not_excluded(tsq, "s")
    match = Fragment("s.tsv @@ %(any_words)s::tsquery", {"any_words": tsq.any_words})
    if not tsq.phrases:
        match = Fragment("true")
        if len(tsq.lexemes) <= MASK_BITS:  # the scan's flag is exact then (clause_masks)
            every = Fragment(f"coalesce(s.given_every, {every.sql})", every.params)
    return Fragment(
        f"""select s.kind, s.target_id, s.item_id, s.kb_id, s.ref, {every.sql} as every,
               coalesce(s.given_score, {score.sql}) as score
        from ({source.query.sql}) s
        where {match.sql} {excluded.sql}""",
        bind(source.query, every, score, excluded, match),
    )


def bm25_sql(conn: Conn, scope: Scope, tsq: TsQueries, *, cap: int) -> Fragment:
    """The exact BM25 ranking as one statement: per BM25 source in scope, search.bm25_top_k's
    best `cap` targets of each knowledge base by (contains every clause, for short lookups;
    score), then all of them in one global order.

    Each source's verify SQL goes to the function as text, its values written in by the
    driver's own quoting (psycopg's ClientCursor), so the function runs it without a round
    trip back here.
    """
    quoting = psycopg.ClientCursor(conn)
    params: dict[str, Any] = {
        "ws": scope.workspace_id,
        "lexemes": list(tsq.lexemes),
        "repeats": [tsq.repeat(i) for i in range(len(tsq.lexemes))],
        "clauses": clause_masks(tsq),
        "cap": cap,
        **{f"kb_{n}": kb_id for n, kb_id in enumerate(scope.kb_ids)},
    }
    calls = []
    for source in _sources(scope, candidates=True):
        verify = verify_sql(source, tsq)
        params[f"verify_{source.kind}"] = quoting.mogrify(verify.sql, verify.params)
        params[f"source_{source.kind}"] = source.kind
        params[f"kinds_{source.kind}"] = source.kinds
        bases = _bases_with_items(source, len(scope.kb_ids))
        params[f"weight_{source.kind}"] = source_weight(source.kind)
        calls.append(
            "select kind, target_id, item_id, kb_id, ref, every, "
            f"score * %(weight_{source.kind})s::float8 as score "
            f"from search.bm25_top_k(%(ws)s::uuid, %(source_{source.kind})s::text, "
            f"%(kinds_{source.kind})s::text[], %(lexemes)s::text[], %(repeats)s::integer[], "
            f"%(clauses)s::bigint[], %(cap)s::integer, {bases}, "
            f"%(verify_{source.kind})s::text)"
        )
    union = " union all ".join(calls)
    return Fragment(
        f"select * from ({union}) hits order by every desc, {TITLES_FIRST}, score desc, kind, "
        "target_id",
        params | {"title_kinds": title_kinds()},
    )


# Among the rows holding every word of a short lookup, titles first (KindSpec.is_title).
TITLES_FIRST = "(every and kind = any(%(title_kinds)s::text[])) desc"


def title_kinds() -> list[str]:
    return [spec.name for spec in registry.registered() if spec.is_title]


def source_weight(source: str) -> float:
    """What a BM25 score of `source` counts for beside the other sources' (KindSpec.weight)."""
    return registry.of_source(source)[0].weight


def _bases_with_items(source: Source, bases: int) -> str:
    """SQL counting the `bases` bases in scope (parameters kb_0, kb_1, ...) that hold an item of
    `source`'s kinds. The top-k stops once every base counted has its top; an empty base (a
    workspace's unused Default) would otherwise keep it reading a common word's postings to
    the end.

    One `exists` per base, its id a value the planner sees: a base it knows holds no item is
    probed in the items' index. (Joined to the list of bases, the planner takes every base
    for one as full as the fullest, and may scan all the workspace's items to find the first
    of an empty base: 20 ms for 95,603 files.)"""
    item = registry.of_source(source.kind)[0].item
    held = (
        f"(exists (select 1 from {item.table} i where i.workspace_id = %(ws)s "
        f"and i.{item.kb} = %(kb_{n})s::uuid))::integer"
        for n in range(bases)
    )
    return f"({' + '.join(held)})"


def lexical_sql(scope: Scope, tsq: TsQueries, *, cap: int = 100) -> Fragment:
    """The ts_rank_cd ranking query and its parameters: per source and knowledge base, the
    best `cap` targets by (contains every clause, for short lookups; rank), then all of them
    in one global order. It scores every matching document (BM25 uses `bm25_sql`)."""
    common = Fragment("", {"any_words": tsq.any_words, "cap": cap})
    every = _every(tsq)
    excluded = _not_excluded(tsq, "s")
    parts = []
    for source in _sources(scope):
        rows = source.query
        weight = float(source_weight(source.kind))  # a number of ours, written in as text
        score = Fragment(f"ts_rank_cd(s.tsv, %(any_words)s::tsquery) * {weight!r}::float8")
        # One row per target: the best chunk of a file stands for the file.
        parts.append(
            Fragment(
                f"""
        (select kind, target_id, item_id, kb_id, ref, every, score from (
            select *, row_number() over (
                partition by kb_id order by every desc, score desc, target_id) as kb_rank
            from (
                select distinct on (s.target_id) s.kind, s.target_id, s.item_id, s.kb_id, s.ref,
                       {every.sql} as every,
                       {score.sql} as score
                from ({rows.sql}) s
                where s.tsv @@ %(any_words)s::tsquery {excluded.sql}
                order by s.target_id, every desc, score desc, s.ref
            ) best
        ) ranked where kb_rank <= %(cap)s)""",
                bind(rows, every, excluded),
            )
        )
    union = " union all ".join(part.sql for part in parts)
    return Fragment(
        f"select * from ({union}) hits order by every desc, {TITLES_FIRST}, score desc, kind, "
        "target_id",
        bind(common, Fragment("", {"title_kinds": title_kinds()}), *parts),
    )


def tsquery_literal(lexeme: str) -> str:
    """The tsquery that matches exactly this lexeme (quoted, so no character is an operator)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def lexical_leg(
    conn: Conn, scope: Scope, tsq: TsQueries, *, cap: int, ranker: str = "bm25"
) -> list[Hit]:
    """The leg's hits, best first, at most `cap` per source and knowledge base."""
    return queue_lexical_leg(conn, scope, tsq, cap=cap, ranker=ranker).result()


def queue_lexical_leg(
    conn: Conn, scope: Scope, tsq: TsQueries, *, cap: int, ranker: str = "bm25"
) -> Later[list[Hit]]:
    """`lexical_leg`, its one statement queued."""
    if tsq.is_empty or not scope.kb_ids or not _source_names(scope):
        return Later(list)
    if ranker not in RANKERS:
        raise ValueError(f"unknown ranker {ranker!r}")
    if ranker == "bm25":
        query = bm25_sql(conn, scope, tsq, cap=cap)
    else:
        query = lexical_sql(scope, tsq, cap=cap)
    return later(conn, query.sql, query.params, _hits)


def _hits(rows: list[dict[str, Any]]) -> list[Hit]:
    return [
        Hit(
            target=(registry.target_of(r["kind"]), r["target_id"]),
            kind=r["kind"],
            ref=r["ref"],
            kb_id=r["kb_id"],
            item_id=r["item_id"],
            # Every clause matched counts above any rank (for short lookups); the fraction
            # keeps the rank order inside each group.
            score=float(r["every"]) + float(r["score"]) / (1.0 + float(r["score"])),
        )
        for r in rows
    ]
