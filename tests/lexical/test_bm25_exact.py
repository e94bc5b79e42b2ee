"""The oracle: the lexical leg's top-k from its index equals a brute-force BM25 over a random
corpus, filters and all, and so do the writes it has not applied yet (the delta).

The corpus has a Zipf vocabulary of made-up words (the english stemmer keeps them whole, and
none is a stopword) in page titles, bullets, memories, file chunks, file names, mail and
subjects across three knowledge bases, with hidden items of every kind. The brute force reads
each document's lexemes and positions from its tsvector, the workspace's statistics and the
index's average lengths (the statistics the engine scores with: search/lexical/engine_query.py), and
ranks in Python. The engine scores in 32-bit floats: scores agree to SCORE_TOLERANCE, and
documents whose scores the two sides cannot tell apart may trade places.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections import Counter
from dataclasses import dataclass, field, replace
from uuid import UUID

import psycopg
import pytest

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.db.pool import Conn
from subspace.outbox.append import append_event
from subspace.search.filters import TagFilter, resolve_scope
from subspace.search.lexical.bm25 import K1 as BM25_K1
from subspace.search.lexical.bm25 import B as BM25_B
from subspace.search.lexical.bm25 import stored_length
from subspace.search.lexical.index.layout import database_identity, index_root
from subspace.search.lexical.sql import ALL_WORDS_CLAUSES, source_weight, title_kinds
from subspace.search.lexical.terms import build_tsqueries
from subspace.search.query import parse_query
from subspace.search.registry import filter_names, with_parts
from subspace.workspaces import create_workspace
from tests.search_helpers import follow, lexical_hits, run

SEED = 15
CAP = 100  # targets per knowledge base, the leg's window at its default depth
SMALL_CAP = 7  # many ties at the cap: the engine reads on until they are over
SCORE_TOLERANCE = 1e-5  # relative: float32 sums of a dozen terms agree to about 1e-6
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
    node_ids: list[UUID] = field(default_factory=list)


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
    # Bullets: short ones and long ones, so stored lengths round (past 40 lexemes).
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
    return Corpus(kbs, list(docs.values()), words, tagged, [n[2] for n in nodes],
                  [n[0] for n in nodes])  # fmt: skip


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


Ranked = tuple[str, UUID, UUID, bool, float]  # kind, target, kb, every clause, weighted score


def brute_force(
    conn: Conn, cx: Context, corpus: Corpus, query: str, filters: Filters, cap: int,
    averages: dict[str, float],
) -> list[Ranked]:  # fmt: skip
    """(kind, target id, kb, every clause, score) in the leg's order, computed here, each
    source's lengths against `averages` (the index's)."""
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
    titles = title_kinds()  # among the rows with every clause, titles first
    best: dict[tuple[UUID, UUID], tuple[tuple[object, ...], Ranked]] = {}
    for doc in corpus.docs:
        if doc.hidden or doc.kind not in kinds or doc.kb_id not in kbs:
            continue
        if filters.red and doc.item_id not in corpus.tagged:
            continue
        if not any(_phrase_at(doc, alt) for c in clauses for alt in c if alt):
            continue
        if any(_phrase_at(doc, t) for t in negated if t):
            continue
        ndocs = stats[doc.source][0]
        avgdl = averages[doc.source]
        score = 0.0
        for lexeme, m in sorted(repeats.items()):
            tf = len(doc.positions.get(lexeme, []))
            n = df.get((doc.source, lexeme), 0)
            if tf and n:
                idf = math.log(1 + (ndocs - n + 0.5) / (n + 0.5))
                length = stored_length(doc.length)
                norm = BM25_K1 * (1 - BM25_B + BM25_B * length / avgdl)
                score += m * idf * tf * (BM25_K1 + 1) / (tf + norm)
        score *= source_weight(doc.source)  # a title counts for more (KindSpec.weight)
        worded = [c for c in clauses if any(c)]
        every = 0 < len(clauses) <= ALL_WORDS_CLAUSES and all(
            any(_phrase_at(doc, alt) for alt in c if alt) for c in worded
        )
        # A target once per base: its best row (a file by its name or its best chunk).
        order = (not every, not (every and doc.kind in titles), -score, doc.kind, doc.target_id)
        key = (doc.kb_id, doc.target_id)
        if key not in best or order < best[key][0]:
            best[key] = (order, (doc.kind, doc.target_id, doc.kb_id, every, score))
    ranked: dict[UUID, list[tuple[tuple[object, ...], Ranked]]] = {}
    for (kb_id, _), entry in best.items():
        ranked.setdefault(kb_id, []).append(entry)
    found: list[tuple[tuple[object, ...], Ranked]] = []
    for entries in ranked.values():  # each base's best `cap`, its sources together
        entries.sort(key=lambda e: e[0])  # type: ignore[arg-type, return-value]
        found += entries[:cap]
    found.sort(key=lambda e: e[0])  # type: ignore[arg-type, return-value]
    return [row for _, row in found]


def averages(database: Database, cx: Context) -> dict[str, float]:
    """The average length the index scores each source with (as its reader reads it)."""
    with database.pool.connection() as conn:
        reader = database.search_runtime.lexical_reader(
            index_root(cx.settings), lambda: database_identity(conn)
        )
    view = reader.view(cx.actor.workspace_id)
    assert view is not None, reader.problem
    return {source: stats.average_length for source, stats in view.stats.items()}


def leg(
    database: Database, cx: Context, query: str, filters: Filters, cap: int,
    current: bool = True,
) -> list[Ranked]:  # fmt: skip
    """The leg's rows from the index (brought up to every write when `current`), with each
    score as it ranked them (its hit's score is every + s / (1 + s))."""
    with database.pool.connection() as conn:
        scope = resolve_scope(
            conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=filters.kb_ids,
            kinds=filters.kinds, tags=[TagFilter("topic", "eq", "red")] if filters.red else None,
            max_knowledge_bases=50,
        )  # fmt: skip
        tsq = build_tsqueries(conn, parse_query(query), cx.actor.workspace_id)
    found = []
    for hit in lexical_hits(database, cx, scope, tsq, cap=cap, current=current):
        every = hit.score >= 1
        fraction = hit.score - every
        found.append((hit.kind, hit.target[1], hit.kb_id, every, fraction / (1 - fraction)))
    return found


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


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=SCORE_TOLERANCE, abs_tol=SCORE_TOLERANCE)


