"""Main-content extraction from real HTML pages: Subspace's selectolax pass
(`ingest.extract.html_document`) beside trafilatura, on documentation this machine ships.

Pages come from nine generators found installed here (mdBook, rustdoc, Sphinx, Node.js's API
doctool, npm's docs, DocBook XSL, GNU Texinfo, Python's old LaTeX2HTML "mkhowto", and the
table-laid xmlsoft.org site of libxslt): for each, its files sorted by path and every k-th
taken, up to --per-generator pages, identical files once.

The gold favours neither extractor: it comes from each generator's own markup, read by hand
(see GENERATORS). Per page,

- content paragraphs: the text of each <p>, <li>, <pre>, <h1>-<h6>, <td>, <dt> and <dd> inside
  the generator's content container(s), without the text of such elements nested in it (a
  list item's own words, not its sub-list's); those of 20 characters or more are scored;
- furniture strings: the text of the generator's navigation, menus, sidebars, banners and
  footers (and of each link, item, cell, heading and button in them), 8 characters or more,
  leaving out any that the content holds too (a sidebar entry naming a section of the page).

Both are compared on letters and digits alone, case-folded: the extractors write list
markers, table separators and line breaks differently, and those are not what is measured.

Per extractor, per generator and overall (each figure the mean over pages):

- recall: the share of a page's content paragraphs found in the output;
- leak: the share of its furniture strings found in the output;
- length: the output's letters and digits over the content container's (the median);
- time: ms per page, median and total, of the second of two passes over all pages.

Arms: `subspace` (html_document, max depth 512, its blocks joined by blank lines),
`trafilatura` (extract with include_comments=False, include_tables=True, favor_recall=False),
`trafilatura_recall` (the same, favor_recall=True), and `combined`, computed from the runs
above, not run: subspace where the page has a <main>, role=main or a sole <article>
(where html_document reads only that), trafilatura with favor_recall elsewhere (on such
pages it finds more than without, at the same leak).

    python bench/html_extraction.py [--per-generator 24] [--examples 3] [--page PATH]
        [--json]

Needs trafilatura (`pip install trafilatura`); it is imported here only.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import logging
import statistics
import sys
import time
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from selectolax.lexbor import LexborHTMLParser

from subspace.ingest.encoding import decode_text
from subspace.ingest.failures import ExtractionFailed
from subspace.ingest.html import html_document

MAX_DEPTH = 512
PER_GENERATOR = 24
MIN_PARAGRAPH = 20  # shorter text (a "Note" heading, a cell "0") is found by chance
MIN_FURNITURE = 8  # "Previous chapter" counts; "Up", "Next", "Rust" do not
MIN_PAGE_BYTES = 2048  # below this a page is a redirect stub
RUST = Path("/root/.rustup/toolchains/nightly-x86_64-unknown-linux-gnu/share/doc/rust/html")
XMLSOFT = Path("/usr/share/doc/libxslt1-dev/html")
PYENV = Path("/root/.pyenv/versions")

# Elements whose own text is a content paragraph, and elements whose text is a furniture string.
GOLD_TAGS = frozenset({"p", "li", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "td", "dt", "dd"})
FURNITURE_TAGS = (
    "a, button, label, option, summary, li, p, td, th, dt, dd, h1, h2, h3, h4, h5, h6, ul, ol, "
    "table"
)
# Never text a reader sees.
INVISIBLE = "script, style, noscript, template, svg"


@dataclass(frozen=True)
class Generator:
    """Where a generator's pages are and how its markup is read.

    `roots` are (folder, glob) pairs, sampled evenly; `marker` must be in a page for it to be
    of this generator. `content` selects the content container(s); `furniture` the page's
    navigation, in or out of the container: it is removed before the gold is read.
    """

    name: str
    roots: tuple[tuple[Path, str], ...]
    marker: str
    content: str
    furniture: str
    skip: tuple[str, ...] = ()  # path fragments left out


def _rust(*books: str, glob: str = "**/*.html") -> tuple[tuple[Path, str], ...]:
    return tuple((RUST / book, glob) for book in books)


GENERATORS = (
    # mdBook 0.5 (the Rust books): tree dump of book/ch04-01. The text sits in
    # #mdbook-content > main; the sidebar is filled by toc.js (empty in the HTML, toc.html
    # holds it), so the furniture is the menu bar (theme list "Auto Light Rust Coal Navy
    # Ayu", the book's title), the keyboard-help popup and the chapter arrows.
    Generator(
        "mdBook",
        _rust(
            "book",
            "reference",
            "cargo",
            "nomicon",
            "rustc",
            "edition-guide",
            "embedded-book",
            "rust-by-example",
        ),
        marker='id="mdbook-content"',
        content="#mdbook-content main",
        furniture="#mdbook-help-container, #mdbook-menu-bar, #mdbook-sidebar, "
        "#mdbook-search-wrapper, nav.nav-wrapper, nav.nav-wide-wrapper",
        # print.html is the whole book again; the old editions are "no longer distributed" stubs
        skip=("/print.html", "/toc.html", "/404.html", "-edition/"),
    ),
    # rustdoc (std, core, alloc, proc_macro): std/vec/struct.Vec.html. Content is
    # section#main-content inside <main>; furniture the crate sidebar (nav.sidebar), the
    # mobile top bar, the skip link, and in the heading the "Copy item path" button, the
    # "Expand description" toggles and the "Source" link.
    Generator(
        "rustdoc",
        _rust("std", "core", "alloc", "proc_macro"),
        marker='id="main-content"',
        content="#main-content",
        furniture="nav.sidebar, rustdoc-topbar, a.skip-main-content, rustdoc-toolbar, "
        "#copy-path, summary.hideme, a.src",
        # all.html lists every item; arch/ is thousands of one-line SIMD intrinsics
        skip=("/src/", "/all.html", "/arch/"),
    ),
    # Sphinx (IDLE's help in each pyenv Python, 2.7 to 3.13, classic and python-docs-theme;
    # Debian's python-policy): div[role=main] is div.body; furniture the "related" bars
    # (index | modules | next | previous), the sphinxsidebar (local TOC, previous/next topic,
    # "Show Source"), the mobile menu and the footer.
    Generator(
        "Sphinx",
        ((PYENV, "*/lib/python*/idlelib/help.html"), (Path("/usr/share/doc/python3"), "*.html")),
        marker="sphinxsidebar",
        content="div[role=main]",
        furniture="div.related, div.sphinxsidebar, div.mobile-nav, div.footer",
    ),
    # Node.js API doctool (/usr/share/doc/nodejs/api, v20): assert.html. Content is
    # #apicontent (role=main); furniture the module list (#column2, role=navigation), the
    # header's version/TOC pickers (#column1 > header) and the page TOC (details#toc).
    Generator(
        "Node.js doctool",
        ((Path("/usr/share/doc/nodejs/api"), "*.html"),),
        marker='id="apicontent"',
        content="#apicontent",
        # (and the "copy" button the doctool puts inside every <pre>)
        furniture="#column2, #column1 > header, details#toc, a.skip-to-content, button.copy-button",
        skip=("/all.html",),  # every page again in one 8 MB file
    ),
    # npm's docs (npm 11, commands/, using-npm/, configuring-npm/): commands/npm-audit.html.
    # No <main>: section#content holds header.title (the command's h1), the page's table of
    # contents and div#_content (the text), then footer#edit; #banner is the site's bar.
    Generator(
        "npm docs",
        tuple(
            (Path("/usr/lib/node_modules/npm/docs/output") / part, "*.html")
            for part in ("commands", "using-npm", "configuring-npm")
        ),
        marker='id="_content"',
        content="header.title, #_content",
        furniture="#banner, #table_of_contents, footer#edit",
    ),
    # DocBook XSL (valgrind's manual with its own nav tables; bzip2, xtrans and xsltproc
    # single pages): the body's one classed div (div.chapter, .book, .article, .set,
    # .refentry) is the text; the unclassed body divs are the "<< prev  Up  next >>" tables,
    # and div.toc the chapter's table of contents (DocBook's navheader/navfooter too).
    Generator(
        "DocBook XSL",
        (
            (Path("/usr/share/doc/valgrind/html"), "*.html"),
            (Path("/usr/share/doc/bzip2"), "*.html"),
            (Path("/usr/share/doc/xtrans-dev"), "*.html"),
            (XMLSOFT, "xsltproc.html"),
        ),
        marker="DocBook XSL",
        content="body > div[class]",
        furniture="body > div:not([class]), div.navheader, div.navfooter, div.toc",
    ),
    # GNU Texinfo 6.7/6.8 (libffi's split manual; bc, nettle and time as single pages):
    # no content element (6.7 writes everything flat into the body), so the body is the
    # container and the furniture is each node's "Next: … Previous: … Up: …" panel
    # (div.header; div.nav-panel in 7.x), the node menus (table.menu) and the tables of
    # contents.
    Generator(
        "Texinfo",
        (
            (Path("/usr/share/doc/libffi8/html"), "*.html"),
            (Path("/usr/share/doc/bc"), "*.html"),
            (Path("/usr/share/doc/nettle-dev"), "*.html"),
            (Path("/usr/share/doc/time"), "*.html"),
        ),
        marker='content="makeinfo"',
        content="body",
        furniture="div.header, div.nav-panel, table.menu, div.contents, div.shortcontents, "
        "h2.contents-heading, h2.shortcontents-heading, div.Contents_element",
    ),
    # Python 2's LaTeX2HTML "mkhowto" (httplib2's reference in the Google Cloud SDK):
    # the body between two div.navigation blocks (prev/up/next icons and titles, the
    # "Release 0.3, documentation updated on…" line).
    Generator(
        "LaTeX2HTML",
        ((Path("/usr/lib/google-cloud-sdk/platform/gsutil/third_party/httplib2/ref"), "*.html"),),
        marker="navigation",
        content="body",
        furniture="div.navigation",
    ),
    # xmlsoft.org's site stylesheet (libxslt's pages and API modules): nested tables, no
    # classes. The text is the pale cell (bgcolor #fffacd) of the right-hand column; the
    # left column (width 200) holds the "Main Menu", "API Indexes" and "Related links"
    # boxes, and the top table the site's banner.
    Generator(
        "xmlsoft site",
        ((XMLSOFT, "*.html"), (XMLSOFT / "html", "*.html"), (XMLSOFT / "EXSLT", "*.html")),
        marker='bgcolor="#8b7765"',
        content='td[valign="top"][bgcolor="#8b7765"]:not([width]) td[bgcolor="#fffacd"]',
        furniture='td[valign="top"][width="200"], body > table:first-of-type h1',
    ),
)


@dataclass
class Page:
    generator: str
    path: Path
    markup: str
    has_main: bool
    paragraphs: list[str]  # normalised text
    furniture: list[str]
    gold_key_chars: int


@dataclass
class Outcome:
    """One arm on one page."""

    text: str
    ms: float
    failed: bool = False
    found: list[bool] = field(default_factory=list)  # per paragraph
    leaked: list[bool] = field(default_factory=list)  # per furniture string


def normalised(text: str) -> str:
    return " ".join(text.split())


def key(text: str) -> str:
    """Letters and digits, case-folded: what is compared (see the module docstring)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in folded if ch.isalnum())


