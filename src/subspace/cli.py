"""The `subspace` command."""

from __future__ import annotations

import dataclasses
import json
import logging
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

import click
from rich.markup import escape
from rich.table import Table

from subspace.answers.strategy_names import NAMES as STRATEGY_NAMES
from subspace.answers.strategy_names import RAG
from subspace.cli_support import (
    _WORKSPACE_OPTION,
    _database,
    _jsonable,
    _settings,
    _table,
    _when,
    _workspace_context,
    console,
    err_console,
)
from subspace.config import Settings
from subspace.errors import SubspaceError
from subspace.search.options import (
    ANSWERS,
    DEFAULT_GREP_LIMIT,
    DEFAULT_SEARCH_LIMIT,
    GREP_MAX_RESULTS,
    KIND_ALIASES,
    KINDS,
    MODES,
    RANKERS,
)
from subspace.sources.cli import sources_group

# What only some commands use is imported by them: `subspace --help` and a search do not
# pay for the database driver, numpy or the importer's extractors at start.
if TYPE_CHECKING:
    from subspace.context import Context
    from subspace.ingest.importer import ImportReport
    from subspace.providers.base import EmbeddingProvider

SHORT_ID_CHARS = 8  # of a key id in `keys list`; `keys revoke` takes any unique start
LEG_LABELS = {"lexical": "keyword", "vector": "meaning"}


def _plural(count: int, one: str, many: str | None = None) -> str:
    """`1 item`, `2 items`."""
    return f"{count} {one if count == 1 else many or one + 's'}"


def _provider(settings: Settings, *, one_shot: bool = False) -> EmbeddingProvider:
    from subspace.providers.base import ProviderError
    from subspace.providers.registry import create_provider

    try:
        return create_provider(settings, one_shot=one_shot)
    except (SubspaceError, ProviderError) as exc:
        raise click.ClickException(str(exc)) from None


def _setup_logging(settings: Settings) -> None:
    from subspace.logs import configure_logging

    configure_logging(settings.log_level, settings.log_format)


@click.group()
@click.version_option(package_name="subspace")
def main() -> None:
    """Subspace: hybrid search over your pages, files and mail, from this command line and
    an HTTP API (`subspace serve`)."""


@main.command()
@click.option("--no-demo", is_flag=True, help="Do not seed the demo pages on first start.")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=None,
    help="Web processes behind the port (default: SUBSPACE_WORKERS, or one per core).",
)
def serve(no_demo: bool, workers: int | None) -> None:
    """Start Postgres, migrate, and serve the web app and the HTTP API from several processes.
    Ctrl-C or SIGTERM stops the server and the embedded Postgres."""
    from subspace.first_start import initialize_workspace, signin_link
    from subspace.local_server import announce, withdraw
    from subspace.processes import serve_processes, worker_count
    from subspace.server import check_address_free, check_server_settings, stop_on_sigterm

    settings = _settings()
    if workers is not None:
        settings = dataclasses.replace(settings, workers=workers)
    try:
        check_server_settings(settings)
        check_address_free(settings)
    except SubspaceError as exc:
        raise click.ClickException(exc.message) from None
    _setup_logging(settings)
    with stop_on_sigterm():
        try:
            with _database(settings, pool_size=settings.db_pool_size, creates=True) as db:
                if initialize_workspace(db, settings, demo=not no_demo):
                    click.echo(
                        "Prepared the default workspace" + ("." if no_demo else " with demo pages.")
                    )
                url = signin_link(db, settings)
                click.echo(
                    f"Subspace is starting on http://{settings.host}:{settings.port} "
                    f"({_plural(worker_count(settings), 'web process', 'web processes')})"
                )
                click.echo(f"Sign in: {url}")
                click.echo(
                    f"  (the link works once, within {settings.signin_code_minutes} minutes; "
                    "`subspace signin` prints a new one)"
                )
                announce(db, settings)  # a search from the command line asks this server
                try:
                    serve_processes(settings, db.dsn)
                finally:
                    withdraw(settings)
        except KeyboardInterrupt:  # a signal before or after serving; the database is closed
            pass
    click.echo("Subspace stopped.")