def disagreement(got: list[Ranked], want: list[Ranked], cap: int) -> str | None:
    """Why the leg's rows differ from the brute force's, or None when they agree: the same
    targets in each knowledge base's top `cap` (but for ties at the cap, which the two may
    break apart), each with the same kind, flag and score, in the leg's order."""
    expected = {(row[2], row[1]): row for row in want}
    bases: dict[UUID, list[Ranked]] = {}
    for row in want:
        bases.setdefault(row[2], []).append(row)
    boundary = {kb: rows[-1][4] for kb, rows in bases.items() if len(rows) == cap}

    def tied_at_cap(row: Ranked) -> bool:
        return row[2] in boundary and close(row[4], boundary[row[2]])

    for row in got:
        known = expected.get((row[2], row[1]))
        if known is None:
            if tied_at_cap(row):
                continue  # tied at the cap with the one the brute force kept
            return f"{row} is not in the brute force's top {cap}"
        if known[:4] != row[:4] or not close(known[4], row[4]):
            return f"{row} where the brute force has {known}"
    shown = {(row[2], row[1]) for row in got}
    for row in want:
        if (row[2], row[1]) not in shown and not tied_at_cap(row):
            return f"{row} of the brute force's top {cap} is missing"
    titles = title_kinds()
    order = [(not r[3], not (r[3] and r[0] in titles), -r[4]) for r in got]
    for n, (a, b) in enumerate(itertools.pairwise(order)):
        if a[:2] > b[:2] or (a[:2] == b[:2] and a[2] > b[2] and not close(a[2], b[2])):
            return f"rows {n} and {n + 1} out of order: {got[n]}, {got[n + 1]}"
    return None


def _mismatch(
    database: Database, cx: Context, corpus: Corpus, query: str, filters: Filters, cap: int,
    current: bool = True,
) -> str | None:  # fmt: skip
    """Why the leg and the brute force disagree on this query, or None when they agree."""
    got = leg(database, cx, query, filters, cap, current)
    with database.pool.connection() as conn:
        want = brute_force(conn, cx, corpus, query, filters, cap, averages(database, cx))
    why = disagreement(got, want, cap)
    return None if why is None else f"{query!r} {filters}, cap {cap}: {why}"


@pytest.fixture
def corpus(database: Database, cx: Context) -> Corpus:
    with database.pool.connection() as conn:
        built = _build(conn, cx)
    # As autovacuum would: the planner's statistics for the new rows.
    with psycopg.connect(database.dsn, autocommit=True) as maintenance:
        maintenance.execute("analyze")
    follow(database, cx)  # the rows came without events: the index is built from the tables
    return built


