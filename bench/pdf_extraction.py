"""PDF text extraction, pypdf beside pypdfium2: what each reader gets out of real PDFs, how
fast, and how it fails on damaged files.

Subspace reads a PDF with pypdf's `page.extract_text()` (`ingest.extract._pdf_document`). The
other arm is PDFium through pypdfium2: `PdfDocument(data)[i].get_textpage().get_text_range()`
(`get_text_bounded()` returns the same text, but marks a line-end hyphen with U+0002 where
get_text_range writes U+FFFE). PDFium ends lines with CRLF and, where it takes a line-end
hyphen for a soft one, drops the hyphen and the line break and writes U+FFFE there
("tem\\ufffepor"); the pdfium arm turns CRLF into LF and each U+FFFE or U+0002 back into
"-\\n", so both arms give Subspace's cleaning the same shape of text (it decides which
hyphenated words to join). How many marks PDFium wrote is shown as "marks".

Per file and overall, each cell "pypdf / pdfium":

- pages: the page count each reader gives; no text: pages with no letter or digit;
- chars: non-whitespace characters of all pages (whitespace differs by reader: CRLF, spaces);
- ms/page (median) and total ms (document open included): the last of --passes runs over
  the file, both readers in the same run, one after the other;
- ligatures: characters U+FB00-U+FB06 (ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ) left in the text: a word written
  with one ("ﬁle") does not match the word typed ("file");
- hyphen ends: lines ending in "-" (a word broken at a line end, or a compound);
- dict %, joined, split: the "words run together or split" proxy, on the text Subspace would
  index (the pages through `drop_running_lines` and `clean_pdf_page`). Words are lowercased
  runs of letters, 3 letters or more; dict % is the share of them in the English word list
  (--words, by default /usr/share/dict/words from Debian's wamerican). A word list, unlike a
  comparison of the two readers, judges each reader on its own: two readers that both run
  "ofthe" together agree with each other but not with the list. Technical words (asn, der)
  are missing from the list for both readers alike, so the difference between the two
  columns is the signal, not the level. Two counts say what the misses are: joined, words of
  6+ letters not in the list that are two listed words of 3+ letters written together
  ("pagesmay"); split, two neighbouring letter runs that are a listed word of 5+ letters
  when put together while one of them is not a word ("Shippin g", "Unite d"), with only
  whitespace between them. Without a word list, dict % becomes the share of words that the
  other reader's text of the same file also holds, and joined and split are not counted;
- shared %, order %: reading order, page by page, on the text Subspace would index: each
  page's 8-word shingles (letters and digits, NFKC, case-folded) that occur once in each
  reader's page. shared is their number over the union of both readers' shingles (text one
  reader reads as a sentence and the other interleaves with another column, or drops, is
  not shared); order is the Kendall-tau-like share of pairs of shared shingles that the two
  readers put in the same order (two columns read in swapped order score about 0.5). The
  pages where the readers disagree most (lowest shared × order) are printed with an excerpt
  of each reader from the last shingle both read in the same place, so a person can see
  whose continuation is the one on the page.

Damaged input: each reader, in a child process of its own (a crash or hang is reported, not
suffered), on the first half of the bytes of a real PDF (the first file, or each --damaged), on
100 KB of random bytes, and on the same bytes after a "%PDF-1.7" header (what detect_kind
routes to the PDF reader whatever the file is called). pypdf runs as Subspace runs it
(strict=False); "caught" says whether `_pdf_document`'s except clause catches what it raises.

    python bench/pdf_extraction.py [PDF or folder ...] [--words /usr/share/dict/words]
        [--examples 6] [--passes 2] [--damaged PDF ...]

Defaults to libtasn1's and shared-mime-info's manuals from /usr/share/doc and the two PDFs
in this repository. Needs pypdfium2 (`pip install pypdfium2`); it is imported here only.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import io
import itertools
import logging
import multiprocessing
import random
import re
import statistics
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from subspace.ingest.extract import clean_pdf_page, drop_running_lines

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PDFS = (
    Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf"),
    Path("/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf"),
    ROOT / "src/subspace/demo/files/office-field-guide.pdf",
    ROOT / "tests/relevance/product/workspace/files/acquiring-agreement-summary-2027.pdf",
)
WORDS = Path("/usr/share/dict/words")
READERS = ("pypdf", "pdfium")
SHINGLE = 8
EXCERPT = 200
MIN_WORD = 3  # letters; "of", "to" and one-letter runs say nothing about spacing
MIN_JOINED = 6
MIN_SPLIT = 5
RANDOM_BYTES = 100 * 1024
DAMAGED_TIMEOUT_S = 120.0
SOFT_HYPHEN_MARKS = ("\ufffe", "\x02")  # get_text_range's, get_text_bounded's

LETTERS = re.compile(r"[^\W\d_]+")
ALNUM = re.compile(r"[^\W_]+")
LIGATURES = re.compile("[\ufb00-\ufb06]")
HAS_TEXT = re.compile(r"[^\W_]")


@dataclass
class Reading:
    """One reader's pass over one file: the text of each page and the time it took."""

    pages: list[str] = field(default_factory=list)
    page_ms: list[float] = field(default_factory=list)
    open_ms: float = 0.0
    marks: int = 0  # PDFium's soft-hyphen marks turned back into "-\n"
    error: str | None = None

    @property
    def total_ms(self) -> float:
        return self.open_ms + sum(self.page_ms)


