"""What the `subspace` commands share: the console, the table style, the settings and the
database a command works on, the workspace it acts in. The commands live in cli.py and, for
sources, in sources/cli.py."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

from subspace.config import Settings
from subspace.errors import SubspaceError

if TYPE_CHECKING:
    from subspace.context import Context
    from subspace.database import Database

console = Console(emoji=False)  # ":abc:" in a passage is text, not an emoji code
err_console = Console(stderr=True, emoji=False)


def _table(*headers: str, title: str | None = None) -> Table:
    """The one table style of the command line: no borders, bold headers, fits 80 columns."""
    return Table(
        *headers,
        box=None,
        pad_edge=False,
        header_style="bold",
        title=title,
        title_justify="left",
        title_style="bold",
    )


def _settings() -> Settings:
    try:
        return Settings.from_env()
    except SubspaceError as exc:
        raise click.ClickException(exc.message) from None


@contextmanager
def _database(
    settings: Settings, *, pool_size: int = 2, creates: bool = False
) -> Iterator[Database]:
    """The database for a command: two connections do for one, the server takes its setting.

    Only a command that `creates` (serve, import) may start a new database in a home that
    has none: run from another folder without SUBSPACE_HOME, any other
    would answer from a new, empty one while the data sits elsewhere."""
    if not creates and not settings.database_url and not settings.pgdata.is_dir():
        raise click.ClickException(
            f"No Subspace database at {settings.home.resolve()}: this command would start a "
            "new, empty one there. Point SUBSPACE_HOME at the home your server uses (`subspace "
            "serve` prints it as it starts), run the command from the folder that holds "
            "`.subspace`, or run `subspace serve` here to make a new home."
        )
    from subspace.database import open_database

    try:
        db = open_database(settings, pool_size=pool_size)
    except SubspaceError as exc:
        raise click.ClickException(exc.message) from None
    try:
        yield db
    except SubspaceError as exc:
        raise click.ClickException(exc.message) from None
    finally:
        db.close()


def _workspace_context(db: Database, settings: Settings, workspace: str | None) -> Context:
    """Acting as the owner of `workspace` (a name or an id), or of the default workspace."""
    from subspace.workspaces import find_workspace, workspace_owner

    if workspace is None:
        return db.default_context(settings)
    with db.pool.connection() as conn:
        actor = workspace_owner(conn, find_workspace(conn, workspace))
    return db.context(actor, settings)


_WORKSPACE_OPTION = click.option(
    "--workspace",
    default=None,
    help="Workspace name or id (see `subspace workspaces list`). Default: the first one.",
)


def _when(value: Any) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M")


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    def plain(value: Any) -> Any:
        if value is None or isinstance(value, bool | int | float | str):
            return value
        return value.isoformat() if hasattr(value, "isoformat") else str(value)

    return {k: plain(v) for k, v in row.items()}