@main.command("import")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--kb",
    "kb_name",
    default=None,
    help="Knowledge base to import into (created if "
    "missing). Default: the workspace's default knowledge base.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def import_(path: Path, kb_name: str | None, as_json: bool) -> None:
    """Import a file or a folder: Markdown and text become pages, PDF, DOCX and HTML become
    files, .eml and .mbox become mail. Importing again updates what changed in place, follows
    files moved within the folder, and lists (never archives) pages whose files are gone."""
    from subspace import commands
    from subspace.db import queries
    from subspace.ingest.importer import finish_extraction, import_path, importable_files
    from subspace.progress import progress_for

    settings = _settings()
    with _database(settings, creates=True) as db:
        cx = db.default_context(settings)
        if kb_name is None:
            with cx.transaction() as conn:
                kb_id = queries.default_knowledge_base(conn, cx.actor.workspace_id).id
        else:
            found = commands.find_knowledge_base(cx, kb_name)
            kb_id = (found or commands.create_knowledge_base(cx, kb_name)).id
        total = len(importable_files(path))
        with progress_for(err_console, disable=as_json) as progress:
            task = progress.add_task("Importing", total=total)
            report = import_path(cx, path, kb_id=kb_id, on_file=lambda _: progress.advance(task))
            extracting = progress.add_task("Extracting text", total=None)
            finish_extraction(db, settings, report)
            progress.update(extracting, total=1, completed=1)
    counts = report.counts()
    if as_json:
        rows = [
            {"source": r.source, "kind": r.kind, "outcome": r.outcome, "detail": r.detail}
            for r in report.rows
        ]
        click.echo(json.dumps({"counts": counts, "rows": rows}, indent=2))
        return
    _print_import_report(report)


# The import outcomes in the order the summary shows them, and those worth a line each.
IMPORT_OUTCOMES = ("added", "updated", "moved", "unchanged", "missing", "failed", "skipped")
IMPORT_OUTCOMES_LISTED = {"moved", "missing", "failed", "skipped"}


def _print_import_report(report: ImportReport) -> None:
    details = _table("source", "kind", "outcome", "detail", title="To look at")
    for column in (details.columns[0], details.columns[3]):
        column.overflow = "fold"  # a name or reason is printed whole, over lines if need be
    for row in report.rows:
        if row.outcome in IMPORT_OUTCOMES_LISTED or row.detail:  # a cut text, a long header
            details.add_row(row.source, row.kind, row.outcome, row.detail)
    if details.row_count:
        console.print(details)
    counts = report.counts()
    outcomes = [o for o in IMPORT_OUTCOMES if counts.get(o)] or ["added"]
    summary = _table("kind", *outcomes, title="Import")
    for kind in ("page", "file", "mail", ""):
        rows = [r for r in report.rows if r.kind == kind]
        if rows:
            summary.add_row(
                kind or "other", *(str(sum(r.outcome == o for r in rows)) for o in outcomes)
            )
    summary.add_row("total", *(str(counts.get(o, 0)) for o in outcomes))
    console.print(summary)


@main.command("search")
@click.argument("query", default="")
@click.option("--kb", "kb_names", multiple=True, help="Knowledge base name (repeatable).")
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice([*KINDS, *KIND_ALIASES]),
)
@click.option("--mode", type=click.Choice(MODES), default="hybrid")
@click.option("--limit", type=int, default=DEFAULT_SEARCH_LIMIT)
@click.option(
    "--tag",
    "tags",
    multiple=True,
    nargs=3,
    metavar="NAME OP VALUE",
    help="Tag filter, e.g. --tag status eq draft or --tag due between 2026-12-01..2026-12-31 "
    "(repeatable).",
)
@click.option(
    "--ranker",
    type=click.Choice(RANKERS),
    default=None,
    help="Lexical ranker (default: SUBSPACE_LEXICAL_RANKER).",
)
@click.option(
    "--answers",
    type=click.Choice(ANSWERS),
    default="include",
    help="Bullets answer runs wrote: include (below their sources), exclude or only.",
)
@click.option(
    "--min-similarity",
    type=click.FloatRange(-1, 1),
    default=None,
    help="Similarity a row only the vector leg found must reach (default: the model's floor).",
)
@click.option("--explain", is_flag=True, help="Show the fusion terms of each row.")
@click.option("--json", "as_json", is_flag=True, help="Print the full response as JSON.")
def search_command(
    query: str,
    kb_names: tuple[str, ...],
    kinds: tuple[str, ...],
    mode: str,
    limit: int,
    tags: tuple[tuple[str, str, str], ...],
    ranker: str | None,
    answers: str,
    min_similarity: float | None,
    explain: bool,
    as_json: bool,
) -> None:
    """Search pages, bullets, memory, files and mail. With a server running on this home,
    the server answers (its model is loaded already); else the command searches itself."""
    from subspace.local_server import running_server, search_by_server

    body: dict[str, Any] = {
        "query": query,
        "kinds": list(kinds) or None,
        "tags": [_tag_filter(name, op, value) for name, op, value in tags] or None,
        "mode": mode,
        "limit": limit,
        "explain": explain,
        "ranker": ranker,
        "answers": answers,
        "min_similarity": min_similarity,
    }
    settings = _settings()
    answer = None
    server = running_server(settings)
    if server:
        try:
            answer = search_by_server(*server, body, kb_names)
        except SubspaceError as exc:  # the server's refusal, as this command's own would be
            raise click.ClickException(exc.message) from None
        if answer and explain:
            answer["notes"].append(f"Answered by the server at {server[0]}.")
    if answer is None:
        answer = _search_here(settings, body, kb_names)
    if as_json:
        click.echo(json.dumps(answer, indent=2))
        return
    _print_search(answer, query, explain)