def read_pypdf(data: bytes) -> Reading:
    """As `_pdf_document` reads: strict=False, an empty user password tried."""
    from pypdf import PdfReader

    reading = Reading()
    started = time.perf_counter()
    reader = PdfReader(io.BytesIO(data), strict=False)
    if reader.is_encrypted:
        reader.decrypt("")
    count = len(reader.pages)
    reading.open_ms = (time.perf_counter() - started) * 1000
    for index in range(count):
        started = time.perf_counter()
        text = reader.pages[index].extract_text() or ""
        reading.page_ms.append((time.perf_counter() - started) * 1000)
        reading.pages.append(text)
    return reading


def read_pdfium(data: bytes) -> Reading:
    """get_text_range per page, CRLF made LF and soft-hyphen marks made "-\\n" (timed too)."""
    import pypdfium2 as pdfium

    reading = Reading()
    started = time.perf_counter()
    document = pdfium.PdfDocument(data)
    try:
        count = len(document)
        reading.open_ms = (time.perf_counter() - started) * 1000
        for index in range(count):
            started = time.perf_counter()
            page = document[index]
            textpage = page.get_textpage()
            raw = textpage.get_text_range()
            textpage.close()
            page.close()
            text = raw.replace("\r\n", "\n").replace("\r", "\n")
            for mark in SOFT_HYPHEN_MARKS:
                reading.marks += text.count(mark)
                text = text.replace(mark, "-\n")
            reading.page_ms.append((time.perf_counter() - started) * 1000)
            reading.pages.append(text)
    finally:
        document.close()
    return reading


READ: dict[str, Callable[[bytes], Reading]] = {"pypdf": read_pypdf, "pdfium": read_pdfium}


def read_file(data: bytes, passes: int) -> dict[str, Reading]:
    """Each reader over the file `passes` times, alternating; the last pass is kept."""
    readings: dict[str, Reading] = {}
    for _ in range(passes):
        for name in READERS:
            try:
                readings[name] = READ[name](data)
            except Exception as exc:  # a real file one reader cannot read is a finding
                readings[name] = Reading(error=f"{type(exc).__name__}: {exc}"[:120])
    return readings


def indexed_pages(pages: list[str]) -> list[str]:
    """The pages as `_pdf_document` keeps them (running lines dropped, pages cleaned)."""
    return [clean_pdf_page(page) for page in drop_running_lines(pages)]


# Words: the run-together / split proxy.


