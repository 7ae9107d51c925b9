"""A 100k-message session: what a turn reads from the store, with and without the indexes
that migration 8 added, and compression's commit check, set against the list it used to be.

One SQLite file (WAL, as the backend opens it) holds a seeded session of N messages
(`tests/desktop/seed.py`, the realistic mix).  Each query is the store's own function, timed
as the median of RUNS calls: first with the schema as it is, then with the index dropped (the
plan falls back to `messages_session`: the whole session), in the same run.  The commit check
is the compressor's loop over the rows pruning changed, against the ids compaction drops.
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

from backend.store import messages
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
    # Compaction as after a first compression: all but the newest 1,000 rows.
    conn.execute("UPDATE messages SET compacted = 1 WHERE session_id = ? AND id <= ?",
                 (sid, seeded.last_rowid - 1000))
    conn.execute("ANALYZE")

    model_after, rows_after = timed(lambda: messages.for_model(tx, sid))
    calls_after, open_after = timed(lambda: messages.open_calls(tx, sid, last_turn))
    conn.execute("DROP INDEX messages_model")
    conn.execute("DROP INDEX messages_turn")
    model_before, rows_before = timed(lambda: messages.for_model(tx, sid))
    calls_before, open_before = timed(lambda: messages.open_calls(tx, sid, last_turn))
    conn.close()
    assert [r.id for r in rows_after] == [r.id for r in rows_before]
    assert open_after == open_before
    assert len(rows_after) <= 1000

    # The compressor's commit: rows pruning changed (outside the tail), each checked against
    # the ids compaction drops.
    compacted = list(range(1, 99_001))
    changed = list(range(1, 99_001, 20))  # ~5k pruned rows
    check_list, kept_list = timed(lambda: sum(1 for c in changed[:500] if c not in compacted))
    dropped = set(compacted)
    check_set, kept_set = timed(lambda: sum(1 for c in changed[:500] if c not in dropped))
    assert kept_list == kept_set
    per_row_list = check_list / 500
    per_row_set = check_set / 500

    print()
    print(f"BENCH long session ({N:,} messages, 1,000 live after compression), medians of {RUNS}:")
    print(f"BENCH   for_model (every request): {model_after:.2f} ms with messages_model, "
          f"{model_before:.2f} ms without it ({model_before / model_after:.0f}x)")
    print(f"BENCH   open_calls (turn close, under the write lock): {calls_after:.3f} ms with "
          f"messages_turn, {calls_before:.2f} ms without it ({calls_before / calls_after:.0f}x)")
    print(f"BENCH   compression commit check, per changed row: {per_row_set * 1000:.3f} µs with a "
          f"set, {per_row_list * 1000:.1f} µs with the list it was; for ~5k changed rows: "
          f"{per_row_set * len(changed):.2f} ms vs {per_row_list * len(changed):.0f} ms")