def _search_here(
    settings: Settings, body: dict[str, Any], kb_names: tuple[str, ...]
) -> dict[str, Any]:
    """The search run by this process: the response as the API would send it."""
    from subspace.search.request import SearchRequest
    from subspace.search.service import search

    provider = _provider(settings, one_shot=True) if body["mode"] != "lexical" else None
    with _database(settings) as db:
        cx = db.default_context(settings)
        kb_ids = [_kb_id(cx, name) for name in kb_names] or None
        response = search(cx, db.searcher(provider), SearchRequest(**body, kb_ids=kb_ids))
    answer: dict[str, Any] = json.loads(json.dumps(dataclasses.asdict(response), default=str))
    return answer


def _print_search(answer: dict[str, Any], query: str, explain: bool) -> None:
    """A search's answer (as the API sends it) as people read it: the correction, one table
    row a result (where it is, the passage, and the ref `subspace read` takes; which leg found
    it at which rank, and the fused score), the notes, and a footer, all within 80 columns."""
    if answer["corrections"]:
        import re

        shown = query
        for typed, meant in answer["corrections"].items():
            shown = re.sub(rf"(?<!\w){re.escape(typed)}(?!\w)", meant, shown)
        typed_words = ", ".join(answer["corrections"])
        click.echo(f'Showing results for "{shown}" (you typed {typed_words}).')
    table = _table("#", "result", "found by", "score")
    table.columns[1].ratio = 1
    table.columns[1].overflow = "fold"
    for number, row in enumerate(answer["rows"], start=1):
        title = " › ".join(row["breadcrumb"]) if row["breadcrumb"] else row["title"]
        kind = f"{row['type']}, answer" if row["answer"] else row["type"]
        passage = " ".join(row["passage"].split())[:160]
        found_by = "\n".join(
            f"{LEG_LABELS.get(name, name)} #{leg['rank']}" for name, leg in row["legs"].items()
        )
        table.add_row(
            str(number),
            f"[bold]{escape(title)}[/bold] [dim]({kind})[/dim]\n{escape(passage)}\n"
            f"[cyan]{escape(row['ref'])}[/cyan]",
            found_by,
            f"{row['score']:.4f}",
        )
        if explain and row["explain"]:
            terms = ", ".join(
                f"{t['leg']} {t['weight']:g}/({t['rank']}+60)" for t in row["explain"]["terms"]
            )
            table.add_row("", f"[dim]{escape(terms)}[/dim]", "", "")
    if answer["rows"]:
        console.print(table)
    footer = [*answer["notes"]]
    footer.append(f"{_plural(len(answer['rows']), 'result')} in {answer['took_ms']:.0f} ms.")
    if answer["degraded"]:
        footer.append(f"Degraded: {'; '.join(answer['degraded'])}.")
    if explain and answer["steps"]:
        timed = ", ".join(f"{step} {ms:.1f}" for step, ms in answer["steps"].items())
        footer.append(f"Steps (ms): {timed}.")
    for line in footer:
        click.echo(textwrap.fill(line, width=80, subsequent_indent="  "))


@main.command("grep")
@click.argument("pattern")
@click.option("--regex", is_flag=True, help="Treat PATTERN as a Postgres regular expression.")
@click.option(
    "--limit",
    type=int,
    default=DEFAULT_GREP_LIMIT,
    help=f"Most matches to print, 1 to {GREP_MAX_RESULTS}.",
)
@click.option("--cursor", default=None, help="Continue where an earlier grep stopped.")
def grep_command(pattern: str, regex: bool, limit: int, cursor: str | None) -> None:
    """Every occurrence of PATTERN in bullets, file text and mail."""
    from subspace.search.grep import grep

    if not 1 <= limit <= GREP_MAX_RESULTS:
        raise click.BadParameter(
            f"{limit} is outside 1 to {GREP_MAX_RESULTS}; give a number in that range, and "
            "page through more matches with --cursor.",
            param_hint="--limit",
        )
    settings = _settings()
    with _database(settings) as db:
        result = grep(
            db.default_context(settings), pattern, regex=regex, limit=limit, cursor=cursor
        )
    click.echo(result.render())
    if result.next_cursor:
        click.echo(f"More: run again with --cursor {result.next_cursor}")