def load_words(path: Path) -> set[str] | None:
    if not path.is_file():
        return None
    words = set()
    for line in path.read_text(errors="replace").splitlines():
        word = line.strip().lower()
        if word and LETTERS.fullmatch(word):
            words.add(word)
    return words


@dataclass
class WordStats:
    words: int = 0
    known: int = 0
    joined: int = 0
    split: int = 0
    joined_examples: Counter[str] = field(default_factory=Counter)
    split_examples: Counter[str] = field(default_factory=Counter)

    def add(self, other: WordStats) -> None:
        self.words += other.words
        self.known += other.known
        self.joined += other.joined
        self.split += other.split
        self.joined_examples.update(other.joined_examples)
        self.split_examples.update(other.split_examples)


def is_word(token: str, words: set[str]) -> bool:
    """A listed word; single letters other than "a" and "i" are not (the list has them all)."""
    return (len(token) >= 2 or token in ("a", "i")) and token in words


def word_stats(text: str, vocabulary: set[str], dictionary: bool) -> WordStats:
    stats = WordStats()
    matches = list(LETTERS.finditer(text))
    runs = [match.group().lower() for match in matches]
    for token in runs:
        if len(token) < MIN_WORD:
            continue
        stats.words += 1
        if token in vocabulary:
            stats.known += 1
        elif (
            dictionary
            and len(token) >= MIN_JOINED
            and any(
                token[:cut] in vocabulary and token[cut:] in vocabulary
                for cut in range(MIN_WORD, len(token) - MIN_WORD + 1)
            )
        ):
            stats.joined += 1
            stats.joined_examples[token] += 1
    if dictionary:
        for first, second in itertools.pairwise(matches):
            left, right = first.group().lower(), second.group().lower()
            whole = left + right
            if (
                text[first.end() : second.start()].isspace()  # "user's" is no split
                and len(whole) >= MIN_SPLIT
                and whole in vocabulary
                and not (is_word(left, vocabulary) and is_word(right, vocabulary))
            ):
                stats.split += 1
                stats.split_examples[f"{left} {right}"] += 1
    return stats


# Reading order.


def shingles(text: str) -> dict[tuple[str, ...], tuple[int, int]]:
    """A page's 8-word shingles that occur once: shingle -> (token index, char offset)."""
    tokens = [
        (unicodedata.normalize("NFKC", m.group()).casefold(), m.start())
        for m in ALNUM.finditer(text)
    ]
    seen: Counter[tuple[str, ...]] = Counter()
    first: dict[tuple[str, ...], tuple[int, int]] = {}
    for index in range(len(tokens) - SHINGLE + 1):
        key = tuple(t for t, _ in tokens[index : index + SHINGLE])
        seen[key] += 1
        first.setdefault(key, (index, tokens[index][1]))
    return {key: place for key, place in first.items() if seen[key] == 1}


def inversions(values: list[int]) -> int:
    """Pairs out of order, by merge sort."""
    if len(values) < 2:
        return 0
    middle = len(values) // 2
    left, right = values[:middle], values[middle:]
    count = inversions(left) + inversions(right)
    left.sort()
    right.sort()
    i = 0
    for value in right:
        while i < len(left) and left[i] <= value:
            i += 1
        count += len(left) - i
    return count


@dataclass
class PageOrder:
    file: str
    page: int  # 1-based
    union: int
    shared: int
    pairs: int
    inverted: int
    excerpts: tuple[str, str]

    @property
    def agreement(self) -> float:
        shared = self.shared / self.union if self.union else 1.0
        order = 1 - self.inverted / self.pairs if self.pairs else 1.0
        return shared * order


def flat(text: str) -> str:
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())


