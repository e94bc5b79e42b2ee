"""What the app keeps in `app.state`, read through typed helpers."""

from __future__ import annotations

from fastapi import Request

from subspace.database import Database


def database(request: Request) -> Database:
    db: Database = request.app.state.database
    return db


def wake_extractor(request: Request) -> None:
    """Tell the app's extraction worker (when it runs) that files are waiting."""
    extractor = request.app.state.extractor
    if extractor is not None:
        extractor.wake()