@main.command("read")
@click.argument("item")
def read_command(item: str) -> None:
    """Print a page (by id or title, ignoring case) as an outline, or the item a ref from
    search or grep names: node:<id>, file:<id>, file:<id>:<n>, mail:<id>."""
    from subspace.search.reading import read_ref, ref_target

    if not item.strip():
        raise click.ClickException(
            "The page title is empty. Give a title, a page id, or a ref such as node:<id> "
            "from `subspace search` or `subspace grep`."
        )
    settings = _settings()
    with _database(settings) as db:
        cx = db.default_context(settings)
        ref = ref_target(item)
        if ref is None:
            _refuse_malformed_ref(item)
            rows = _pages_titled(cx, item)
            if not rows:
                raise click.ClickException(
                    f"No page titled {item!r}. Give its id or title, or a ref such as "
                    "node:<id> from `subspace search` or `subspace grep`."
                )
            if len(rows) > 1:
                _ambiguous_title(item, rows)
            ref = ("page", rows[0]["id"], None)
        click.echo(read_ref(cx, *ref))


def _refuse_malformed_ref(item: str) -> None:
    """Exit 2 when `item` starts like a ref (`node:`, `file:` …) but is not one."""
    from subspace.search.refs import kind_named

    prefix, colon, _ = item.strip().partition(":")
    spec = kind_named(prefix) if colon else None
    if spec is None:
        return
    first, *more = spec.ref
    shape = f"{prefix}:<{first}>" + "".join(f"[:<{part}>]" for part in more)
    click.echo(
        f"{item!r} is not a ref: a {spec.name} ref is {shape}, where <{first}> is a full id "
        "(36 characters) as `subspace search` prints it.",
        err=True,
    )
    raise SystemExit(2)


def _ambiguous_title(item: str, rows: list[dict[str, Any]]) -> None:
    """Exit 2 listing the pages titled `item`, each with the ref that reads it."""
    table = _table("ref", "title", "updated")
    table.columns[0].no_wrap = True  # the ref is what the reader types back: never cut
    table.columns[0].min_width = len("page:") + 36
    table.columns[1].overflow = "fold"
    for row in rows:
        state = " (archived)" if row["archived_at"] else ""
        table.add_row(f"page:{row['id']}", escape(row["title"]) + state, _when(row["updated_at"]))
    click.echo(f"{len(rows)} pages are titled {item!r}; read one by its ref:", err=True)
    err_console.print(table)
    raise SystemExit(2)


@main.command("ask")
@click.argument("question")
@click.option(
    "--strategy",
    type=click.Choice(STRATEGY_NAMES),
    default=RAG,
    show_default=True,
    help="rag: an agent that searches and reads; rag-pageindex: chooses pages, files and mail "
    "from their titles and outlines; rag-direct: one hybrid search, then the answer.",
)
@click.option("--page", default=None, help="File the question on this page (title or id).")
@click.option(
    "--json", "as_json", is_flag=True, help='Print {"run_id", "strategy", "found", "answer"}.'
)
def ask_command(question: str, strategy: str, page: str | None, as_json: bool) -> None:
    """Ask the workspace a question: the answer streams in as cited bullets under a
    "/<strategy> <question>" bullet (on --page, or a "Questions" page). A running server
    answers it; without one it is answered here. Ctrl-C cancels it."""
    import threading

    from subspace.answers import runs

    settings = _settings()
    with _database(settings, pool_size=4) as db:
        cx = db.default_context(settings)
        page_id = _page_id(cx, page) if page is not None else None
        run = runs.enqueue_run(cx, question, strategy, page_id=page_id)
        with db.pool.connection() as conn:
            served = runs.server_running(conn)
        worker: threading.Thread | None = None
        if not served:
            engine = runs.RunEngine(
                db, settings, _provider(settings), strategies=runs.default_strategies()
            )
            claimed = engine.claim(run.id)
            if claimed is not None:
                worker = threading.Thread(target=engine.execute, args=(claimed,), daemon=True)
                worker.start()
        out = err_console if as_json else console
        steps: list[runs.Step] = []
        tail = runs.tail_steps(db, cx.actor.workspace_id, run.id)
        while True:
            # Ctrl-C may land anywhere in a step, printing included: the run is cancelled and
            # the steps after the last one kept are read again.
            try:
                step = next(tail, None)
                if step is None:
                    break
                steps.append(step)
                if step.kind == "bullet":
                    refs = " ".join(f"[{ref}]" for ref in step.data.get("refs", []))
                    text = escape(f"- {step.data.get('text', '')} {refs}".rstrip())
                    out.print(text, soft_wrap=True)
                elif step.kind in ("tool", "error"):
                    out.print(f"[dim]{escape(step.summary)}[/dim]", soft_wrap=True)
            except KeyboardInterrupt:
                runs.request_cancel(cx, run.id)
                out.print("[dim]Cancelling…[/dim]")
                tail = runs.tail_steps(db, cx.actor.workspace_id, run.id, after=_last_seq(steps))
        if worker is not None:
            worker.join(timeout=10)
        with db.pool.connection() as conn:
            done = runs.get_run(conn, cx.actor.workspace_id, run.id)
    if as_json:
        answer = [{"text": b["text"], "refs": b["refs"]} for b in runs.answer_of(steps)]
        click.echo(
            json.dumps(
                {
                    "run_id": str(done.id),
                    "strategy": done.strategy,
                    "found": bool(done.found),
                    "answer": answer,
                },
                indent=2,
            )
        )
    if done.status != "done":
        raise click.ClickException(f"The run {done.status}: {done.error or 'no answer'}.")


