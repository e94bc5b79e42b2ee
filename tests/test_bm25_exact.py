"""The lexical leg's BM25 top-k equals a brute-force BM25 over a random corpus, filters and all.

The corpus has a Zipf vocabulary of made-up words (the english stemmer keeps them whole, and
none is a stopword) in page titles, bullets, memories, file chunks and mail across three
knowledge bases, with hidden items of every kind. The brute force reads each document's
lexemes and positions from its tsvector and the statistics tables, and ranks in Python.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from uuid import UUID

import psycopg
import pytest

from subspace.context import Context
from subspace.db.pool import Conn
from subspace.runtime import Database
from subspace.search import lexical
from subspace.search.filters import TagFilter, resolve_scope
from subspace.search.kinds import filter_names, with_parts
from subspace.search.lexical import (
    ALL_WORDS_CLAUSES,
    BM25_B,
    BM25_K1,
    build_tsqueries,
    source_weight,
    title_kinds,
)
from subspace.search.query import parse_query

SEED = 15
CAP = 100  # targets per source and knowledge base, the leg's window at its default depth
SMALL_CAP = 7  # many more rounds of reading and scoring per query
SYLLABLES = ["ka", "lo", "mi", "ru", "te", "zo", "pa", "ni", "vel", "dor", "sam", "bri"]
VOCABULARY = 600  # distinct words
ZIPF_S = 1.07  # word frequency ~ 1 / rank^s, as in English text


@dataclass
class Doc:
    """One searchable row as the brute force sees it."""

    source: str
    kind: str
    target_id: UUID
    part: int
    item: str  # page, file or mail: what carries kb, tags, exclusions and hiding
    item_id: UUID
    kb_id: UUID
    hidden: bool
    positions: dict[str, list[int]] = field(default_factory=dict)
    length: int = 0


@dataclass
class Corpus:
    kbs: list[UUID]
    docs: list[Doc]
    words: list[str]
    tagged: set[UUID]  # items carrying topic = red
    texts: list[str]  # bullet texts, for phrases


def _uuid(rng: random.Random) -> UUID:
    """A random id from the seeded generator: ties rank by id, so the test repeats exactly."""
    return UUID(int=rng.getrandbits(128), version=4)


def _words(rng: random.Random) -> list[str]:
    found: set[str] = set()
    while len(found) < VOCABULARY:
        found.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) + "x")
    return sorted(found)


def _text(rng: random.Random, words: list[str], weights: list[float], low: int, high: int) -> str:
    return " ".join(rng.choices(words, weights, k=rng.randint(low, high)))


def _build(conn: Conn, cx: Context) -> Corpus:
    rng = random.Random(SEED)
    ws, user = cx.actor.workspace_id, cx.actor.user_id
    default = conn.execute(
        "select id from kb.knowledge_bases where workspace_id = %s", (ws,)
    ).fetchone()
    assert default is not None
    kbs = [default["id"]]
    for name in ("second", "third"):
        row = conn.execute(
            "insert into kb.knowledge_bases (workspace_id, name) values (%s, %s) returning id",
            (ws, name),
        ).fetchone()
        assert row is not None
        kbs.append(row["id"])
    words = _words(rng)
    weights = [1 / (rank + 1) ** ZIPF_S for rank in range(len(words))]

    def text(low: int, high: int) -> str:
        return _text(rng, words, weights, low, high)

    # Pages: 5% archived, 3% deleted, 2% excluded by the user; a third tagged red.
    pages = [
        (_uuid(rng), rng.choice(kbs), text(1, 6), rng.random() < 0.05, rng.random() < 0.03)
        for _ in range(400)
    ]
    conn.execute(
        "insert into kb.pages (workspace_id, id, kb_id, title, archived_at, deleted_at) "
        "select %s, u.id, u.kb, u.title, case when u.a then now() end, "
        "case when u.d then now() end "
        "from unnest(%s::uuid[], %s::uuid[], %s::text[], %s::bool[], %s::bool[]) "
        "u(id, kb, title, a, d)",
        (ws, *map(list, zip(*pages, strict=True))),
    )
    excluded = {p[0] for p in pages if rng.random() < 0.02}
    # Bullets: short ones first, so the impact basis (the first rows' average length) is
    # well below the final average and the reader's bound must allow for it.
    nodes: list[tuple[UUID, UUID, str, str]] = []
    for low, high, count in ((1, 3, 400), (1, 40, 2100)):
        batch = [
            (_uuid(rng), rng.choice(pages)[0], text(low, high),
             json.dumps({"memory": True} if rng.random() < 0.05 else {}))
            for _ in range(count)
        ]  # fmt: skip
        conn.execute(
            "insert into kb.nodes (workspace_id, id, page_id, position, text, props) "
            "select %s, u.id, u.page, 0, u.text, u.props "
            "from unnest(%s::uuid[], %s::uuid[], %s::text[], %s::jsonb[]) u(id, page, text, props)",
            (ws, *map(list, zip(*batch, strict=True))),
        )
        nodes += batch
    conn.execute(
        "insert into kb.blobs (workspace_id, sha256, size, data) values (%s, 'x', 1, 'x')", (ws,)
    )
    # Files: 4% disabled, 4% still processing, 4% archived; 3% of chunks disabled.
    files = [
        (_uuid(rng), rng.choice(kbs), rng.random() < 0.04, rng.random() < 0.04, rng.random() < 0.04)
        for _ in range(150)
    ]
    conn.execute(
        "insert into kb.files (workspace_id, id, kb_id, name, blob_sha256, size, status, "
        "enabled, archived_at) select %s, u.id, u.kb, 'f', 'x', 1, "
        "case when u.processing then 'processing' else 'ready' end, not u.disabled, "
        "case when u.archived then now() end "
        "from unnest(%s::uuid[], %s::uuid[], %s::bool[], %s::bool[], %s::bool[]) "
        "u(id, kb, disabled, processing, archived)",
        (ws, *map(list, zip(*files, strict=True))),
    )
    chunks = [
        (f[0], n, text(20, 120), rng.random() < 0.03)
        for f in files
        for n in range(rng.randint(1, 6))
    ]
    conn.execute(
        "insert into search.file_chunks (workspace_id, file_id, n, text, enabled) "
        "select %s, u.f, u.n, u.text, not u.off "
        "from unnest(%s::uuid[], %s::int[], %s::text[], %s::bool[]) u(f, n, text, off)",
        (ws, *map(list, zip(*chunks, strict=True))),
    )
    mails = [
        (_uuid(rng), rng.choice(kbs), text(1, 8), text(5, 60), rng.random() < 0.05)
        for _ in range(250)
    ]
    conn.execute(
        "insert into kb.mail (workspace_id, id, kb_id, message_id, subject, body_text, "
        "raw_sha256, deleted_at) select %s, u.id, u.kb, u.id::text, u.subject, u.body, 'x', "
        "case when u.d then now() end "
        "from unnest(%s::uuid[], %s::uuid[], %s::text[], %s::text[], %s::bool[]) "
        "u(id, kb, subject, body, d)",
        (ws, *map(list, zip(*mails, strict=True))),
    )
    excluded |= {f[0] for f in files if rng.random() < 0.02}
    for kind, ids in (("page", [p[0] for p in pages]), ("file", [f[0] for f in files])):
        conn.execute(
            "insert into kb.exclusions (workspace_id, user_id, target_kind, target_id) "
            "select %s, %s, %s, unnest(%s::uuid[])",
            (ws, user, kind, [i for i in ids if i in excluded]),
        )
    # A text tag "topic" in every knowledge base; a third of the pages, files and mail red.
    tagged: set[UUID] = set()
    for kb in kbs:
        tag = conn.execute(
            "insert into kb.tag_definitions (workspace_id, kb_id, name, type) "
            "values (%s, %s, 'topic', 'text') returning id",
            (ws, kb),
        ).fetchone()
        assert tag is not None
        for kind, items in (("page", pages), ("file", files), ("mail", mails)):
            red = [i[0] for i in items if i[1] == kb and rng.random() < 0.33]
            tagged.update(red)
            conn.execute(
                "insert into kb.tag_values (workspace_id, tag_id, target_kind, target_id, "
                "value_text) select %s, %s, %s, unnest(%s::uuid[]), 'red'",
                (ws, tag["id"], kind, red),
            )
    conn.commit()

    page_of = {p[0]: p for p in pages}
    file_of = {f[0]: f for f in files}
    docs: dict[tuple[str, UUID, int], Doc] = {}
    for p in pages:
        docs["page", p[0], 0] = Doc("page", "page", p[0], 0, "page", p[0], p[1],
                                    p[3] or p[4] or p[0] in excluded)  # fmt: skip
    for node_id, page_id, _, props in nodes:
        p = page_of[page_id]
        kind = "memory" if "memory" in props else "node"
        docs["node", node_id, 0] = Doc("node", kind, node_id, 0, "page", page_id, p[1],
                                       p[3] or p[4] or page_id in excluded)  # fmt: skip
    for file_id, n, _, off in chunks:
        f = file_of[file_id]
        hidden = f[2] or f[3] or f[4] or file_id in excluded or off
        docs["file", file_id, n] = Doc("file", "file", file_id, n, "file", file_id, f[1], hidden)
    for m in mails:
        docs["mail", m[0], 0] = Doc("mail", "mail", m[0], 0, "mail", m[0], m[1], m[4])
        docs["mail_subject", m[0], 0] = Doc("mail_subject", "mail_subject", m[0], 0, "mail",
                                            m[0], m[1], m[4])  # fmt: skip
    for f in files:
        hidden = f[2] or f[3] or f[4] or f[0] in excluded
        docs["file_name", f[0], 0] = Doc("file_name", "file_name", f[0], 0, "file", f[0], f[1],
                                         hidden)  # fmt: skip
    for source, table, key, part, tsv, length in (
        ("page", "kb.pages", "id", "0", "title_tsv", "title_len"),
        ("node", "kb.nodes", "id", "0", "text_tsv", "text_len"),
        ("file", "search.file_chunks", "file_id", "n", "text_tsv", "text_len"),
        ("mail", "kb.mail", "id", "0", "mail_tsv", "mail_len"),
        ("file_name", "kb.files", "id", "0", "name_tsv", "name_len"),
        ("mail_subject", "kb.mail", "id", "0", "subject_tsv", "subject_len"),
    ):
        for row in conn.execute(
            f"select {key} as k, {part} as part, {length} as len, u.lexeme, u.positions "
            f"from {table} t left join lateral unnest(t.{tsv}) u on true "
            "where t.workspace_id = %s",
            (ws,),
        ):
            doc = docs[source, row["k"], row["part"]]
            doc.length = row["len"]
            if row["lexeme"] is not None:
                doc.positions[row["lexeme"]] = list(row["positions"] or [0])
    return Corpus(kbs, list(docs.values()), words, tagged, [n[2] for n in nodes])


@dataclass
class Filters:
    kinds: list[str] | None = None
    kb_ids: list[UUID] | None = None
    red: bool = False


def _lexemes(conn: Conn, text: str) -> dict[str, int]:
    """The lexemes of `text` with their number of occurrences, as the english config has them."""
    return {
        r["lexeme"]: len(r["positions"] or [0])
        for r in conn.execute("select * from unnest(to_tsvector('english', %s))", (text,))
    }


def _sequence(conn: Conn, text: str) -> list[str]:
    """The lexemes of `text` in the order they occur, repeats included (a phrase's <->)."""
    return [
        r["lexeme"]
        for r in conn.execute(
            "select u.lexeme from unnest(to_tsvector('english', %s)) u, unnest(u.positions) p "
            "order by p",
            (text,),
        )
    ]


def _phrase_at(doc: Doc, lexemes: list[str]) -> bool:
    """The lexemes occur one after another in the document (a phrase tsquery's <->)."""
    if not all(w in doc.positions for w in lexemes):
        return False
    return any(
        all(start + i in doc.positions[w] for i, w in enumerate(lexemes))
        for start in doc.positions[lexemes[0]]
    )


def _quantized(part: float) -> float:
    """A lexeme's part of a score as search.bm25_part rounds it: to a multiple of 2^-36."""
    return round(part * 2.0**36) / 2.0**36


def brute_force(
    conn: Conn, cx: Context, corpus: Corpus, query: str, filters: Filters, cap: int
) -> list[tuple[str, UUID, UUID, bool, float]]:
    """(kind, target id, kb, every clause, score) in the leg's order, computed here."""
    parsed = parse_query(query)
    # Each alternative as the lexemes a document must have in a row (one for a word).
    clauses = [[_sequence(conn, alt) for alt in c.alternatives] for c in parsed.clauses]
    repeats: Counter[str] = Counter()
    for alt in parsed.alternatives:
        repeats.update(_lexemes(conn, alt))
    negated = [_sequence(conn, t) for t in parsed.negated]
    stats = {
        r["source"]: (r["ndocs"], r["total_len"])
        for r in conn.execute(
            "select * from search.source_stats where workspace_id = %s", (cx.actor.workspace_id,)
        )
    }
    df = {
        (r["source"], r["lexeme"]): r["ndoc"]
        for r in conn.execute(
            "select * from search.term_stats where workspace_id = %s and lexeme = any(%s)",
            (cx.actor.workspace_id, list(repeats)),
        )
    }
    kinds = with_parts(frozenset(filters.kinds or filter_names()))
    kbs = set(filters.kb_ids or corpus.kbs)
    best: dict[tuple[str, UUID], tuple[bool, float, Doc]] = {}
    for doc in corpus.docs:
        if doc.hidden or doc.kind not in kinds or doc.kb_id not in kbs:
            continue
        if filters.red and doc.item_id not in corpus.tagged:
            continue
        if not any(_phrase_at(doc, alt) for c in clauses for alt in c if alt):
            continue
        if any(_phrase_at(doc, t) for t in negated if t):
            continue
        ndocs, total = stats[doc.source]
        avgdl = max(total / ndocs, 1.0)
        score = 0.0
        for lexeme, m in sorted(repeats.items()):
            tf = len(doc.positions.get(lexeme, []))
            n = df.get((doc.source, lexeme), 0)
            if tf and n:
                idf = math.log(1 + (ndocs - n + 0.5) / (n + 0.5))
                norm = BM25_K1 * (1 - BM25_B + BM25_B * doc.length / avgdl)
                score += _quantized(m * idf * tf * (BM25_K1 + 1) / (tf + norm))
        score *= source_weight(doc.source)  # a title counts for more (KindSpec.weight)
        worded = [c for c in clauses if any(c)]
        every = 0 < len(clauses) <= ALL_WORDS_CLAUSES and all(
            any(_phrase_at(doc, alt) for alt in c if alt) for c in worded
        )
        key = (doc.source, doc.target_id)
        if key not in best or (every, score) > best[key][:2]:
            best[key] = (every, score, doc)
    ranked: dict[tuple[str, UUID], list[tuple[bool, float, Doc]]] = {}
    for (source, _), entry in best.items():
        ranked.setdefault((source, entry[2].kb_id), []).append(entry)
    found = []
    for entries in ranked.values():
        entries.sort(key=lambda e: (not e[0], -e[1], e[2].target_id))
        found += entries[:cap]
    titles = set(title_kinds())  # among the rows with every clause, titles first
    found.sort(key=lambda e: (not e[0], not (e[0] and e[2].kind in titles), -e[1], e[2].kind,
                              e[2].target_id))  # fmt: skip
    return [(d.kind, d.target_id, d.kb_id, every, score) for every, score, d in found]


def leg(
    conn: Conn, cx: Context, query: str, filters: Filters, cap: int
) -> list[tuple[str, UUID, UUID, bool, float]]:
    scope = resolve_scope(
        conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=filters.kb_ids,
        kinds=filters.kinds, tags=[TagFilter("topic", "eq", "red")] if filters.red else None,
        max_knowledge_bases=50,
    )  # fmt: skip
    tsq = build_tsqueries(conn, parse_query(query))
    sql = lexical.bm25_sql(conn, scope, tsq, cap=cap)
    return [
        (r["kind"], r["target_id"], r["kb_id"], r["every"], r["score"])
        for r in conn.execute(sql.sql, sql.params)
    ]


def _queries(corpus: Corpus, count: int) -> list[tuple[str, Filters]]:
    rng = random.Random(SEED + 1)
    weights = [1 / (rank + 1) ** ZIPF_S for rank in range(len(corpus.words))]
    variants = [
        Filters(),
        Filters(kinds=["node"]),
        Filters(kinds=["file", "mail"]),
        Filters(kinds=["memory", "page"]),
        Filters(kb_ids=corpus.kbs[:2]),
        Filters(red=True),
    ]
    found = []
    for i in range(count):
        size = rng.choice([1, 1, 2, 2, 3, 4, 6, 9, 12])
        words = rng.choices(corpus.words, weights, k=size)
        if size > 1 and rng.random() < 0.3:  # a word said twice
            words.append(rng.choice(words))
        if i % 5 == 3:  # a word every document of a third of the corpus has, left out
            words.append("-" + rng.choice(corpus.words[:3]))
        if i % 7 == 4:  # two neighbours from a bullet, as a phrase
            tokens = rng.choice([t for t in corpus.texts if " " in t]).split()
            at = rng.randrange(len(tokens) - 1)
            words.append(f'"{tokens[at]} {tokens[at + 1]}"')
        rng.shuffle(words)
        found.append((" ".join(words), variants[i % len(variants)]))
    return found


def _mismatch(
    conn: Conn, cx: Context, corpus: Corpus, query: str, filters: Filters, cap: int
) -> str | None:
    """Why the leg and the brute force disagree on this query, or None when they agree."""
    got = leg(conn, cx, query, filters, cap)
    want = brute_force(conn, cx, corpus, query, filters, cap)
    if [g[:4] for g in got] != [w[:4] for w in want]:
        at = next(
            (i for i, (g, w) in enumerate(zip(got, want, strict=False)) if g[:4] != w[:4]), None
        )
        seen = f"{got[at]} where {want[at]} was expected" if at is not None else ""
        return f"{query!r} {filters}, cap {cap}: {len(got)} rows, expected {len(want)}; {seen}"
    for g, w in zip(got, want, strict=True):
        if not math.isclose(g[4], w[4], rel_tol=1e-9):
            return f"{query!r} {filters}: score {g[4]} for {g[1]}, expected {w[4]}"
    return None


@pytest.fixture
def corpus(database: Database, cx: Context) -> Corpus:
    with database.pool.connection() as conn:
        built = _build(conn, cx)
    # As autovacuum would: the planner's statistics for the new rows.
    with psycopg.connect(database.dsn, autocommit=True) as maintenance:
        maintenance.execute("analyze")
    # The impacts were computed with a basis below the average length the scores use.
    with database.pool.connection() as conn:
        drift = conn.execute(
            "select b.avgdl as basis, s.total_len::float8 / s.ndocs as average "
            "from search.impact_basis b join search.source_stats s using (workspace_id, source) "
            "where b.source = 'node'"
        ).fetchone()
        assert drift is not None and drift["average"] > 2 * drift["basis"]
    return built


def test_the_top_k_equals_a_brute_force_bm25(
    database: Database, cx: Context, corpus: Corpus
) -> None:
    word, common = corpus.words[40], corpus.words[3]
    queries = [
        *_queries(corpus, 40),
        # A phrase of one word said twice is a phrase: a document with the word once is no match.
        (f'"{common} {common}" {word}', Filters()),
        # More lexemes than a clause mask holds, in two clauses.
        (" OR ".join(corpus.words[100:170]) + f" {common}", Filters()),
    ]
    failures = []
    with database.pool.connection() as conn:
        failures += [
            why
            for query, filters in queries
            for cap in (CAP, SMALL_CAP)
            if (why := _mismatch(conn, cx, corpus, query, filters, cap))
        ]
        # The comparison has rows to compare: most queries find something in every source.
        sizes = [len(leg(conn, cx, q, f, CAP)) for q, f in queries[:12]]
        # A word said twice counts twice: "cell cell growth" weighs cell twice.
        once = leg(conn, cx, f"{word} {common}", Filters(), CAP)
        twice = leg(conn, cx, f"{word} {common} {word}", Filters(), CAP)
        tsq = build_tsqueries(conn, parse_query(f'{word} "{word} {word}" {common}'))
    assert failures == [], "\n".join(failures)
    assert sum(sizes) > 12 * CAP
    assert dict(zip(tsq.lexemes, tsq.repeats, strict=True)) == {word: 3, common: 1}
    assert {r[1] for r in once} == {r[1] for r in twice}
    assert [r[1] for r in once] != [r[1] for r in twice]


NEWEST_DEFINITIONS = resources.files("subspace.db.migrations").joinpath(
    "0017_bm25_skipped_lists.sql"
)


def _replace_function(conn: Conn, name: str, changes: Changes) -> None:
    """Replace `name` by its newest definition with each rule written as its looser form."""
    text = NEWEST_DEFINITIONS.read_text()
    start = text.index(f"create or replace function {name}(")
    function = text[start : text.index("end $$;", start) + len("end $$;")]
    for rule, looser in changes:
        assert rule in function, rule
        function = function.replace(rule, looser)
    conn.execute(function)
    conn.commit()


Changes = tuple[tuple[str, str], ...]
# The scan splitting every query of several lists (the corpus's lists are short), reading only
# the shortest list before it has learnt what a cap-th scores, and ranking two documents at
# first, so that it ranks again deeper.
FORCED_SPLIT = (
    ("if postings <= 16 * budget then", "if postings < 0 then"),
    ("budget bigint := 64 * greatest(cap * kbs, 1);", "budget bigint := 1;"),
    (
        "first_depth constant bigint := 4 * greatest(cap * kbs, 1);",
        "first_depth constant bigint := 2;",
    ),
)
# The scan stopping once every base has `cap` targets while a document not verified yet could
# still beat a cap-th; taking too low a bound of the documents not read (one list) or not
# ranked yet (several lists, split: not counting what the skipped lexemes add); skipping
# lexemes whose documents could enter.
LOOSENED: dict[str, Changes] = {
    "verification order": (
        (
            "exit when filled and not search.bm25_enters(",
            "exit when filled or not search.bm25_enters(",
        ),
    ),
    "one list's bound": (("min(d.impact) * slack)", "min(d.impact) * 0.9)"),),
    "bound of the documents not ranked": (
        *FORCED_SPLIT,
        ("beyond := ranked[depth].score;", "beyond := ranked[depth].score - skipped_most;"),
    ),
    "lists skipped": (*FORCED_SPLIT, ("k_score / 3, k_id)", "k_score * 3, k_id)")),
}


@pytest.mark.parametrize("name", sorted(LOOSENED))
def test_a_loosened_stopping_rule_is_caught(
    database: Database, cx: Context, corpus: Corpus, name: str
) -> None:
    with database.pool.connection() as conn:
        _replace_function(conn, "search.bm25_scan", LOOSENED[name])
        failures = [
            why
            for query, filters in _queries(corpus, 40)
            if (why := _mismatch(conn, cx, corpus, query, filters, SMALL_CAP))
        ]
    assert failures, "a stopping rule that stops early went unnoticed"


def test_the_split_lists_give_the_top_k_of_a_brute_force_bm25(
    database: Database, cx: Context, corpus: Corpus
) -> None:
    with database.pool.connection() as conn:
        _replace_function(conn, "search.bm25_scan", FORCED_SPLIT)
        failures = [
            why
            for query, filters in _queries(corpus, 40)
            for cap in (CAP, SMALL_CAP)
            if (why := _mismatch(conn, cx, corpus, query, filters, cap))
        ]
    assert failures == [], "\n".join(failures)


def test_a_split_word_that_no_kind_searched_holds_is_held_by_no_document(
    database: Database, cx: Context, corpus: Corpus
) -> None:
    # A word counted in the source (bullets hold it) and in no memory: split off as a long
    # list, it adds nothing to a memory's score and must not count for its every-clause group.
    only_memories = Filters(kinds=["memory", "page"])
    with database.pool.connection() as conn:
        rows = conn.execute(
            "select t.lexeme, t.ndoc, exists (select 1 from search.postings p "
            "where p.workspace_id = t.workspace_id and p.source = 'node' and p.kind = 'memory' "
            "and p.lexeme = t.lexeme) as in_memory from search.term_stats t "
            "where t.workspace_id = %s and t.source = 'node' order by t.ndoc, t.lexeme",
            (cx.actor.workspace_id,),
        ).fetchall()
        absent = max((r for r in rows if not r["in_memory"]), key=lambda r: r["ndoc"])
        queries = [
            f"{r['lexeme']} {absent['lexeme']}"
            for r in rows
            if r["in_memory"] and r["ndoc"] < absent["ndoc"]
        ]
        _replace_function(conn, "search.bm25_scan", FORCED_SPLIT)
        checked = failures = 0
        for query in queries:
            if not any(
                w[0] == "memory" for w in brute_force(conn, cx, corpus, query, only_memories, CAP)
            ):
                continue
            checked += 1
            failures += _mismatch(conn, cx, corpus, query, only_memories, CAP) is not None
            if checked == 10:
                break
    assert checked == 10 and failures == 0


def test_a_document_enters_when_it_ranks_at_or_before_the_cap_th(database: Database) -> None:
    # search.bm25_enters orders as search.bm25_ranked does: every-clause group and score
    # descending, then id ascending; a document tying the cap-th exactly enters.
    values = [
        (every, score, UUID(int=n))
        for every in (False, True)
        for score in (1.0, 2.0)
        for n in (1, 2)
    ]
    pairs = [(doc, kth) for doc in values for kth in values]
    with database.pool.connection() as conn:
        found = conn.execute(
            "select search.bm25_enters(e, s, i, ke, ks, ki) as enters "
            "from unnest(%s::boolean[], %s::float8[], %s::uuid[], %s::boolean[], %s::float8[], "
            "%s::uuid[]) with ordinality x(e, s, i, ke, ks, ki, n) order by n",
            [[pair[side][field] for pair in pairs] for side in (0, 1) for field in (0, 1, 2)],
        ).fetchall()

    def rank(doc: tuple[bool, float, UUID]) -> tuple[bool, float, UUID]:
        every, score, target = doc
        return (not every, -score, target)

    assert [r["enters"] for r in found] == [rank(doc) <= rank(kth) for doc, kth in pairs]


def test_whether_a_document_enters_is_worked_out_in_place_whatever_its_arguments(
    database: Database,
) -> None:
    # The scan passes a subquery (a document's every-clause flag): were the call not replaced
    # by the function's body, every document ranked would cost a function call.
    with database.pool.connection() as conn:
        plan = conn.execute(
            "explain (verbose, costs off) select search.bm25_enters("
            "exists (select 1 from unnest(array[g]) x where x = 2), g::float8, gen_random_uuid(), "
            "true, 1::float8, gen_random_uuid()) from generate_series(1, 3) g"
        ).fetchall()
    assert "bm25_enters" not in "\n".join(r["QUERY PLAN"] for r in plan)
