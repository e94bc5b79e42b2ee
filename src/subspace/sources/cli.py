"""`subspace sources`: add, list, show, sync and remove the folders and mailboxes Subspace
keeps in sync. The server syncs them in its background work; `sync` runs a round here and
now (waiting for the server's round of the same source, if one is running)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from subspace.cli_support import (
    _WORKSPACE_OPTION,
    _database,
    _jsonable,
    _settings,
    _table,
    _when,
    _workspace_context,
    console,
)
from subspace.errors import SubspaceError

COUNT_ORDER = ("added", "updated", "moved", "listed", "restored", "archived", "unlisted",
               "unchanged", "skipped", "failed", "not read")  # fmt: skip


@click.group("sources")
def sources_group() -> None:
    """Folders and mailboxes kept in sync: new, changed, moved and removed items follow."""


@sources_group.group("add")
def add() -> None:
    """Add a watched folder or an IMAP mailbox."""


def _kb_id(cx: Any, kb_name: str | None) -> Any:
    if kb_name is None:
        return None
    from subspace import commands

    found = commands.find_knowledge_base(cx, kb_name)
    return (found or commands.create_knowledge_base(cx, kb_name)).id


_KB_OPTION = click.option(
    "--kb", "kb_name", default=None,
    help="Knowledge base to keep it in (created if missing). Default: the default one.",
)  # fmt: skip


@add.command("folder")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--name", default=None, help="The source's name. Default: the folder's.")
@_KB_OPTION
@click.option("--include", multiple=True, help="Only files matching (repeatable): '*.md'.")
@click.option("--exclude", multiple=True, help="Leave out files matching (repeatable): 'drafts/*'.")
@click.option("--type", "types", multiple=True, type=click.Choice(["page", "file", "mail"]),
              help="Only these kinds of item (repeatable). Default: all.")  # fmt: skip
@_WORKSPACE_OPTION
def add_folder(
    path: Path,
    name: str | None,
    kb_name: str | None,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    types: tuple[str, ...],
    workspace: str | None,
) -> None:
    """Keep the folder PATH in sync: Markdown and text become pages, PDF, DOCX and HTML files,
    .eml and .mbox mail. A running server notices changes within seconds."""
    from subspace.sources import model

    settings = _settings()
    with _database(settings, creates=True) as db:
        cx = _workspace_context(db, settings, workspace)
        config = model.folder_config(str(path.resolve()), include=list(include),
                                     exclude=list(exclude), types=list(types))  # fmt: skip
        source = model.add_source(cx, name or path.resolve().name, "folder", config,
                                  kb_id=_kb_id(cx, kb_name))  # fmt: skip
    click.echo(f"Added {source.name!r}: {config['path']}. {_next_step()}")


_PASSWORD_STDIN = click.option(
    "--password-stdin", is_flag=True,
    help="Read the password from standard input (for scripts) instead of asking for it.",
)  # fmt: skip


@add.command("imap")
@click.argument("host")
@click.option("--user", required=True, help="The mailbox's user name, often the address.")
@click.option("--port", type=int, default=None, help="Default: 993 with tls, else 143.")
@click.option("--tls", type=click.Choice(["tls", "starttls", "none"]), default="tls",
              help="tls (port 993), starttls, or none (this machine only).")  # fmt: skip
@click.option("--folder", "folders", multiple=True, help="A folder to follow (repeatable). "
              "Default: INBOX.")  # fmt: skip
@click.option("--name", default=None, help="The source's name. Default: USER@HOST.")
@_KB_OPTION
@_PASSWORD_STDIN
@_WORKSPACE_OPTION
def add_imap(
    host: str,
    user: str,
    port: int | None,
    tls: str,
    folders: tuple[str, ...],
    name: str | None,
    kb_name: str | None,
    password_stdin: bool,
    workspace: str | None,
) -> None:
    """Keep an IMAP mailbox's folders in sync. The password (or app token) is asked for, or
    read from standard input, and kept encrypted with SUBSPACE_SOURCES_KEY."""
    from subspace.sources import model

    settings = _settings()
    try:
        config = model.imap_config(host, user=user, folders=list(folders), port=port, tls=tls)
    except SubspaceError as exc:
        raise click.ClickException(exc.message) from None
    password = _password(password_stdin)
    with _database(settings, creates=True) as db:
        cx = _workspace_context(db, settings, workspace)
        source = model.add_source(cx, name or f"{user}@{host}", "imap", config,
                                  kb_id=_kb_id(cx, kb_name), password=password)  # fmt: skip
    click.echo(f"Added {source.name!r}: {', '.join(config['folders'])}. {_next_step()}")


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return str(click.prompt("Password or app token", hide_input=True))


def _next_step() -> str:
    return "A running server syncs it now; `subspace sources sync NAME` syncs it here."


@sources_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@_WORKSPACE_OPTION
def list_(as_json: bool, workspace: str | None) -> None:
    """The sources, their status and what their last round did."""
    from subspace.sources import model

    settings = _settings()
    with _database(settings) as db:
        cx = _workspace_context(db, settings, workspace)
        with cx.transaction() as conn:
            found = model.list_sources(conn, cx.actor.workspace_id)
    if as_json:
        click.echo(json.dumps([_source_json(s) for s in found], indent=2))
        return
    if not found:
        click.echo("No sources yet: `subspace sources add folder PATH` or `... add imap HOST`.")
        return
    table = _table("name", "kind", "from", "status", "last sync", "last round")
    for source in found:
        table.add_row(source.name, source.kind, _where(source), _status(source),
                      _when(source.last_sync_at), _counts(source.last_counts))  # fmt: skip
    console.print(table)


def _where(source: Any) -> str:
    config = source.config
    if source.kind == "folder":
        return str(config["path"])
    return f"{config['user']}@{config['host']}: {', '.join(config['folders'])}"


def _status(source: Any) -> str:
    return source.status if not source.status_reason else f"{source.status}: {source.status_reason}"


def _counts(counts: dict[str, int]) -> str:
    shown = [f"{counts[k]} {k}" for k in COUNT_ORDER if counts.get(k)]
    total = counts.get("files", counts.get("messages"))
    if total is not None:
        noun = "file" if "files" in counts else "message"
        shown.append(f"{total} {noun}{'' if total == 1 else 's'} in all")
    return ", ".join(shown) or "-"


def _source_json(source: Any, errors: list[Any] | None = None) -> dict[str, Any]:
    row = _jsonable({
        "id": source.id, "name": source.name, "kind": source.kind, "kb_id": source.kb_id,
        "status": source.status, "status_reason": source.status_reason,
        "last_sync_at": source.last_sync_at, "created_at": source.created_at,
    })  # fmt: skip
    row["config"] = source.config
    row["last_counts"] = source.last_counts
    if errors is not None:
        row["errors"] = [{"item": e.key, "error": e.error} for e in errors]
    return row


@sources_group.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@_WORKSPACE_OPTION
def show(name: str, as_json: bool, workspace: str | None) -> None:
    """One source: its settings, status, last round and the items that failed, and why."""
    from subspace.sources import model

    settings = _settings()
    with _database(settings) as db:
        cx = _workspace_context(db, settings, workspace)
        with cx.transaction() as conn:
            source = model.get_source(conn, cx.actor.workspace_id, name)
            errors = model.item_errors(conn, source)
    if as_json:
        click.echo(json.dumps(_source_json(source, errors), indent=2))
        return
    console.print(f"[bold]{source.name}[/bold] ({source.kind}): {_where(source)}", markup=True)
    click.echo(f"status: {_status(source)}")
    click.echo(f"last sync: {_when(source.last_sync_at) or 'never'}; "
               f"{_counts(source.last_counts)}")  # fmt: skip
    if errors:
        table = _table("item", "why it failed", title="Failed items")
        for error in errors:
            table.add_row(error.key, error.error)
        console.print(table)


@sources_group.command("sync")
@click.argument("name")
@click.option("--reread", is_flag=True, help="Read every file, changed or not.")
@click.option("--json", "as_json", is_flag=True, help="Print the round's counts as JSON.")
@_WORKSPACE_OPTION
def sync(name: str, reread: bool, as_json: bool, workspace: str | None) -> None:
    """Sync the source here and now, and extract the text of the files it brought."""
    from subspace.ingest.worker import extract_pending
    from subspace.sources import model
    from subspace.sources.folder import SourceFailed
    from subspace.sources.runner import SourceSync

    settings = _settings()
    with _database(settings) as db:
        cx = _workspace_context(db, settings, workspace)
        with cx.transaction() as conn:
            source = model.get_source(conn, cx.actor.workspace_id, name)
        syncer = SourceSync(db, settings, source.workspace_id, source.id)
        try:
            waiting = f"{source.name}: waiting for the round the server is running…"
            counts = syncer.round(wait=True, reread=reread,
                                  on_wait=lambda: click.echo(waiting, err=True))  # fmt: skip
        except SourceFailed as exc:
            raise click.ClickException(f"{source.name}: {exc.reason}") from None
        finally:
            syncer.close()
        extract_pending(db, settings, workers=os.cpu_count() or 1)
    if counts is None:
        raise click.ClickException(f"{source.name} was removed while it synced.")
    if as_json:
        click.echo(json.dumps(dict(counts)))
        return
    click.echo(f"{source.name}: {_counts(dict(counts))}.")


@sources_group.command("password")
@click.argument("name")
@_PASSWORD_STDIN
@_WORKSPACE_OPTION
def password(name: str, password_stdin: bool, workspace: str | None) -> None:
    """Give an IMAP source's password again (after a refusal, or a new SUBSPACE_SOURCES_KEY)."""
    from subspace.sources import model

    settings = _settings()
    secret = _password(password_stdin)
    with _database(settings) as db:
        cx = _workspace_context(db, settings, workspace)
        source = model.set_password(cx, name, secret)
    click.echo(f"Kept a new password for {source.name!r}; it syncs again.")


@sources_group.command("remove")
@click.argument("name")
@_WORKSPACE_OPTION
def remove(name: str, workspace: str | None) -> None:
    """Stop following a source. What it brought in stays (archive it to hide it)."""
    from subspace.sources import model

    settings = _settings()
    with _database(settings) as db:
        cx = _workspace_context(db, settings, workspace)
        source = model.remove_source(cx, name)
    click.echo(f"Removed {source.name!r}; the items it brought in stay.")


@sources_group.command("key")
def key() -> None:
    """Print a new key for SUBSPACE_SOURCES_KEY (keep it: passwords kept with it need it)."""
    from subspace.sources.secrets import new_key

    click.echo(new_key())
