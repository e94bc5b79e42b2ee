"""Ingestion figures: extraction throughput on mixed documents, and `subspace import` of
1,000 Markdown files. Runs against a fresh embedded Postgres in a temporary folder.

    python bench/ingest.py [--files 300] [--markdown 1000] [--corpus PATH]
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.samples import make_docx, make_pdf

from bench.corpus import DEFAULT_CORPUS, abstracts, sentences


def write_mixed(folder: Path, count: int, corpus: Path = DEFAULT_CORPUS) -> int:
    """PDF, DOCX and HTML files of SciFact abstracts, in turn; returns total bytes."""
    folder.mkdir(parents=True)
    docs = itertools.islice(abstracts(corpus), count * 3)
    total = 0
    for index in range(count):
        group = [next(docs) for _ in range(3)]
        kind = ("pdf", "docx", "html")[index % 3]
        path = folder / f"doc{index:05d}.{kind}"
        if kind == "pdf":
            pages = ["\n".join(_wrap(f"{title}. {text}")) for title, text in group]
            data = make_pdf(pages)
        elif kind == "docx":
            paragraphs = [p for title, text in group for p in (title, *sentences(text))]
            data = make_docx(paragraphs)
        else:
            body = "".join(
                f"<h2>{title}</h2>" + "".join(f"<p>{s}</p>" for s in sentences(text))
                for title, text in group
            )
            data = f"<html><body>{body}</body></html>".encode()
        path.write_bytes(data)
        total += len(data)
    return total


def _wrap(text: str, width: int = 90) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if len(line) + len(word) + 1 > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*lines, line]


def write_markdown(folder: Path, count: int, corpus: Path = DEFAULT_CORPUS) -> None:
    folder.mkdir(parents=True)
    for index, (title, text) in enumerate(itertools.islice(abstracts(corpus), count)):
        bullets = "\n".join(f"- {s}" for s in sentences(text))
        (folder / f"note{index:05d}.md").write_text(f"# {title}\n\n## Abstract\n{bullets}\n")


def measure_extraction(home: Path, folder: Path, total_bytes: int, count: int) -> None:
    os.environ["SUBSPACE_HOME"] = str(home)
    from subspace.config import Settings
    from subspace.database import open_database
    from subspace.db import queries
    from subspace.ingest.importer import finish_extraction, import_path

    settings = Settings.from_env()
    db = open_database(settings)
    try:
        cx = db.default_context(settings)
        with cx.transaction() as conn:
            kb = queries.default_knowledge_base(conn, cx.actor.workspace_id).id
        started = time.perf_counter()
        report = import_path(cx, folder, kb_id=kb)
        stored = time.perf_counter() - started
        started = time.perf_counter()
        finish_extraction(db, settings, report)
        extracted = time.perf_counter() - started
    finally:
        db.close()
    failed = report.counts().get("failed", 0)
    size_mb = total_bytes / 1e6
    print(f"mixed folder: {count} files (PDF, DOCX, HTML), {size_mb:.2f} MB, failed {failed}")
    print(f"  store blobs: {stored:.2f} s")
    print(
        f"  extraction (each file in its own capped process): {extracted:.2f} s = "
        f"{count / extracted:.1f} files/s, {total_bytes / 1e6 / extracted:.2f} MB/s"
    )


def measure_import(home: Path, folder: Path, count: int) -> None:
    env = {**os.environ, "SUBSPACE_HOME": str(home)}
    command = [sys.executable, "-m", "subspace", "import", str(folder), "--json"]
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    first = time.perf_counter() - started
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    again = time.perf_counter() - started
    print(f"subspace import of {count} Markdown files: {first:.2f} s ({count / first:.0f} files/s)")
    print(f"  the same folder again (all duplicates): {again:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=300, help="mixed documents to extract")
    parser.add_argument("--markdown", type=int, default=1000, help="Markdown files to import")
    parser.add_argument(
        "--corpus", type=Path, default=DEFAULT_CORPUS, help="SciFact corpus.jsonl, or another"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        total = write_mixed(root / "mixed", args.files, args.corpus)
        measure_extraction(root / "home-mixed", root / "mixed", total, args.files)
        write_markdown(root / "markdown", args.markdown, args.corpus)
        measure_import(root / "home-md", root / "markdown", args.markdown)


if __name__ == "__main__":
    main()
