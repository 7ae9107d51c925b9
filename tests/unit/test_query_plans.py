"""The queries a turn runs on a long session use their indexes (EXPLAIN QUERY PLAN), so a
100k-message session costs a turn what a short one does: no full scan of the session."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from backend.store import messages
from backend.store.migrations import migrate


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(":memory:", isolation_level=None)
    c.row_factory = sqlite3.Row
    migrate(c)
    c.execute("ANALYZE")
    yield c
    c.close()


def plan(conn: sqlite3.Connection, sql: str, params: tuple[object, ...]) -> str:
    rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
    return " | ".join(str(r["detail"]) for r in rows)


class Recorder:
    """A Tx stand-in that records the SQL a store function runs (and returns no rows)."""

    def __init__(self) -> None:
        self.sql: list[tuple[str, tuple[object, ...]]] = []

    def all(self, sql: str, params: tuple[object, ...] = ()) -> list[sqlite3.Row]:
        self.sql.append((sql, params))
        return []


def test_open_calls_reads_the_turn_by_its_index(conn: sqlite3.Connection) -> None:
    rec = Recorder()
    messages.open_calls(rec, "ses_1", "turn_1")  # type: ignore[arg-type]
    assert len(rec.sql) == 2
    for sql, params in rec.sql:
        found = plan(conn, sql, params)
        assert "USING INDEX messages_turn" in found, found
        assert "SCAN" not in found, found


def test_the_models_view_reads_only_live_rows_by_the_partial_index(conn: sqlite3.Connection) -> None:
    rec = Recorder()
    messages.for_model(rec, "ses_1")  # type: ignore[arg-type]
    [(sql, params)] = rec.sql
    found = plan(conn, sql, params)
    assert "USING INDEX messages_model" in found, found
    assert "TEMP B-TREE" not in found, "rows come in id order from the index, not sorted after"
