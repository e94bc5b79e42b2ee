"""How fast a load is written, and how fast the lexical index takes it in, on one embedded
Postgres.

Builds the corpus of bench/search_latency.py at a smaller size (sentences as bullets, 100 to a
page, and abstracts uploaded as text files, extracted and split into chunks) and loads it into
a new workspace per run: files (upload, extraction, chunks), then bullets, each timed; then
one round of the lexical follower applies the load's events to the index, timed. Embedding is
left out: it is the indexer's, the same whatever the lexical leg does.

    python bench/load_rate.py [--bullets 20000] [--file-chunks 4000] [--runs 2] [--corpus PATH]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import DEFAULT_CORPUS
from bench.search_latency import BULLETS_PER_PAGE, bullets, documents
from subspace import commands
from subspace.config import Settings
from subspace.database import Database, open_database
from subspace.ingest.outline import OutlineItem
from subspace.ingest.worker import extract_pending
from subspace.search.lexical.index.follower import LexicalFollower
from subspace.splitting import split_text
from subspace.workspaces import create_workspace


def load(db: Database, settings: Settings, name: str, texts: list[str],
         files: list[tuple[str, str]]) -> tuple[float, float]:  # fmt: skip
    """Seconds to upload and extract the files, and to write the pages of bullets."""
    with db.pool.connection() as conn:
        cx = db.context(create_workspace(conn, name), settings)
    started = time.perf_counter()
    for file_name, body in files:
        commands.upload_file(cx, file_name, body.encode(), content_type="text/plain")
    extract_pending(db, settings, workers=2)
    files_done = time.perf_counter()
    for number, start in enumerate(range(0, len(texts), BULLETS_PER_PAGE)):
        items = [OutlineItem(t) for t in texts[start : start + BULLETS_PER_PAGE]]
        commands.create_page_from_outline(cx, f"Notes {number}", items)
    return files_done - started, time.perf_counter() - files_done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bullets", type=int, default=20_000)
    parser.add_argument("--file-chunks", type=int, default=4_000)
    parser.add_argument("--runs", type=int, default=2, help="loads, each into a new workspace")
    parser.add_argument(
        "--corpus", type=Path, default=DEFAULT_CORPUS, help="SciFact corpus.jsonl, or another"
    )
    args = parser.parse_args()
    texts, files = bullets(args.bullets, args.corpus), documents(args.file_chunks, args.corpus)
    chunks = sum(len(split_text(body)) for _, body in files)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp), providers="fake", index_sweep_s=0)
        db = open_database(settings, pool_size=4)
        follower = LexicalFollower(db, settings)
        try:
            follower.run_once()  # the index of the empty database, built before the loads
            for run in range(args.runs):
                files_s, bullets_s = load(db, settings, f"run {run}", texts, files)
                started = time.perf_counter()
                followed = follower.run_once()
                index_s = time.perf_counter() - started
                print(
                    f"run {run}: {len(files):,} files ({chunks:,} chunks) in {files_s:.1f} s = "
                    f"{chunks / files_s:,.0f} chunks/s; {len(texts):,} bullets in "
                    f"{bullets_s:.1f} s = {len(texts) / bullets_s:,.0f} bullets/s; all "
                    f"{(chunks + len(texts)) / (files_s + bullets_s):,.0f} chunks/s; the "
                    f"lexical index took in {followed.documents:,} documents in {index_s:.1f} s "
                    f"= {followed.documents / index_s:,.0f} documents/s",
                    flush=True,
                )
        finally:
            follower.close()
            db.close()


if __name__ == "__main__":
    main()
