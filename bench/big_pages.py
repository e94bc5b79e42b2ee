"""Big pages in the web app: time to open one until a typed key shows, and keystroke to paint.

Starts a fresh embedded Postgres with one page per size in --bullets (each a changelog's
shape: a heading bullet per release, with twenty one-line entries under it), the whole app on
a real uvicorn, and headless Chromium signed in with a key. For each page, in the page's own
clock from the start of its navigation:

- first bullet: the first frame painted with a bullet in it;
- interactive: a key typed into the first bullet as soon as it is on screen, shown in it
  (the paint after its input event): what a person waits for before the page answers;
- keystroke to paint: for --keys keys typed into a bullet half way down the page (scrolled to,
  as a search hit is), the time from each key's event to the next paint, median and worst.

And the sidebar with --pages pages (a fifth made in the app, the rest imported into twenty
folders): from the start of the start view's navigation to the first frame with the page list
in it, and keystroke to paint for a filter typed into it.

    python bench/big_pages.py [--bullets 1000 10000 50000] [--keys 20] [--pages 5000] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.served import served, sign_in
from subspace import commands
from subspace.config import Settings
from subspace.database import open_database
from subspace.ingest.outline import OutlineItem
from subspace.keys import create_key

ENTRIES = 20  # one-line entries under each release heading
OPEN_TIMEOUT_MS = 600_000  # a page that takes minutes is measured, not given up on

# In the page's clock: each key's event time and the paint that followed its input.
PROBE = """
window.__keys = [];
document.addEventListener("input", (event) => {
  const typed = performance.now();
  const since = window.__keyAt ?? typed;
  requestAnimationFrame(() => setTimeout(() => {
    window.__keys.push({ at: since, painted: performance.now(), value: event.target.value });
  }, 0));
}, true);
document.addEventListener("keydown", (event) => { window.__keyAt = event.timeStamp; }, true);
window.__first = null;
window.__list = null;
(function look() {
  if (!document.querySelector(".bullet-text")) return requestAnimationFrame(look);
  requestAnimationFrame(() => setTimeout(() => { window.__first = performance.now(); }, 0));
})();
(function lookList() {
  if (!document.querySelector("#page-list a, #page-list .folder")) {
    return requestAnimationFrame(lookList);
  }
  requestAnimationFrame(() => setTimeout(() => { window.__list = performance.now(); }, 0));
})();
"""
FOLDERS = 20  # folders the imported pages of the sidebar's measurement sit in
FILTER = "page 1234"  # typed into the sidebar's filter, a key at a time


def changelog(bullets: int) -> list[OutlineItem]:
    """About `bullets` bullets: release headings with ENTRIES entries each."""
    items = []
    for release in range(max(1, bullets // (ENTRIES + 1))):
        entries = [
            OutlineItem(f"Fix {n} in release {release}: the parser reads line {n * 7} again.")
            for n in range(ENTRIES)
        ]
        items.append(OutlineItem(f"Release 1.{release}.0", entries))
    return items


def bullet_count(bullets: int) -> int:
    """How many bullets changelog(bullets) makes."""
    return max(1, bullets // (ENTRIES + 1)) * (ENTRIES + 1)


def open_page(page: Page, url: str) -> dict[str, float]:
    """Open `url` and type a key into its first bullet as soon as it shows."""
    page.add_init_script(PROBE)
    page.goto(url, wait_until="commit")
    # Waiting by a function the probe sets, not by a locator: a locator's polls query every
    # bullet of the page on its own main thread, and slowed the very page being measured.
    page.wait_for_function("() => window.__first", polling=50, timeout=OPEN_TIMEOUT_MS)
    page.evaluate("document.querySelector('.bullet-text').focus()")
    page.keyboard.press("End")
    page.keyboard.press("x")
    page.wait_for_function("() => window.__keys.length > 0", timeout=OPEN_TIMEOUT_MS)
    shown, painted = page.evaluate("[window.__first, window.__keys[0].painted]")
    asked, answered, received = page.evaluate(
        """() => { const e = performance.getEntriesByType("resource")
            .find((r) => /\\/api\\/pages\\/[^/]+$/.test(r.name));
          return e ? [e.requestStart, e.responseStart, e.responseEnd] : [0, 0, 0]; }"""
    )
    return {"first_bullet_ms": shown, "interactive_ms": painted, "page_asked_ms": asked,
            "page_answered_ms": answered, "page_received_ms": received}  # fmt: skip


def type_deep(page: Page, keys: int) -> list[float]:
    """Type `keys` keys into the bullet half way down the page; each key's ms to paint."""
    page.evaluate("window.__keys = []")
    deep = page.locator(".bullet-text").nth(page.locator(".bullet-text").count() // 2)
    deep.scroll_into_view_if_needed(timeout=OPEN_TIMEOUT_MS)
    deep.click(timeout=OPEN_TIMEOUT_MS)
    for _ in range(keys):
        page.keyboard.press("y")
        page.wait_for_timeout(50)  # a fast typist's pace
    page.wait_for_function(f"() => window.__keys.length >= {keys}", timeout=OPEN_TIMEOUT_MS)
    return [k["painted"] - k["at"] for k in page.evaluate("window.__keys")]


def many_pages(cx: Any, count: int) -> None:
    """`count` one-bullet pages: a fifth made in the app, the rest imported into FOLDERS."""
    for n in range(count):
        path = None if n % 5 == 0 else f"docs/area-{n % FOLDERS}/page-{n}.md"
        commands.create_page_from_outline(cx, f"Notes page {n}", [OutlineItem("x")],
                                          source_path=path)  # fmt: skip


def sidebar(page: Page, keys: str) -> dict[str, float]:
    """Open the start view; when its page list shows, type `keys` into the filter."""
    page.add_init_script(PROBE)
    page.goto("/", wait_until="commit")
    page.wait_for_function("() => window.__list !== null", timeout=OPEN_TIMEOUT_MS)
    listed = page.evaluate("window.__list")
    page.evaluate("window.__keys = []")
    page.click("#page-filter")
    for key in keys:
        page.keyboard.type(key)
        page.wait_for_timeout(50)
    page.wait_for_function(f"() => window.__keys.length >= {len(keys)}", timeout=OPEN_TIMEOUT_MS)
    painted = [k["painted"] - k["at"] for k in page.evaluate("window.__keys")]
    return {"list_shown_ms": listed, "filter_key_to_paint_p50_ms": statistics.median(painted),
            "filter_key_to_paint_max_ms": max(painted)}  # fmt: skip


def measure(sizes: list[int], keys: int, page_count: int) -> dict[str, Any]:
    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("Chromium is missing: run `apt-get install -y chromium`.")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp) / "home", providers="fake", index_sweep_s=0)
        db = open_database(settings)
        try:
            cx = db.default_context(settings)
            pages = {n: commands.create_page_from_outline(cx, f"Changelog {n:,}", changelog(n))
                     for n in sizes}  # fmt: skip
            many_pages(cx, page_count)
            with db.pool.connection() as conn:
                _, token = create_key(conn, cx.actor, "bench")
            with served(settings, db) as url, sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=chromium, args=["--no-sandbox", "--disable-gpu"]
                )
                context = browser.new_context(base_url=url)
                signin = context.new_page()
                sign_in(signin, token)
                signin.close()
                for n, created in pages.items():
                    page = context.new_page()
                    opened = open_page(page, f"/p/{created.id}")
                    painted = type_deep(page, keys)
                    results.append({
                        "bullets": bullet_count(n), **opened,
                        "key_to_paint_p50_ms": statistics.median(painted),
                        "key_to_paint_max_ms": max(painted),
                    })  # fmt: skip
                    page.close()
                listing = sidebar(context.new_page(), FILTER)
                browser.close()
        finally:
            db.close()
    return {"big_pages": results, "sidebar": {"pages": page_count + len(sizes), **listing}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bullets", type=int, nargs="+", default=[1_000, 10_000, 50_000])
    parser.add_argument("--keys", type=int, default=20)
    parser.add_argument("--pages", type=int, default=5_000, help="pages in the sidebar's list")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = measure(args.bullets, args.keys, args.pages)
    if args.json:
        print(json.dumps(results))
        return
    for r in results["big_pages"]:
        print(f"{r['bullets']:>7,} bullets: first bullet {r['first_bullet_ms']:,.0f} ms, "
              f"interactive {r['interactive_ms']:,.0f} ms (its JSON asked at "
              f"{r['page_asked_ms']:,.0f}, answered {r['page_answered_ms']:,.0f}, received "
              f"{r['page_received_ms']:,.0f} ms), keystroke to paint "
              f"p50 {r['key_to_paint_p50_ms']:,.1f} ms, "
              f"worst {r['key_to_paint_max_ms']:,.1f} ms")  # fmt: skip

    listing = results["sidebar"]
    print(f"sidebar of {listing['pages']:,} pages: list shown {listing['list_shown_ms']:,.0f} ms, "
          f"filter keystroke to paint p50 {listing['filter_key_to_paint_p50_ms']:,.1f} ms, "
          f"worst {listing['filter_key_to_paint_max_ms']:,.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