def page_order(file: str, page: int, ours: str, theirs: str, excerpt: int) -> PageOrder:
    a, b = shingles(ours), shingles(theirs)
    common = sorted(set(a) & set(b), key=lambda key: a[key][0])
    positions = [b[key][0] for key in common]
    pairs = len(common) * (len(common) - 1) // 2
    inverted = inversions(positions)
    # Where the two part: the shared shingle after which one reader goes on elsewhere (the
    # largest difference between the jumps each makes to the next shared shingle).
    start_a = start_b = 0
    if common:
        worst = -1
        start_a, start_b = a[common[0]][1], b[common[0]][1]
        for here, after in itertools.pairwise(common):
            gap = abs((b[after][0] - b[here][0]) - (a[after][0] - a[here][0]))
            if gap > worst:
                worst, start_a, start_b = gap, a[here][1], b[here][1]
    excerpts = (flat(ours[start_a:])[:excerpt], flat(theirs[start_b:])[:excerpt])
    union = len(set(a) | set(b))
    return PageOrder(file, page, union, len(common), pairs, inverted, excerpts)


# Per file.


@dataclass
class FileResult:
    name: str
    readings: dict[str, Reading]
    words: dict[str, WordStats]
    orders: list[PageOrder]
    one_sided: list[tuple[int, str]]  # (page, the reader that found text there)


def measure(path: Path, passes: int, words: set[str] | None, excerpt: int) -> FileResult:
    readings = read_file(path.read_bytes(), passes)
    indexed = {name: indexed_pages(r.pages) for name, r in readings.items()}
    stats: dict[str, WordStats] = {}
    for name in READERS:
        other = indexed[READERS[1 - READERS.index(name)]]
        vocabulary = words
        if vocabulary is None:
            vocabulary = {t.lower() for page in other for t in LETTERS.findall(page)}
        stats[name] = word_stats("\n\n".join(indexed[name]), vocabulary, words is not None)
    orders: list[PageOrder] = []
    one_sided: list[tuple[int, str]] = []
    ours, theirs = readings["pypdf"].pages, readings["pdfium"].pages
    if len(ours) == len(theirs):
        for index, (a, b) in enumerate(zip(indexed["pypdf"], indexed["pdfium"], strict=True)):
            has_a, has_b = bool(HAS_TEXT.search(ours[index])), bool(HAS_TEXT.search(theirs[index]))
            if has_a != has_b:
                one_sided.append((index + 1, "pypdf" if has_a else "pdfium"))
            if a.strip() and b.strip():
                orders.append(page_order(path.name, index + 1, a, b, excerpt))
    return FileResult(path.name, readings, stats, orders, one_sided)


# Damaged input.


def damaged_trial(reader: str, data: bytes) -> str:
    """What one reader does with bad bytes, in words (runs in a child process)."""
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    from pypdf.errors import PdfReadError

    caught = (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError)
    started = time.perf_counter()
    try:
        reading = READ[reader](data)
    except Exception as exc:
        ms = (time.perf_counter() - started) * 1000
        kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
        message = " ".join(str(exc).split())[:90]
        verdict = "caught" if isinstance(exc, caught) else "NOT caught"
        return f"raises {kind}: {message!r} ({verdict}; {ms:.0f} ms)"
    ms = (time.perf_counter() - started) * 1000
    with_text = sum(1 for page in reading.pages if HAS_TEXT.search(page))
    chars = sum(len("".join(page.split())) for page in reading.pages)
    return (
        f"returns {len(reading.pages)} pages, {with_text} with text, {chars:,} chars ({ms:.0f} ms)"
    )


def run_damaged(reader: str, data: bytes) -> str:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        future = pool.submit(damaged_trial, reader, data)
        try:
            return future.result(timeout=DAMAGED_TIMEOUT_S)
        except FutureTimeout:
            for process in list(getattr(pool, "_processes", {}).values()):
                process.kill()
            return f"no answer in {DAMAGED_TIMEOUT_S:.0f} s (child killed)"
        except BrokenProcessPool:
            return "the child process died (crash)"


def damaged_cases(sources: list[Path]) -> list[tuple[str, bytes]]:
    cases = []
    for source in sources:
        data = source.read_bytes()
        half = len(data) // 2
        cases.append(
            (f"first half of {source.name} ({half:,} of {len(data):,} bytes)", data[:half])
        )
    noise = random.Random(0).randbytes(RANDOM_BYTES)
    return [
        *cases,
        ("100 KB of random bytes", noise),
        ('"%PDF-1.7" + 100 KB of random bytes', b"%PDF-1.7\n" + noise),
    ]