def test_the_top_k_equals_a_brute_force_bm25(
    database: Database, cx: Context, corpus: Corpus
) -> None:
    word, common = corpus.words[40], corpus.words[3]
    queries = [
        *_queries(corpus, 40),
        # A phrase of one word said twice is a phrase: a document with the word once is no match.
        (f'"{common} {common}" {word}', Filters()),
        # Seventy words in two clauses.
        (" OR ".join(corpus.words[100:170]) + f" {common}", Filters()),
    ]
    failures = [
        why
        for query, filters in queries
        for cap in (CAP, SMALL_CAP)
        if (why := _mismatch(database, cx, corpus, query, filters, cap))
    ]
    # The comparison has rows to compare: most queries find something in every source.
    sizes = [len(leg(database, cx, q, f, CAP)) for q, f in queries[:12]]
    # A word said twice counts twice: "cell cell growth" weighs cell twice.
    once = leg(database, cx, f"{word} {common}", Filters(), 100_000)  # every match
    twice = leg(database, cx, f"{word} {common} {word}", Filters(), 100_000)
    with database.pool.connection() as conn:
        tsq = build_tsqueries(conn, parse_query(f'{word} "{word} {word}" {common}'),
                              cx.actor.workspace_id)  # fmt: skip
    assert failures == [], "\n".join(failures)
    assert sum(sizes) > 12 * CAP
    assert dict(zip(tsq.lexemes, tsq.repeats, strict=True)) == {word: 3, common: 1}
    assert {r[1] for r in once} == {r[1] for r in twice}
    assert [r[1] for r in once] != [r[1] for r in twice]