def _last_seq(steps: list[Any]) -> int:
    return int(steps[-1].seq) if steps else 0


def _page_id(cx: Context, page: str) -> UUID:
    """A page named by its id or its title (ignoring case)."""
    try:
        return UUID(page)
    except ValueError:
        pass
    rows = _pages_titled(cx, page)
    if not rows:
        raise click.ClickException(f"No page titled {page!r}. Give its id or title.")
    return UUID(str(rows[0]["id"]))


def _pages_titled(cx: Context, title: str) -> list[dict[str, Any]]:
    """The pages titled `title` (ignoring case and spacing) that are not deleted: live ones
    first, the most recently changed first."""
    from subspace.text import clean_text

    with cx.transaction() as conn:
        return conn.execute(
            "select id, title, archived_at, updated_at from kb.pages "
            "where workspace_id = %s and lower(title) = lower(%s) "
            "and deleted_at is null order by archived_at is not null, updated_at desc",
            (cx.actor.workspace_id, " ".join(clean_text(title).split())),
        ).fetchall()


def _tag_filter(name: str, op: str, value: str) -> dict[str, str]:
    """One --tag, as a search request carries it; `between` takes its two values as
    LOW..HIGH in the one VALUE."""
    if op != "between":
        return {"tag": name, "op": op, "value": value}
    low, dots, high = value.partition("..")
    if not (dots and low and high):
        raise click.BadParameter(
            f"between needs two values; write them as --tag {name} between LOW..HIGH, "
            "e.g. 2026-12-01..2026-12-31.",
            param_hint="--tag",
        )
    return {"tag": name, "op": op, "value": low, "value2": high}


def _kb_id(cx: Any, name: str) -> UUID:
    from subspace import commands
    from subspace.local_server import no_base_named

    found = commands.find_knowledge_base(cx, name)
    if found is None:
        raise click.ClickException(no_base_named(name))
    return found.id


@main.group(invoke_without_command=True)
@click.pass_context
def indexer(ctx: click.Context) -> None:
    """Run the embeddings indexer and the lexical index's follower on their own (several may
    share one database; one process per index folder follows)."""
    if ctx.invoked_subcommand is not None:
        return
    import signal
    import threading

    from subspace.background import start_indexing

    settings = _settings()
    _setup_logging(settings)
    provider = _provider(settings)
    with _database(settings) as db:
        background = start_indexing(db, settings, provider)
        stopped = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stopped.set())
        click.echo(f"Indexing with {provider.name} ({provider.model}). Ctrl-C stops.")
        try:
            stopped.wait()
        except KeyboardInterrupt:
            pass
        finally:
            background.stop()
    click.echo("EmbeddingsFollower stopped.")


@indexer.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def indexer_status_command(as_json: bool) -> None:
    """Show the embeddings' backlog, lag, dead letters and model, and where the lexical index
    stands: its folder, documents, and the writes it has not applied yet."""
    from subspace.indexer.status import indexer_status
    from subspace.providers.registry import provider_name, resolve_model
    from subspace.search.lexical.index.status import lexical_status

    settings = _settings()
    name = provider_name(settings)
    with _database(settings) as db, db.pool.connection() as conn:
        status = indexer_status(conn, name, resolve_model(settings, name)).as_dict()
        lexical = lexical_status(conn, settings).as_dict()
    if as_json:
        click.echo(json.dumps(status | {"lexical": lexical}, indent=2))
        return
    table = _table("", "")
    table.show_header = False
    for key, value in status.items():
        table.add_row(key.replace("_", " "), str(value))
    for key, value in lexical.items():
        shown = "not built yet" if value is None and key == "documents" else value
        table.add_row(f"lexical index {key.replace('_', ' ')}", str(shown))
    console.print(table)