# Output.


def pair(values: tuple[str, str]) -> str:
    return " / ".join(values)


def both(result: FileResult, shown: Callable[[Reading, WordStats], str]) -> str:
    cells = []
    for name in READERS:
        reading = result.readings[name]
        cells.append("error" if reading.error else shown(reading, result.words[name]))
    return " / ".join(cells)


def percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}" if whole else "–"


def nonspace(pages: list[str]) -> int:
    return sum(len("".join(page.split())) for page in pages)


def hyphen_ends(pages: list[str]) -> int:
    return sum(1 for page in pages for line in page.splitlines() if line.rstrip().endswith("-"))


def ligatures(pages: list[str]) -> int:
    return sum(len(LIGATURES.findall(page)) for page in pages)


def no_text(pages: list[str]) -> int:
    return sum(1 for page in pages if not HAS_TEXT.search(page))


def order_cells(orders: list[PageOrder]) -> tuple[str, str]:
    union = sum(o.union for o in orders)
    pairs = sum(o.pairs for o in orders)
    return (
        percent(sum(o.shared for o in orders), union),
        percent(pairs - sum(o.inverted for o in orders), pairs),
    )


def row(result: FileResult) -> str:
    shared, order = order_cells(result.orders)
    cells = [
        result.name,
        both(result, lambda r, _: str(len(r.pages))),
        both(result, lambda r, _: str(no_text(r.pages))),
        both(result, lambda r, _: f"{nonspace(r.pages):,}"),
        both(result, lambda r, _: f"{statistics.median(r.page_ms or [0]):.2f}"),
        both(result, lambda r, _: f"{r.total_ms:.0f}"),
        both(result, lambda _, w: percent(w.known, w.words)),
        both(result, lambda _, w: str(w.joined)),
        both(result, lambda _, w: str(w.split)),
        both(result, lambda r, _: str(ligatures(r.pages))),
        both(result, lambda r, _: str(hyphen_ends(r.pages))),
        str(result.readings["pdfium"].marks),
        shared,
        order,
    ]
    return "| " + " | ".join(cells) + " |"


def overall(results: list[FileResult]) -> str:
    def total(shown: Callable[[Reading, WordStats], float]) -> str:
        cells = []
        for name in READERS:
            values = [
                shown(r.readings[name], r.words[name])
                for r in results
                if not r.readings[name].error
            ]
            cells.append(f"{sum(values):,.0f}")
        return " / ".join(cells)

    medians, dicts = [], []
    for name in READERS:
        readings = [r.readings[name] for r in results if not r.readings[name].error]
        medians.append(f"{statistics.median([ms for x in readings for ms in x.page_ms]):.2f}")
        stats = WordStats()
        for result in results:
            if not result.readings[name].error:
                stats.add(result.words[name])
        dicts.append(percent(stats.known, stats.words))
    shared, order = order_cells([o for r in results for o in r.orders])
    cells = [
        f"**all ({len(results)} files)**",
        total(lambda r, _: len(r.pages)),
        total(lambda r, _: no_text(r.pages)),
        total(lambda r, _: nonspace(r.pages)),
        " / ".join(medians),
        total(lambda r, _: r.total_ms),
        " / ".join(dicts),
        total(lambda _, w: w.joined),
        total(lambda _, w: w.split),
        total(lambda r, _: ligatures(r.pages)),
        total(lambda r, _: hyphen_ends(r.pages)),
        f"{sum(r.readings['pdfium'].marks for r in results):,}",
        shared,
        order,
    ]
    return "| " + " | ".join(cells) + " |"


