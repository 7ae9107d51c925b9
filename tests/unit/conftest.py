"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.store.db import Database, SqliteDatabase


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    """A real store file under tmp_path, opened (so migrated to the current schema)."""
    database = SqliteDatabase(tmp_path / "state.db")
    await database.open()
    try:
        yield database
    finally:
        await database.close()