def sample(generator: Generator, per_generator: int) -> list[Path]:
    """Pages spread evenly over each root's files sorted by path; the roots share the quota,
    a root with fewer pages than its share leaving the rest to the others."""
    pools = [_candidates(generator, root, glob) for root, glob in generator.roots]
    chosen: list[Path] = []
    remaining = per_generator
    for left, pool in enumerate(sorted(pools, key=len)):
        quota = min(len(pool), remaining // (len(pools) - left))
        remaining -= quota
        chosen.extend(pool[i * len(pool) // quota] for i in range(quota))
    return sorted(chosen)


def _candidates(generator: Generator, root: Path, glob: str) -> list[Path]:
    paths = [
        p
        for p in sorted(root.glob(glob))
        if p.is_file()
        and p.stat().st_size >= MIN_PAGE_BYTES
        and not any(part in str(p) for part in generator.skip)
    ]
    return [p for p in paths if generator.marker in p.read_text(errors="replace")]


def own_text(node: Any) -> str:
    """A node's text without that of the gold elements inside it."""
    parts: list[str] = []
    stack = [node.child] if node.child is not None else []
    while stack:
        current = stack.pop()
        if current.next is not None:
            stack.append(current.next)
        if current.tag == "-text":
            parts.append(current.text_content or "")
        elif current.tag == "br":
            parts.append(" ")
        elif current.tag not in GOLD_TAGS and current.child is not None:
            stack.append(current.child)
    return normalised("".join(parts))


def outermost(nodes: Iterable[Any]) -> list[Any]:
    """The nodes not inside another of them (a selector list may match nested elements)."""
    nodes = list(nodes)
    ids = {n.mem_id for n in nodes}
    kept = []
    for node in nodes:
        parent = node.parent
        while parent is not None and parent.mem_id not in ids:
            parent = parent.parent
        if parent is None:
            kept.append(node)
    return kept


def gold(generator: Generator, path: Path, markup: str) -> Page:
    """A page's content paragraphs and furniture strings, by the generator's selectors."""
    tree = LexborHTMLParser(markup)
    for node in tree.css(INVISIBLE):
        node.decompose()
    furniture_nodes = outermost(tree.css(generator.furniture))
    raw_furniture: list[str] = []
    for node in furniture_nodes:
        raw_furniture.append(normalised(node.text(deep=True, separator=" ")))
        raw_furniture.extend(
            normalised(n.text(deep=True, separator=" ")) for n in node.css(FURNITURE_TAGS)
        )
    # Removed before the gold is read: in-container furniture is not content.
    for node in furniture_nodes:
        node.decompose()
    containers = outermost(tree.css(generator.content))
    paragraphs: list[str] = []
    container_text = []
    for container in containers:
        container_text.append(container.text(deep=True, separator=" "))
        for node in container.css(", ".join(sorted(GOLD_TAGS))):
            if node.mem_id == container.mem_id:
                continue
            text = own_text(node)
            if len(text) >= MIN_PARAGRAPH:
                paragraphs.append(text)
    content_key = key(" ".join(container_text))
    furniture = [
        text
        for text in dict.fromkeys(raw_furniture)
        if len(text) >= MIN_FURNITURE and key(text) and key(text) not in content_key
    ]
    return Page(
        generator=generator.name,
        path=path,
        markup=markup,
        has_main=has_main(markup),
        paragraphs=list(dict.fromkeys(paragraphs)),
        furniture=furniture,
        gold_key_chars=len(content_key),
    )


def has_main(markup: str) -> bool:
    """Whether html_document reads only a part of the page (its `_main_content` rule: a
    <main>, role=main, or a sole <article>)."""
    tree = LexborHTMLParser(markup)
    return (
        tree.css_first("main") is not None
        or tree.css_first("[role=main]") is not None
        or len(tree.css("article")) == 1
    )


def subspace_text(markup: str) -> str:
    _, blocks = html_document(markup, MAX_DEPTH)
    return "\n\n".join(b.text for b in blocks)


def trafilatura_arm(favor_recall: bool) -> Callable[[str], str]:
    import trafilatura

    def run(markup: str) -> str:
        text = trafilatura.extract(
            markup, include_comments=False, include_tables=True, favor_recall=favor_recall
        )
        return text or ""

    return run


def run_arm(extract: Callable[[str], str], pages: list[Page]) -> list[Outcome]:
    """Two passes over every page; the second is kept (the first warms caches and imports)."""
    outcomes: list[Outcome] = []
    for _ in range(2):
        outcomes = []
        for page in pages:
            started = time.perf_counter()
            failed = False
            try:
                text = extract(page.markup)
            except ExtractionFailed:
                text, failed = "", True
            outcomes.append(Outcome(text, (time.perf_counter() - started) * 1000, failed))
    for page, outcome in zip(pages, outcomes, strict=True):
        score(page, outcome)
    return outcomes


def score(page: Page, outcome: Outcome) -> None:
    output_key = key(outcome.text)
    outcome.found = [key(p) in output_key for p in page.paragraphs]
    outcome.leaked = [key(f) in output_key for f in page.furniture]


def combined(pages: list[Page], ours: list[Outcome], theirs: list[Outcome]) -> list[Outcome]:
    """Ours where html_document reads only the page's main part; theirs where it reads all."""
    return [o if p.has_main else t for p, o, t in zip(pages, ours, theirs, strict=True)]


def mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def summarise(pages: list[Page], outcomes: list[Outcome]) -> dict[str, Any]:
    recall = [sum(o.found) / len(o.found) for o in outcomes if o.found]
    leak = [sum(o.leaked) / len(o.leaked) for o in outcomes if o.leaked]
    length = [
        len(key(o.text)) / p.gold_key_chars
        for p, o in zip(pages, outcomes, strict=True)
        if p.gold_key_chars
    ]
    times = [o.ms for o in outcomes]
    return {
        "pages": len(pages),
        "recall": mean(recall),
        "leak": mean(leak),
        "length": statistics.median(length) if length else None,
        "median_ms": statistics.median(times),
        "total_ms": sum(times),
        "empty": sum(1 for o in outcomes if not o.text.strip()),
    }


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


ARM_LABELS = {"subspace": "s", "trafilatura": "t", "trafilatura_recall": "tr", "combined": "c"}


def table(rows: list[tuple[str, int, int, dict[str, dict[str, Any]]]]) -> str:
    """One row per generator; each cell holds the arms in the order s / t / tr / c."""
    timed = ("subspace", "trafilatura", "trafilatura_recall")  # `combined` is not run

    def cells(
        summaries: dict[str, dict[str, Any]],
        name: str,
        arms: Iterable[str],
        shown: Callable[[Any], str],
    ) -> str:
        return " / ".join(shown(summaries[arm][name]) for arm in arms)

    lines = [
        "| generator | pages | has main | recall % (s / t / tr / c) | leak % (s / t / tr / c) "
        "| length (s / t / tr / c) | median ms (s / t / tr) | total ms (s / t / tr) |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for generator, count, with_main, summaries in rows:
        length = cells(summaries, "length", ARM_LABELS, lambda v: "–" if v is None else f"{v:.2f}")
        lines.append(
            f"| {generator} | {count} | {with_main} "
            f"| {cells(summaries, 'recall', ARM_LABELS, percent)} "
            f"| {cells(summaries, 'leak', ARM_LABELS, percent)} | {length} "
            f"| {cells(summaries, 'median_ms', timed, lambda v: f'{v:.1f}')} "
            f"| {cells(summaries, 'total_ms', timed, lambda v: f'{v:.0f}')} |"
        )
    return "\n".join(lines)


def examples(pages: list[Page], arms: dict[str, list[Outcome]], count: int) -> str:
    """Per arm, the pages with the most content lost and the most furniture leaked, with one
    paragraph or string each, to read the figures by."""
    lines: list[str] = []
    for arm, outcomes in arms.items():
        pairs = list(zip(pages, outcomes, strict=True))
        lost = sorted(
            (p for p in pairs if p[1].found),
            key=lambda po: sum(po[1].found) / len(po[1].found),
        )[:count]
        leaky = sorted(
            (p for p in pairs if p[1].leaked),
            key=lambda po: -sum(po[1].leaked) / len(po[1].leaked),
        )[:count]
        lines.append(f"\n{arm}: least recall")
        for page, outcome in lost:
            missing = next(
                (t for t, f in zip(page.paragraphs, outcome.found, strict=True) if not f), ""
            )
            lines.append(
                f"  {percent(sum(outcome.found) / len(outcome.found))} {page.path}"
                f"\n      lost: {missing[:110]!r}"
            )
        lines.append(f"{arm}: most leak")
        for page, outcome in leaky:
            leaked = [t for t, f in zip(page.furniture, outcome.leaked, strict=True) if f]
            lines.append(
                f"  {percent(sum(outcome.leaked) / len(outcome.leaked))} {page.path}"
                f"\n      leaked: {[t[:60] for t in leaked[:3]]!r}"
            )
    return "\n".join(lines)


def load_pages(per_generator: int, only: Path | None) -> list[Page]:
    pages: list[Page] = []
    seen: set[str] = set()
    for generator in GENERATORS:
        paths = sample(generator, per_generator) if only is None else []
        if only is not None and generator.marker in only.read_text(errors="replace"):
            paths = [only]
        for path in paths:
            data = path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            if digest in seen:  # httplib2's index.html is its ref.html
                continue
            seen.add(digest)
            pages.append(gold(generator, path, decode_text(data)))
        if only is not None and pages:
            break
    return pages


def show_page(page: Page, arms: dict[str, list[Outcome]]) -> None:
    """Everything about one page: its gold and each arm's output and misses."""
    print(f"{page.generator}: {page.path} has_main={page.has_main}")
    print(f"paragraphs ({len(page.paragraphs)}):")
    for text in page.paragraphs:
        print(f"  {text[:120]!r}")
    print(f"furniture ({len(page.furniture)}):")
    for text in page.furniture:
        print(f"  {text[:120]!r}")
    for arm, (outcome,) in arms.items():
        print(f"\n== {arm}: {outcome.ms:.1f} ms\n{outcome.text[:3000]}")
        print(
            "-- lost:",
            [t[:80] for t, f in zip(page.paragraphs, outcome.found, strict=True) if not f],
        )
        print(
            "-- leaked:", [t[:80] for t, f in zip(page.furniture, outcome.leaked, strict=True) if f]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-generator", type=int, default=PER_GENERATOR)
    parser.add_argument("--examples", type=int, default=0, help="worst pages shown per arm")
    parser.add_argument("--page", type=Path, help="show one page's gold and outputs")
    parser.add_argument("--json", action="store_true", help="also print one JSON object")
    args = parser.parse_args()
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)  # "discarding data" notes
    logging.getLogger("htmldate").setLevel(logging.CRITICAL)
    pages = load_pages(args.per_generator, args.page)
    if not pages:
        raise SystemExit("no pages found")
    ours = run_arm(subspace_text, pages)
    theirs = run_arm(trafilatura_arm(favor_recall=False), pages)
    theirs_recall = run_arm(trafilatura_arm(favor_recall=True), pages)
    arms = {
        "subspace": ours,
        "trafilatura": theirs,
        "trafilatura_recall": theirs_recall,
        "combined": combined(pages, ours, theirs_recall),
    }
    if args.page is not None:
        show_page(pages[0], arms)
        return
    rows: list[tuple[str, int, int, dict[str, dict[str, Any]]]] = []
    groups = [g.name for g in GENERATORS if any(p.generator == g.name for p in pages)]
    for name in [*groups, "all"]:
        indices = [i for i, p in enumerate(pages) if name in ("all", p.generator)]
        subset = [pages[i] for i in indices]
        summaries = {
            arm: summarise(subset, [outcomes[i] for i in indices]) for arm, outcomes in arms.items()
        }
        rows.append((name, len(subset), sum(p.has_main for p in subset), summaries))
    versions = {
        name: importlib.metadata.version(name) for name in ("trafilatura", "selectolax", "lxml")
    }
    print(
        f"{len(pages)} pages, {sum(len(p.paragraphs) for p in pages)} content paragraphs, "
        f"{sum(len(p.furniture) for p in pages)} furniture strings; "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
    )
    print(
        "s = subspace, t = trafilatura, tr = trafilatura favor_recall, c = combined "
        "(s where html_document finds a <main>, role=main or sole <article>, else tr; "
        "computed from those runs)\n"
    )
    print(table(rows))
    everything = rows[-1][3]
    ours_all = everything["subspace"]
    ratios = ", ".join(
        f"{arm} {everything[arm]['median_ms'] / ours_all['median_ms']:.1f}x median, "
        f"{everything[arm]['total_ms'] / ours_all['total_ms']:.1f}x total"
        for arm in ("trafilatura", "trafilatura_recall")
    )
    print(f"\ntime over subspace's, same run: {ratios}")
    empty = ", ".join(f"{arm} {everything[arm]['empty']}" for arm in arms)
    print(f"pages with no text out (failed or empty): {empty}")
    if args.examples:
        print(examples(pages, arms, args.examples))
    if args.json:
        print(
            json.dumps(
                {
                    "versions": versions,
                    "rows": [
                        {"generator": g, "pages": n, "has_main": m, "arms": s}
                        for g, n, m, s in rows
                    ],
                }
            )
        )


if __name__ == "__main__":
    main()