def test_a_filter_applied_after_the_top_k_is_caught(
    database: Database, cx: Context, corpus: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The engine asked without the knowledge base filter, its hits kept when they are in the
    # base: fewer than the base's true top k, and the oracle says so.
    from subspace.search.lexical import collector

    def after_the_top_k(view, tsq, source, kbs, filters, cap):  # type: ignore[no-untyped-def]
        everywhere = real_top(view, tsq, source, corpus.kbs, filters, cap)
        best = sorted(everywhere, key=lambda r: -r.score)[:cap]
        return [r for r in best if r.kb_id in kbs]

    real_top = collector.engine_top
    monkeypatch.setattr("subspace.search.lexical.leg.engine_top", after_the_top_k)
    failures = [
        why
        for q, f in _queries(corpus, 10)
        if (why := _mismatch(database, cx, corpus, q, f, SMALL_CAP))
    ]
    assert failures, "the oracle must catch a filter applied after the top k"


def test_the_writes_since_the_index_rank_as_the_index_would(
    database: Database, cx: Context, corpus: Corpus
) -> None:
    """Bullets edited, pages archived and bullets added after the index was built, each with
    its event, rank as a brute force over the tables does, before the follower applies them."""
    rng = random.Random(SEED + 2)
    weights = [1 / (rank + 1) ** ZIPF_S for rank in range(len(corpus.words))]
    ws = cx.actor.workspace_id
    with database.pool.connection() as conn:
        pages = [r["id"] for r in conn.execute(
            "select id from kb.pages where workspace_id = %s order by id", (ws,))]  # fmt: skip
        edited = rng.sample(corpus.node_ids, 60)
        for node_id in edited:
            text = " ".join(rng.choices(corpus.words, weights, k=rng.randint(1, 30)))
            row = conn.execute("update kb.nodes set text = %s where id = %s returning page_id",
                               (text, node_id)).fetchone()  # fmt: skip
            assert row is not None
            append_event(conn, ws, "nodes.changed", page_id=row["page_id"])
        for page_id in rng.sample(pages, 20):
            conn.execute("update kb.pages set archived_at = now() where id = %s", (page_id,))
            append_event(conn, ws, "page.archived", page_id=page_id)
        for page_id in rng.sample(pages, 40):
            text = " ".join(rng.choices(corpus.words, weights, k=rng.randint(1, 30)))
            conn.execute("insert into kb.nodes (workspace_id, page_id, position, text) "
                         "values (%s, %s, 99, %s)", (ws, page_id, text))  # fmt: skip
            append_event(conn, ws, "nodes.changed", page_id=page_id)
        conn.commit()
        now = _read_back(conn, cx, corpus)
    failures = [
        why
        for q, f in _queries(corpus, 24)
        if (why := _mismatch(database, cx, now, q, f, CAP, current=False))
    ]
    assert failures == [], "\n".join(failures)


def _read_back(conn: Conn, cx: Context, corpus: Corpus) -> Corpus:
    """The corpus as the tables hold it now: every bullet's lexemes and positions again, and
    a page archived since hiding its title and bullets."""
    archived = {r["id"] for r in conn.execute(
        "select id from kb.pages where workspace_id = %s and archived_at is not null",
        (cx.actor.workspace_id,))}  # fmt: skip
    kept = [d for d in corpus.docs if d.source != "node"]
    for doc in kept:
        if doc.source == "page" and doc.item_id in archived:
            doc.hidden = True
    known = {d.target_id: d for d in corpus.docs if d.source == "node"}
    rows = conn.execute(
        "select n.id, n.page_id, n.props, n.text_len as len, p.kb_id, u.lexeme, u.positions "
        "from kb.nodes n join kb.pages p on p.workspace_id = n.workspace_id "
        "and p.id = n.page_id left join lateral unnest(n.text_tsv) u on true "
        "where n.workspace_id = %s",
        (cx.actor.workspace_id,),
    ).fetchall()
    nodes: dict[UUID, Doc] = {}
    for r in rows:
        doc = nodes.get(r["id"])
        if doc is None:
            before = known.get(r["id"])
            hidden = (before.hidden if before is not None else False) or r["page_id"] in archived
            kind = "memory" if (r["props"] or {}).get("memory") else "node"
            doc = Doc("node", kind, r["id"], 0, "page", r["page_id"], r["kb_id"], hidden)
            doc.length = r["len"]
            nodes[r["id"]] = doc
        if r["lexeme"] is not None:
            doc.positions[r["lexeme"]] = list(r["positions"] or [0])
    return Corpus(corpus.kbs, kept + list(nodes.values()), corpus.words, corpus.tagged,
                  corpus.texts, corpus.node_ids)  # fmt: skip


def _scores(database: Database, cx: Context, query: str) -> dict[UUID, float]:
    """Each row's BM25 score as the lexical leg ranked it (its hit's score is every clause
    plus s / (1 + s))."""
    response = run(database, cx, query, mode="lexical", limit=100)
    found = {}
    for row in response.rows:
        fraction = row.legs["lexical"].score % 1
        found[row.id] = fraction / (1 - fraction)
    return found


def test_the_delta_and_the_index_score_on_one_scale(database: Database, cx: Context) -> None:
    """A bullet ranked from Postgres (its page written since the index's position) scores what
    the index gives it; once the index holds new bullets, a score moves by no more than the
    average length it is weighed against."""
    page = commands.create_page(cx, "Scale")
    for n in range(30):
        commands.add_node(cx, page.id, f"tern colony {n} " + "nesting on the cliff " * (n % 4))
    # Another workspace's long bullets: the index's average length is not this workspace's.
    with database.pool.connection() as conn:
        other = replace(cx, actor=create_workspace(conn, "Neighbour"))
    elsewhere = commands.create_page(other, "Elsewhere")
    for _ in range(30):
        commands.add_node(other, elsewhere.id, "gull " * 60)
    follow(database, cx)
    in_index = _scores(database, cx, "tern cliff")
    # The page touched, nothing changed: its bullets are the delta, ranked in Postgres.
    with database.pool.connection() as conn:
        append_event(conn, cx.actor.workspace_id, "nodes.changed", page_id=page.id)
        conn.commit()
    in_delta = _scores(database, cx, "tern cliff")
    assert in_delta.keys() == in_index.keys()
    for ident, score in in_index.items():
        assert math.isclose(in_delta[ident], score, rel_tol=SCORE_TOLERANCE), ident
    # Long bullets written since: ranked from Postgres against the index's average length.
    before = averages(database, cx)["node"]
    for n in range(30):
        commands.add_node(cx, page.id, "tern " + "feather " * (30 + n))
    stale = _scores(database, cx, "tern cliff")
    follow(database, cx)
    after = averages(database, cx)["node"]
    applied = _scores(database, cx, "tern cliff")
    bound = abs(after / before - 1)
    assert bound > 0.05  # the new bullets moved the average
    moved = max(abs(applied[i] / stale[i] - 1) for i in stale)
    assert 0 < moved <= bound + 1e-6