@main.command()
@click.option("--kb", "kb_name", default=None, help="Only this knowledge base.")
def reindex(kb_name: str | None) -> None:
    """Rebuild everything derived: extract every file's text again, drop and re-embed every
    page, node, file and mail chunk, and build the lexical index anew. Refuses while a server
    runs on the database."""
    from subspace.indexer.reindex import reembed, refuse_if_served
    from subspace.ingest.worker import reextract_files
    from subspace.progress import progress_for
    from subspace.search.lexical.index.follower import LexicalFollower

    settings = _settings()
    _setup_logging(settings)
    with _database(settings) as db:
        refuse_if_served(db)
        provider = _provider(settings)
        kb_id = None
        if kb_name is not None:
            kb_id = _kb_id(db.default_context(settings), kb_name)
        with progress_for(err_console) as progress:
            files = progress.add_task("Extracting file text", total=None)
            ready, failed = reextract_files(
                db, settings, kb_id, lambda n: progress.advance(files, n)
            )
            progress.update(files, total=ready + failed, completed=ready + failed)
            items = progress.add_task("Embedding", total=None)
            count, outcome = reembed(
                db,
                settings,
                provider,
                kb_id,
                progress=lambda n: progress.advance(items, n),
                total=lambda n: progress.update(items, total=n),
            )
            lexical = progress.add_task("Building the lexical index", total=None)
            follower = LexicalFollower(db, settings)
            try:
                documents = follower.rebuild(
                    lambda _, n: progress.update(lexical, completed=n, description=(
                        f"Building the lexical index ({n:,} documents)"))
                )  # fmt: skip
            finally:
                follower.close()
            progress.update(lexical, total=documents, completed=documents)
    click.echo(
        f"Re-extracted {ready} files ({failed} failed). Re-embedded {count} items with "
        f"{provider.model}: {outcome.embedded} texts sent to the provider, {outcome.reused} "
        f"reused unchanged, {outcome.unchanged + outcome.embedded + outcome.reused} chunks in all. "
        f"Built the lexical index: {documents:,} documents."
    )


@main.command("eval")
@click.argument("dataset_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--provider",
    "provider_name",
    type=click.Choice(["fake", "local", "onnx", "openai"]),
    default=None,
    help="Embedding provider (default: the configured one).",
)
@click.option(
    "--typos",
    is_flag=True,
    help="Swap two inner letters in about half the long words of each query, deterministically.",
)
@click.option(
    "--sweep", is_flag=True, help="Also try several vector-leg weights and similarity floors."
)
@click.option(
    "--titled",
    is_flag=True,
    help="Make each title its page's title and the text its bullet, search both, and try "
    "several title weights.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the report as Markdown to this file.",
)
def eval_command(dataset_dir: Path, provider_name: str | None, typos: bool, sweep: bool,
                 titled: bool, as_json: bool, out: Path | None) -> None:  # fmt: skip
    """Measure retrieval quality on a collection, for every arm of the search and for
    reference systems (bm25s, RRF of bm25s and the same vectors, LanceDB's hybrid search, and
    on BEIR the source document's all-words ts_rank_cd), in one run on a fresh database.

    DATASET_DIR is a BEIR collection (nDCG@10, Recall@100, MRR@10 on bullets) or a judged
    workspace with judgments.jsonl (success@1, nDCG@10, and whether each query that should
    find nothing does, over every kind, as the palette searches)."""
    from subspace.evaluation.answers import ANSWER_LABELS, ANSWER_METRICS
    from subspace.evaluation.runner import METRIC_LABELS, CachingProvider, read_dataset, run_eval
    from subspace.providers.base import ProviderError
    from subspace.providers.registry import create_provider

    settings = _settings()
    _setup_logging(settings)
    logging.getLogger("subspace").setLevel(logging.WARNING)
    try:
        dataset = read_dataset(dataset_dir)
        provider = CachingProvider(create_provider(settings, provider_name),
                                   settings.home / "eval-cache")  # fmt: skip
        report = run_eval(settings, dataset, provider, typos=typos, sweep=sweep, titled=titled,
                          progress=lambda m: err_console.print(f"[dim]{m}[/dim]"))  # fmt: skip
    except (SubspaceError, ProviderError) as exc:
        raise click.ClickException(str(exc)) from None
    if out is not None:
        out.write_text(report.markdown(), encoding="utf-8")
    if as_json:
        click.echo(json.dumps(report.as_json(), indent=2))
        return
    table = _table("arm", *(METRIC_LABELS[m] for m in report.metrics),
                   title=f"{report.dataset}, {report.provider} ({report.model}), "
                   f"{report.queries} queries{' with typos' if typos else ''}")  # fmt: skip
    for arm, scores in report.arms.items():
        table.add_row(arm, *(f"{scores[m]:.3f}" for m in report.metrics))
    console.print(table)
    if report.expect_empty:
        click.echo(f"{report.expect_empty} of the queries are judged to have no answer.")
    for line in report.missed_lines():
        click.echo(line)
    if report.answers:
        answers = _table("strategy", *(ANSWER_LABELS[m] for m in ANSWER_METRICS), "not cited",
                         title=report.answers_summary())  # fmt: skip
        for name, scores in report.answers.items():
            answers.add_row(name, *(f"{scores[m]:.3f}" for m in ANSWER_METRICS),
                            ", ".join(report.unanswered[name]) or "–")  # fmt: skip
        console.print(answers)
    for note in report.notes():
        click.echo(note)


