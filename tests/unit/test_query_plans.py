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
    """A Tx stand-in that records the SQL a store function runs.  It returns no rows, except
    the compacted ranges it is given: (after_id, before_id) pairs."""

    def __init__(self, ranges: list[tuple[int, int]] | None = None) -> None:
        self.sql: list[tuple[str, tuple[object, ...]]] = []
        self.ranges = ranges or []

    def all(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        self.sql.append((sql, params))
        return list(self.ranges) if "compacted_ranges" in sql else []

    def execute(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        return self.all(sql, params)

    def one(self, sql: str, params: tuple[object, ...] = ()) -> tuple[object, ...] | None:
        self.sql.append((sql, params))
        return (0, 0)


def test_open_calls_reads_the_turn_by_its_index(conn: sqlite3.Connection) -> None:
    rec = Recorder()
    messages.open_calls(rec, "ses_1", "turn_1")  # type: ignore[arg-type]
    assert len(rec.sql) == 2
    for sql, params in rec.sql:
        found = plan(conn, sql, params)
        assert "USING INDEX messages_turn" in found, found
        assert "SCAN" not in found, found


RANGES = {"none": [], "one": [(3, 90_000)], "two": [(3, 50_000), (3, 90_000), (95_000, 97_000)]}


@pytest.mark.parametrize("ranges", RANGES.values(), ids=RANGES.keys())
def test_the_models_view_reads_only_live_rows_by_the_partial_index(
    conn: sqlite3.Connection, ranges: list[tuple[int, int]],
) -> None:
    rec = Recorder(ranges)
    messages.for_model(rec, "ses_1")  # type: ignore[arg-type]
    (ranges_sql, ranges_params), *reads = rec.sql
    assert plan(conn, ranges_sql, ranges_params).startswith("SEARCH compacted_ranges USING")
    # Between compressed ranges: none → the whole view; one → either side; the three above
    # merge into (3, 90,000) and (95,000, 97,000) → three stretches.
    assert len(reads) == {0: 1, 1: 2, 3: 3}[len(ranges)]
    for sql, params in reads:
        found = plan(conn, sql, params)
        assert "USING INDEX messages_model" in found, found
        assert "TEMP B-TREE" not in found, "rows come in id order from the index, not sorted after"
        if ranges:
            assert "id<?" in found or "id>?" in found, f"a range of the index, not all of it: {found}"


def test_the_models_size_is_counted_by_the_partial_index(conn: sqlite3.Connection) -> None:
    rec = Recorder([(3, 90_000)])
    messages.model_size(rec, "ses_1")  # type: ignore[arg-type]
    for sql, params in rec.sql[1:]:
        found = plan(conn, sql, params)
        assert "USING INDEX messages_model (session_id=? AND id" in found, found


def test_a_page_of_the_models_view_is_a_range_of_the_partial_index(conn: sqlite3.Connection) -> None:
    rec = Recorder([(3, 90_000)])
    messages.model_page(rec, "ses_1", 95_000, 5_000)  # type: ignore[arg-type]
    for sql, params in rec.sql[1:]:
        found = plan(conn, sql, params)
        assert "USING INDEX messages_model (session_id=? AND id" in found, found
        assert "TEMP B-TREE" not in found, found
