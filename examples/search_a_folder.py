"""Import a folder of notes and search it through the Python API.

Run it from the repository root:

    .venv/bin/python examples/search_a_folder.py                        # the notes beside it
    .venv/bin/python examples/search_a_folder.py ~/notes "tulip bulbs"  # a folder and a query

With SUBSPACE_DATABASE_URL unset it starts an embedded Postgres under a temporary
SUBSPACE_HOME and removes it at the end; with it set, the notes go into that database's
default workspace, in a knowledge base called "Example notes".
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from subspace import commands
from subspace.config import Settings
from subspace.database import open_database
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.ingest.importer import finish_extraction, import_path
from subspace.providers.registry import create_provider
from subspace.search.service import SearchRequest, search

NOTES = Path(__file__).parent / "notes"


def main(folder: Path, query: str) -> None:
    # Settings come from the environment (SUBSPACE_*, PROVIDERS, OPENAI_API_KEY), as for the
    # `subspace` command. Without a database to reach, a throwaway home holds the embedded one.
    settings = Settings.from_env()
    home = None
    if not settings.database_url:
        home = Path(tempfile.mkdtemp(prefix="subspace-example-"))
        settings = replace(settings, home=home)

    # Starts (or reaches) Postgres and applies the migrations: a fresh home is ready to use.
    db = open_database(settings)
    try:
        # A context says who acts: here the default workspace's owner.
        cx = db.default_context(settings)
        kb = commands.find_knowledge_base(cx, "Example notes")
        kb = kb or commands.create_knowledge_base(cx, "Example notes")

        # Markdown and text files become pages (titled by their first heading, or by the
        # file name when they have none, as these notes); PDF, DOCX and HTML become files,
        # whose text finish_extraction() pulls out. Importing the same folder twice adds nothing.
        report = import_path(cx, folder, kb_id=kb.id)
        finish_extraction(db, settings, report)
        print(f"imported {folder}: {report.counts()}")

        # Every write left an event in the outbox; the indexer embeds what they changed.
        # The server runs it in the background; drain() runs it here until nothing is left.
        provider = create_provider(settings)
        EmbeddingsFollower(db, settings, provider).drain()

        # One hybrid search (words and meaning, fused), limited to the notes just imported.
        response = search(
            cx, db.searcher(provider), SearchRequest(query=query, kb_ids=[kb.id], limit=5)
        )
        print(f"{len(response.rows)} results for {query!r}:")
        for number, row in enumerate(response.rows, start=1):
            # A ref (node:…, page:…, file:…:chunk, mail:…) is what `subspace read`, the
            # agent tools and the web app open; breadcrumb is the page title and parent bullets.
            where = " › ".join(row.breadcrumb) or row.title
            print(f"{number}. [{row.type}] {where}: {row.passage}")
            print(f"   {row.ref}  score {row.score:.4f}")
    finally:
        db.close()  # also stops the embedded server, if one was started
        if home is not None:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(Path(args[0]) if args else NOTES, args[1] if len(args) > 1 else "ferry card")