@main.command()
def migrate() -> None:
    """Apply pending database migrations."""
    from subspace.database import resolve_dsn
    from subspace.db.migrate import migrate as run_migrations

    settings = _settings()
    try:
        dsn, embedded = resolve_dsn(settings)
        try:
            applied = run_migrations(dsn)
        finally:
            if embedded is not None:
                embedded.stop()
    except SubspaceError as exc:
        raise click.ClickException(exc.message) from None
    for migration in applied:
        click.echo(f"applied {migration.version:04d}_{migration.name}")
    click.echo("The database is at the newest schema.")


@main.command("openapi")
def openapi_command() -> None:
    """Print the HTTP API's OpenAPI document as docs/openapi.json holds it (default settings,
    keys sorted): `subspace openapi > docs/openapi.json`."""
    from subspace.api.app import pinned_schema

    click.echo(pinned_schema(), nl=False)


@main.command("mcp")
def mcp_command() -> None:
    """Serve the agent tools (kb.search, kb.grep, kb.read, kb.node.read) over MCP on stdin
    and stdout, for a desktop agent. Acts as the API key in SUBSPACE_API_KEY, with exactly
    that key's rights."""
    from subspace.mcp.stdio import serve_stdio

    settings = _settings()
    if not settings.api_key:
        raise click.ClickException(
            "SUBSPACE_API_KEY is not set. Create a key with `subspace keys create` and set "
            "SUBSPACE_API_KEY to it in the agent's configuration."
        )
    # stdout carries the protocol, so logs go to stderr only.
    _setup_logging(settings)
    provider = _provider(settings)
    with _database(settings) as db:
        serve_stdio(db, settings, provider)


@main.group()
def workspaces() -> None:
    """Create and list workspaces: separate tenants that share nothing."""


@workspaces.command("create")
@click.argument("name")
def workspaces_create(name: str) -> None:
    """Create a workspace with its owner and a default knowledge base; print its id."""
    from subspace.workspaces import create_workspace

    settings = _settings()
    with _database(settings) as db, db.pool.connection() as conn:
        actor = create_workspace(conn, name)
    click.echo(f"Created workspace {actor.workspace_id}.", err=True)
    click.echo(
        f"Make a key for it with `subspace keys create --workspace {actor.workspace_id}`.",
        err=True,
    )
    click.echo(str(actor.workspace_id))


@workspaces.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def workspaces_list(as_json: bool) -> None:
    """List workspaces with their ids and how much each holds."""
    from subspace.workspaces import list_workspaces

    settings = _settings()
    with _database(settings) as db, db.pool.connection() as conn:
        found = list_workspaces(conn)
    if as_json:
        click.echo(json.dumps([_jsonable(dataclasses.asdict(w)) for w in found], indent=2))
        return
    table = _id_table("pages", "files", "mail", "keys")
    for w in found:
        table.add_row(str(w.id), w.name, *(str(n) for n in (w.pages, w.files, w.mail, w.keys)))
    console.print(table)


def _id_table(*counts: str) -> Table:
    """A borderless table of id, name and counts that fits 80 columns; ids are never cut."""
    table = _table()
    table.add_column("id", no_wrap=True, min_width=36)
    table.add_column("name", min_width=10)
    for header in counts:
        table.add_column(header, justify="right", no_wrap=True, min_width=len(header))
    return table


@main.group("kb")
def kb_group() -> None:
    """List knowledge bases."""


@kb_group.command("list")
@_WORKSPACE_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def kb_list(workspace: str | None, as_json: bool) -> None:
    """List the knowledge bases with their ids and item counts (not counting deleted items)."""
    settings = _settings()
    with _database(settings) as db:
        cx = _workspace_context(db, settings, workspace)
        with cx.transaction() as conn:
            rows = conn.execute(
                "select k.id, k.name, k.is_default,"
                " (select count(*) from kb.pages p where p.workspace_id = k.workspace_id"
                "  and p.kb_id = k.id and p.deleted_at is null) as pages,"
                " (select count(*) from kb.files f where f.workspace_id = k.workspace_id"
                "  and f.kb_id = k.id and f.deleted_at is null) as files,"
                " (select count(*) from kb.mail m where m.workspace_id = k.workspace_id"
                "  and m.kb_id = k.id and m.deleted_at is null) as mail"
                " from kb.knowledge_bases k where k.workspace_id = %s order by k.name",
                (cx.actor.workspace_id,),
            ).fetchall()
    if as_json:
        click.echo(json.dumps([_jsonable(row) for row in rows], indent=2))
        return
    table = _id_table("pages", "files", "mail")
    for row in rows:
        name = row["name"] + (" (default)" if row["is_default"] else "")
        table.add_row(str(row["id"]), name, *(str(row[k]) for k in ("pages", "files", "mail")))
    console.print(table)


@main.group()
def keys() -> None:
    """Create, list and revoke API keys."""


