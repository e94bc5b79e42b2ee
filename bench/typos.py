"""Typo tolerance on SciFact: what finding a correction costs, and how often it is the word meant.

Loads the SciFact abstracts as bullets (one an abstract, a hundred to a page) into a fresh
embedded Postgres, in turn without and with the triggers that keep the spelled words
(search.words, migration 0019), and prints each load's rate. Then takes the words that
`subspace eval --typos` misspells in SciFact's test queries and that no document holds as
typed, and for each: whether a search corrects it to the word meant (to that word's lexeme,
and shown as a word of the corpus), and the query analysis' time (lexical.build_tsqueries:
its one statement, with the search's settings, and the choice in Python) with typo tolerance
and without, each the median of --repeat runs.

    python bench/typos.py [--repeat 15] [--rounds 1] [--corpus PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import DEFAULT_CORPUS, abstracts
from subspace import commands
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database, open_database
from subspace.db.pool import Conn
from subspace.evaluation.beir import add_typos, load_collection
from subspace.ingest.outline import OutlineItem
from subspace.providers.fake import FakeProvider
from subspace.search.legs import SEARCH_SETTINGS
from subspace.search.lexical import terms as lexical
from subspace.search.query import parse_query
from subspace.search.request import SearchRequest
from subspace.search.service import search
from subspace.workspaces import create_workspace

BULLETS_PER_PAGE = 100
WORDS_TABLES = ("kb.pages", "kb.nodes", "search.file_chunks", "kb.mail")
LETTERS = re.compile(r"[^\W\d_]+")


def load(db: Database, cx: Context, texts: list[str], *, words: bool) -> float:
    """Seconds to write `texts` as bullets, with the spelled words' triggers on or off."""
    with db.pool.connection() as conn:
        has_words = conn.execute("select to_regclass('search.words') is not null as t").fetchone()
        if not (has_words and has_words["t"]):
            if not words:
                raise SystemExit("this build keeps no spelled words: run with --rounds 0")
        else:
            for table in WORDS_TABLES:
                for event in ("insert", "update", "delete"):
                    state = "enable" if words else "disable"
                    conn.execute(f"alter table {table} {state} trigger text_words_{event}")
    started = time.perf_counter()
    for number, start in enumerate(range(0, len(texts), BULLETS_PER_PAGE)):
        items = [OutlineItem(t) for t in texts[start : start + BULLETS_PER_PAGE]]
        commands.create_page_from_outline(cx, f"Abstracts {number}", items)
    took = time.perf_counter() - started
    if not words:
        with db.pool.connection() as conn:
            for table in WORDS_TABLES:
                for event in ("insert", "update", "delete"):
                    conn.execute(f"alter table {table} enable trigger text_words_{event}")
    return took


def misspellings(queries: dict[str, str]) -> dict[str, str]:
    """Each word `add_typos` changes in the queries -> the word it was, both as letters only."""
    found = {}
    for text in queries.values():
        for meant, typed in zip(text.split(" "), add_typos(text).split(" "), strict=True):
            if meant != typed:
                found["".join(LETTERS.findall(typed))] = "".join(LETTERS.findall(meant)).lower()
    return found


def lexeme_of(conn: Conn, word: str) -> str | None:
    row = conn.execute(
        "select tsvector_to_array(to_tsvector('english', %s)) as l", (word,)
    ).fetchone()
    lexemes = row["l"] if row else []
    return lexemes[0] if len(lexemes) == 1 else None


def held(conn: Conn, cx: Context, lexeme: str | None) -> bool:
    return lexeme is not None and bool(
        conn.execute(
            "select 1 from search.term_stats where workspace_id = %s and lexeme = %s and ndoc > 0",
            (cx.actor.workspace_id, lexeme),
        ).fetchone()
    )


def analysis_ms(db: Database, cx: Context, text: str, *, typos: bool, repeat: int) -> float:
    """Median milliseconds of the query's analysis, as the search runs it."""
    samples = []
    parsed = parse_query(text)
    with db.pool.connection() as conn:
        for _ in range(repeat):
            with conn.transaction():
                conn.execute(SEARCH_SETTINGS)
                started = time.perf_counter()
                lexical.build_tsqueries(conn, parsed, cx.actor.workspace_id, typos=typos)
                samples.append(1000 * (time.perf_counter() - started))
    return statistics.median(samples)


def quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered):.2f}  p95 {p95:.2f}  max {ordered[-1]:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs timed per word")
    parser.add_argument(
        "--rounds", type=int, default=1, help="loads without, then with, the words' triggers"
    )
    parser.add_argument("--json", action="store_true", help="also print one JSON object")
    parser.add_argument(
        "--corpus",
        type=Path,
        default=DEFAULT_CORPUS,
        help="SciFact corpus.jsonl, or another in BEIR layout (queries.jsonl, qrels/test.tsv)",
    )
    args = parser.parse_args()
    texts = [f"{title}. {text}" for title, text in abstracts(args.corpus)]
    corpus_words = {w.lower() for t in texts for w in LETTERS.findall(t)}
    collection = load_collection(args.corpus.parent)
    typed_to_meant = misspellings(collection.queries)
    report: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp) / "home", providers="fake", index_sweep_s=0)
        db = open_database(settings, pool_size=4)
        try:
            loads = []
            cx = db.default_context(settings)
            for round_number in range(args.rounds):
                for words in (False, True):
                    with db.pool.connection() as conn:
                        actor = create_workspace(conn, f"load {round_number} {words}")
                    took = load(db, db.context(actor, settings), texts, words=words)
                    loads.append({"words": words, "s": round(took, 2)})
                    print(f"loaded {len(texts):,} abstracts, spelled words "
                          f"{'on ' if words else 'off'}: {took:.1f} s = "
                          f"{len(texts) / took:,.0f} bullets/s", flush=True)  # fmt: skip
                    if words:
                        cx = db.context(actor, settings)
            if not args.rounds:
                load(db, cx, texts, words=True)
            with db.pool.connection() as conn:
                conn.execute("analyze")
                unknown = {t: m for t, m in typed_to_meant.items()
                           if len(t) >= 4 and not held(conn, cx, lexeme_of(conn, t))}  # fmt: skip
                meant_lexeme = {t: lexeme_of(conn, m) for t, m in unknown.items()}
                findable = {t for t in unknown if held(conn, cx, meant_lexeme[t])}
            outcomes = {"meant": 0, "meant_as_word": 0, "other": 0, "none": 0}
            with_typos, without, extra = [], [], []
            for typed in sorted(unknown):
                response = search(cx, db.searcher(FakeProvider()), SearchRequest(
                    query=typed, mode="lexical", kinds=["node"]))  # fmt: skip
                shown = response.corrections.get(typed)
                with db.pool.connection() as conn:
                    same = shown is not None and lexeme_of(conn, shown) == meant_lexeme[typed]
                if typed in findable:
                    if shown is None:
                        outcomes["none"] += 1
                    elif same:
                        outcomes["meant"] += 1
                        outcomes["meant_as_word"] += shown in corpus_words
                    else:
                        outcomes["other"] += 1
                on = analysis_ms(db, cx, typed, typos=True, repeat=args.repeat)
                off = analysis_ms(db, cx, typed, typos=False, repeat=args.repeat)
                with_typos.append(on)
                without.append(off)
                extra.append(on - off)
        finally:
            db.close()
    print(f"{len(typed_to_meant)} misspelt words in {len(collection.queries)} queries; "
          f"{len(unknown)} of four letters or more that no document holds, {len(findable)} "
          "of them misspelling a word a document holds")  # fmt: skip
    print(f"corrected to the word meant: {outcomes['meant']} (shown as a word of the corpus: "
          f"{outcomes['meant_as_word']}), to another word: {outcomes['other']}, "
          f"not corrected: {outcomes['none']}")  # fmt: skip
    print(f"query analysis, typo tolerance on:  {quantiles(with_typos)}")
    print(f"query analysis, typo tolerance off: {quantiles(without)}")
    print(f"added by typo tolerance:            {quantiles(extra)}")
    report.update(loads=loads, words=len(unknown), findable=len(findable), outcomes=outcomes,
                  on_ms=with_typos, off_ms=without)  # fmt: skip
    if args.json:
        print(json.dumps(report))


if __name__ == "__main__":
    main()