def table(results: list[FileResult], dictionary: bool) -> str:
    words = "dict %" if dictionary else "in other %"
    lines = [
        f"| file | pages | no text | chars | ms/page median | total ms | {words} | joined "
        "| split | ligatures | hyphen ends | marks (pdfium) | shared % | order % |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    lines.extend(row(result) for result in results)
    if len(results) > 1:
        lines.append(overall(results))
    return "\n".join(lines)


def collect(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.suffix.lower() == ".pdf"))
        elif path.is_file():
            found.append(path)
        else:
            print(f"skipped (not found): {path}", file=sys.stderr)
    unique: dict[str, Path] = {}
    for path in found:  # the same bytes under two names count once
        unique.setdefault(hashlib.sha256(path.read_bytes()).hexdigest(), path)
    return list(unique.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pdfs", nargs="*", type=Path, help="PDF files or folders")
    parser.add_argument("--words", type=Path, default=WORDS, help="English word list")
    parser.add_argument("--examples", type=int, default=6, help="most-disagreeing pages shown")
    parser.add_argument("--passes", type=int, default=2, help="runs per file; the last is timed")
    parser.add_argument("--excerpt", type=int, default=EXCERPT, help="characters per excerpt")
    parser.add_argument(
        "--damaged", type=Path, nargs="+", help="the PDFs whose first half is tried"
    )
    parser.add_argument("--no-damaged", action="store_true", help="skip the damaged inputs")
    args = parser.parse_args()
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # as _pdf_document does
    paths = collect(args.pdfs or list(DEFAULT_PDFS))
    if not paths:
        raise SystemExit("no PDFs found")
    words = load_words(args.words)
    results = [measure(path, args.passes, words, args.excerpt) for path in paths]

    import pypdfium2.version

    print(
        f"{len(paths)} PDFs; pypdf {importlib.metadata.version('pypdf')}, pypdfium2 "
        f"{importlib.metadata.version('pypdfium2')} (PDFium {pypdfium2.version.PDFIUM_INFO}); "
        + (f"word list {args.words} ({len(words):,} words)" if words else "no word list")
    )
    print("each cell: pypdf / pdfium; shared % and order % compare the two\n")
    print(table(results, words is not None))

    for name in READERS:
        failed = [f"{r.name}: {r.readings[name].error}" for r in results if r.readings[name].error]
        if failed:
            print(f"\n{name} failed on: " + "; ".join(failed))
    counts = [
        r for r in results if len(r.readings["pypdf"].pages) != len(r.readings["pdfium"].pages)
    ]
    if counts:
        print("\npage counts differ (no order check): " + ", ".join(r.name for r in counts))
    one_sided = [f"{r.name} p{page} ({who})" for r in results for page, who in r.one_sided]
    print("\npages with text from one reader only (which): " + (", ".join(one_sided) or "none"))
    if words is not None:
        for name in READERS:
            stats = WordStats()
            for result in results:
                stats.add(result.words[name])
            joined = ", ".join(w for w, _ in stats.joined_examples.most_common(10))
            split = ", ".join(f"'{w}'" for w, _ in stats.split_examples.most_common(10))
            print(f"\n{name} most frequent joined: {joined or '–'}")
            print(f"{name} most frequent split: {split or '–'}")

    orders = sorted((o for r in results for o in r.orders), key=lambda o: o.agreement)
    shown = [o for o in orders if o.agreement < 1][: args.examples]
    print(f"\n{len(shown)} pages where the readers' order disagrees most")
    for order in shown:
        print(
            f"\n{order.file} page {order.page}: shared {percent(order.shared, order.union)} %, "
            f"same order {percent(order.pairs - order.inverted, order.pairs)} % "
            f"({order.shared} of {order.union} shingles)"
        )
        for name, text in zip(READERS, order.excerpts, strict=True):
            print(f"  {name:6}: {text!r}")

    if not args.no_damaged:
        print("\ndamaged input (each reader in a child process of its own)")
        for label, data in damaged_cases(args.damaged or paths[:1]):
            print(f"\n{label}")
            for name in READERS:
                print(f"  {name:6}: {run_damaged(name, data)}")


if __name__ == "__main__":
    main()
