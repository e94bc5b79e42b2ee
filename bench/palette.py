"""The search palette as a user sees it: time from the last keystroke to the rows on screen.

Starts a fresh embedded Postgres with the demo workspace and BULLETS SciFact sentences as
bullets, the whole app on a real uvicorn, and headless Chromium. For each of QUERIES queries
the palette's input is cleared and the query typed character by character (DELAY ms apart);
the time runs in the page's own clock from the last keydown to the moment the list shows the
rows of that exact query (the palette marks the list with `data-query` when it draws them),
so it includes the palette's debounce, the request, the search and the drawing. Also prints
the weight of the first view (the bytes of HTML, CSS and JavaScript the start page loads) and
the bytes of JavaScript and CSS the app serves in all.

    python bench/palette.py [--bullets 10000] [--queries 50] [--delay 40] [--corpus PATH]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from playwright.sync_api import Response, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import DEFAULT_CORPUS
from bench.search_latency import BULLETS_PER_PAGE, bullets, quantiles
from bench.served import served, sign_in
from subspace import commands
from subspace.config import Settings
from subspace.database import open_database
from subspace.demo import seed_demo
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.ingest.outline import OutlineItem
from subspace.ingest.worker import extract_pending
from subspace.keys import create_key
from subspace.providers.registry import create_provider
from subspace.web.routes import STATIC_DIR

# Records, in the page's clock, the last keydown and when the rows of each query were drawn.
PROBE = """
window.__lastKey = 0; window.__drawn = {};
document.addEventListener("keydown", () => { window.__lastKey = performance.now(); }, true);
new MutationObserver(() => {
  const list = document.getElementById("palette-list");
  const query = list && list.dataset.query;
  if (query && !(query in window.__drawn)) window.__drawn[query] = performance.now();
}).observe(document.body, { subtree: true, childList: true, attributes: true,
                            attributeFilter: ["data-query"] });
"""


def pick_queries(texts: list[str], count: int) -> list[str]:
    """One or two words of a random bullet, as someone looking for it would type them."""
    rng = random.Random(7)
    queries: list[str] = []
    while len(queries) < count:
        words = [w.strip(".,;:()[]%") for w in rng.choice(texts).split()]
        words = [w for w in words if w.isalpha() and len(w) > 4]
        if not words:
            continue
        at = rng.randrange(len(words))
        query = " ".join(words[at : at + rng.choice((1, 2))]).lower()
        if query not in queries:
            queries.append(query)
    return queries


def summary(values: list[float]) -> str:
    p50, p95, p99 = quantiles(values)
    return f"p50 {p50:.0f} ms, p95 {p95:.0f} ms, p99 {p99:.0f} ms"


def asset_bytes() -> dict[str, int]:
    sizes = {"js": 0, "css": 0}
    for path in STATIC_DIR.rglob("*"):
        if path.suffix in (".js", ".css"):
            sizes[path.suffix[1:]] += path.stat().st_size
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bullets", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--delay", type=int, default=40, help="ms between keystrokes")
    parser.add_argument(
        "--corpus", type=Path, default=DEFAULT_CORPUS, help="SciFact corpus.jsonl, or another"
    )
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("Chromium is missing: run `apt-get install -y chromium`.")
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp) / "home", providers="fake", index_sweep_s=0)
        db = open_database(settings)
        try:
            cx = db.default_context(settings)
            started = time.perf_counter()
            seed_demo(cx)
            texts = bullets(args.bullets, args.corpus)
            for number, start in enumerate(range(0, len(texts), BULLETS_PER_PAGE)):
                items = [OutlineItem(t) for t in texts[start : start + BULLETS_PER_PAGE]]
                commands.create_page_from_outline(cx, f"Notes {number}", items)
            extract_pending(db, settings, workers=2)
            EmbeddingsFollower(db, settings, create_provider(settings)).drain(timeout_s=3600)
            print(f"demo + {len(texts):,} bullets loaded and embedded: "
                  f"{time.perf_counter() - started:.1f} s")  # fmt: skip
            with db.pool.connection() as conn:
                _, token = create_key(conn, cx.actor, "bench")
            queries = pick_queries(texts, args.queries)
            with served(settings, db) as url:
                latencies, searches, first_view = run_browser(
                    chromium, url, token, queries, args.delay
                )
        finally:
            db.close()
    print(f"last keystroke -> rows drawn, {len(latencies)} queries typed {args.delay} ms per key "
          f"(includes the 70 ms debounce): {summary(latencies)}")  # fmt: skip
    print(f"of which the search itself (took_ms):{' ' * 45}{summary(searches)}")
    print("first view (the start page, signed in): "
          + ", ".join(f"{n:,} bytes of {kind}" for kind, n in first_view.items()))  # fmt: skip
    sizes = asset_bytes()
    print(f"static assets: {sizes['js']:,} bytes of JavaScript, {sizes['css']:,} bytes of CSS "
          f"(uncompressed, under {STATIC_DIR})")  # fmt: skip


def _answers(response: Response, query: str) -> bool:
    request = response.request
    return (
        request.url.endswith("/api/search") and (request.post_data_json or {}).get("query") == query
    )


KINDS = {"document": "HTML", "stylesheet": "CSS", "script": "JavaScript"}


def run_browser(
    chromium: str, url: str, token: str, queries: list[str], delay: int
) -> tuple[list[float], list[float], dict[str, int]]:
    """Per query: ms from the last keystroke to its rows drawn, and the server's took_ms; and
    the bytes of each kind the first view loaded."""
    latencies: list[float] = []
    searches: list[float] = []
    first_view = dict.fromkeys(KINDS.values(), 0)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(base_url=url)
        sign_in(page, token)
        page.wait_for_load_state("networkidle")
        loaded = page.evaluate(
            "performance.getEntriesByType('resource')"
            ".concat(performance.getEntriesByType('navigation'))"
            ".map((e) => [e.initiatorType === 'navigation' ? 'document' : e.name,"
            " e.decodedBodySize])"
        )
        for name, size in loaded:
            kind = "document" if name == "document" else (
                "stylesheet" if name.split("?")[0].endswith(".css") else
                "script" if name.split("?")[0].endswith(".js") else None)  # fmt: skip
            if kind:
                first_view[KINDS[kind]] += int(size)
        page.evaluate(PROBE)
        page.keyboard.press("Control+k")
        page.wait_for_selector("#palette-input")
        for number, query in enumerate(queries):
            page.fill("#palette-input", "")
            page.wait_for_timeout(150)  # the cleared input's hint is drawn; no search in flight
            page.evaluate("window.__drawn = {}")
            with page.expect_response(partial(_answers, query=query), timeout=30_000) as got:
                page.keyboard.type(query, delay=delay)
            page.wait_for_function("q => q in window.__drawn", arg=query, timeout=30_000)
            drawn, last = page.evaluate("q => [window.__drawn[q], window.__lastKey]", query)
            if number:  # the first query warms the page's modules and the server's plans
                latencies.append(drawn - last)
                searches.append(got.value.json()["took_ms"])
        browser.close()
    return latencies, searches, first_view


if __name__ == "__main__":
    main()
