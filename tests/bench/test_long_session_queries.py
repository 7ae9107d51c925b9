"""A 100k-message session: what a turn reads from the store, with and without the indexes
that migration 8 added, and compression's commit, one range (migration 9) against flagging
every compacted row as it used to.

One SQLite file (WAL, as the backend opens it) holds a seeded session of N messages
(`tests/desktop/seed.py`, the realistic mix).  Each query is the store's own function, timed
as the median of RUNS calls: first with the schema as it is, then with the index dropped (the
plan falls back to `messages_session`: the whole session), in the same run.  The commit is
timed once each way, as a durable transaction, on the same file.
Only equal results are asserted; the numbers are printed.
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from backend.store import compression, messages
from backend.store.db import Tx
from backend.store.migrations import migrate
from tests.desktop.seed import seed_long_session_info

N = 100_000
RUNS = 7


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    times: list[float] = []
    out: Any = None
    for _ in range(RUNS):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000, out


def commit_ms(conn: sqlite3.Connection, fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    fn()
    conn.execute("COMMIT")
    return (time.perf_counter() - t0) * 1000


@pytest.mark.bench
def test_a_long_sessions_turn_queries_with_and_without_their_indexes(tmp_path: Path) -> None:
    db_path = tmp_path / "state.db"
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    migrate(conn)
    conn.close()
    seeded = seed_long_session_info(tmp_path, N)
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    tx = Tx(conn)
    sid = seeded.session_id
    last_turn = conn.execute("SELECT turn_id FROM messages WHERE session_id = ? AND turn_id IS NOT NULL "
                             "ORDER BY id DESC LIMIT 1", (sid,)).fetchone()[0]
    # Compaction as after a first compression: all but the newest 1,000 rows.  First as one
    # range (what the compressor commits now), then by flagging each row (what it did before).
    hidden = seeded.last_rowid - 1000
    ranged = commit_ms(conn, lambda: compression.hide(tx, sid, 0, hidden + 1))
    conn.execute("ANALYZE")
    model_ranged, rows_ranged = timed(lambda: messages.for_model(tx, sid))
    conn.execute("DELETE FROM compacted_ranges")
    flagged = commit_ms(conn, lambda: compression.compact(tx, sid, list(range(1, hidden + 1))))

    model_after, rows_after = timed(lambda: messages.for_model(tx, sid))
    calls_after, open_after = timed(lambda: messages.open_calls(tx, sid, last_turn))
    conn.execute("DROP INDEX messages_model")
    conn.execute("DROP INDEX messages_turn")
    model_before, rows_before = timed(lambda: messages.for_model(tx, sid))
    calls_before, open_before = timed(lambda: messages.open_calls(tx, sid, last_turn))
    conn.close()
    assert [r.id for r in rows_after] == [r.id for r in rows_before] == [r.id for r in rows_ranged]
    assert open_after == open_before
    assert len(rows_after) <= 1000

    print()
    print(f"BENCH long session ({N:,} messages, 1,000 live after compression), medians of {RUNS}:")
    print(f"BENCH   for_model (every request): {model_after:.2f} ms with messages_model, "
          f"{model_before:.2f} ms without it ({model_before / model_after:.0f}x)")
    print(f"BENCH   open_calls (turn close, under the write lock): {calls_after:.3f} ms with "
          f"messages_turn, {calls_before:.2f} ms without it ({calls_before / calls_after:.0f}x)")
    print(f"BENCH   for_model with the compacted part as one range: {model_ranged:.2f} ms")
    print(f"BENCH   compression's commit of {hidden:,} compacted rows (the single writer held): "
          f"{ranged:.1f} ms as one range, {flagged:.0f} ms flagging each row as before")