@keys.command("create")
@click.option("--name", default="", help="A label to recognise the key by.")
@_WORKSPACE_OPTION
@click.option(
    "--admin",
    is_flag=True,
    help="An operator's key: it may also create workspaces and their keys over /api/admin.",
)
def keys_create(name: str, workspace: str | None, admin: bool) -> None:
    """Create a key for a workspace's owner and print it (shown only once)."""
    from subspace.keys import create_key

    settings = _settings()
    with _database(settings) as db:
        cx = _workspace_context(db, settings, workspace)
        with cx.transaction() as conn:
            key, token = create_key(conn, cx.actor, name, admin=admin)
    kind = "admin key" if admin else "key"
    click.echo(
        f"Created {kind} {key.id} for workspace {cx.actor.workspace_id}. Keep it secret; it is "
        "not shown again:",
        err=True,
    )
    click.echo(token)


@keys.command("list")
@_WORKSPACE_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def keys_list(workspace: str | None, as_json: bool) -> None:
    """List a workspace's keys. The table shows the start of each id, which `keys revoke`
    takes; --json shows whole ids."""
    from subspace.keys import list_keys

    settings = _settings()
    with _database(settings) as db:
        cx = _workspace_context(db, settings, workspace)
        with cx.transaction() as conn:
            found = list_keys(conn, cx.actor.workspace_id)
    if as_json:
        click.echo(json.dumps([_jsonable(vars(k)) for k in found], indent=2))
        return
    # A token starts with its workspace's part, the same for every key here: its end is what
    # tells one key from another.
    table = _table("id", "name", "token ends", "created", "last used", "revoked")
    for column in table.columns[2:]:
        column.no_wrap = True
    for k in found:
        table.add_row(
            str(k.id)[:SHORT_ID_CHARS],
            k.name + (" (admin)" if k.admin else ""),
            f"…{k.ending}" if k.ending else "(older key)",
            _when(k.created_at),
            _when(k.last_used_at),
            _when(k.revoked_at),
        )
    console.print(table)


@keys.command("revoke")
@click.argument("key_id")
@_WORKSPACE_OPTION
def keys_revoke(key_id: str, workspace: str | None) -> None:
    """Revoke a key by its id or a unique start of it: requests with it answer 401 from now on."""
    from subspace.keys import find_key_id, revoke_key

    settings = _settings()
    with _database(settings) as db:
        cx = _workspace_context(db, settings, workspace)
        with cx.transaction() as conn:
            key = revoke_key(
                conn, cx.actor.workspace_id, find_key_id(conn, cx.actor.workspace_id, key_id)
            )
    click.echo(f"Revoked key {key.id}.")


@main.command("signin")
@_WORKSPACE_OPTION
def signin(workspace: str | None) -> None:
    """Print a sign-in link with a new one-time code for the web app (of a running server,
    at SUBSPACE_PUBLIC_URL or SUBSPACE_HOST:SUBSPACE_PORT)."""
    from subspace.first_start import signin_link

    settings = _settings()
    with _database(settings) as db:
        url = signin_link(db, settings, _workspace_context(db, settings, workspace))
    click.echo(
        f"Open this link within {settings.signin_code_minutes} minutes; it works once:", err=True
    )
    click.echo(url)


@main.group()
def sessions() -> None:
    """List and end the web app's signed-in browsers."""


@sessions.command("list")
@_WORKSPACE_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def sessions_list(workspace: str | None, as_json: bool) -> None:
    """List a workspace's signed-in browsers, newest first."""
    from subspace.sessions import list_sessions

    settings = _settings()
    with _database(settings) as db:
        cx = _workspace_context(db, settings, workspace)
        with cx.transaction() as conn:
            found = list_sessions(conn, cx.actor.workspace_id)
    if as_json:
        click.echo(json.dumps([_jsonable(vars(s)) for s in found], indent=2))
        return
    table = _table("id", "signed in", "with", "last used", "expires", "browser")
    for s in found:
        table.add_row(
            str(s.id)[:SHORT_ID_CHARS],
            _when(s.created_at),
            "a code" if s.key_id is None else f"key {str(s.key_id)[:SHORT_ID_CHARS]}",
            _when(s.last_used_at),
            _when(s.expires_at),
            escape(s.user_agent),  # the browser's own words: never markup
        )
    console.print(table)


@sessions.command("end")
@click.argument("session_id")
@_WORKSPACE_OPTION
def sessions_end(session_id: str, workspace: str | None) -> None:
    """Sign a browser out by its session's id or a unique start of it."""
    from subspace.sessions import end_session, find_session_id

    settings = _settings()
    with _database(settings) as db:
        cx = _workspace_context(db, settings, workspace)
        with cx.transaction() as conn:
            ws = cx.actor.workspace_id
            ended = end_session(conn, ws, find_session_id(conn, ws, session_id))
    click.echo(f"Ended session {ended.id}.")


main.add_command(sources_group)
