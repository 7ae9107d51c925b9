"""`turnkey store migrate`: how fast a folder with 50,000 messages is copied into PostgreSQL.

A stopped folder's state.db is seeded with SESSIONS sessions of the realistic message mix
(`tests/desktop/seed.py`) and EVENTS_PER_MESSAGE stored events per message; the command runs
as the person runs it (`python -m backend store-migrate`, a process) into a fresh database on
a PostgreSQL server of its own (tests/pg_server.py; fsync off there, as for every test).
Printed: the copy's own rows/s (its one transaction: COPY of every table, then the identities
set), and the whole command's time (connecting, creating the schema, and the verification
that reads both sides again).  Only the outcome is asserted (exit 0: every count, seq and id
matched).
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.store.dbfile import prepare
from tests.desktop.seed import seed_long_session_info
from tests.pg_server import PgServer

SESSIONS = 5
MESSAGES_PER_SESSION = 10_000
EVENTS_PER_MESSAGE = 2
REPO = Path(__file__).resolve().parents[2]
SPEED = re.compile(r"copied in ([\d.]+) s, ([\d,]+) rows/s")


@pytest.fixture(scope="module")
def pg() -> Iterator[PgServer]:
    with PgServer() as server:
        yield server


def seed(data_dir: Path) -> int:
    """The folder's state.db with the sessions and their events; returns the rows written."""
    prepare(data_dir / "state.db")
    for i in range(SESSIONS):
        sid = seed_long_session_info(data_dir, MESSAGES_PER_SESSION, seed=i).session_id
        conn = sqlite3.connect(data_dir / "state.db", isolation_level=None)
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO events (session_id, seq, type, ts, data) VALUES (?, ?, ?, ?, ?)",
            ((sid, seq, "message.delta", "2026-12-01T09:00:00Z",
              json.dumps({"text": f"piece {seq} of the answer"}))
             for seq in range(1, MESSAGES_PER_SESSION * EVENTS_PER_MESSAGE + 1)))
        conn.execute("COMMIT")
        conn.close()
    return SESSIONS * MESSAGES_PER_SESSION * (1 + EVENTS_PER_MESSAGE)


@pytest.mark.bench
def test_store_migrate_speed(pg: PgServer, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    seeded = seed(data_dir)
    dsn = pg.dsn(pg.create_database())
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "backend", "store-migrate", "--data-dir",
                           str(data_dir), "--to", dsn], cwd=REPO, capture_output=True, text=True,
                          timeout=600, check=False)
    took = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    match = SPEED.search(done.stdout)
    assert match is not None, done.stdout
    size_mb = (data_dir / "state.db").stat().st_size / 1e6
    print(f"\nBENCH store migrate: {SESSIONS * MESSAGES_PER_SESSION} messages, {seeded} rows "
          f"({size_mb:.0f} MB file): copy {float(match.group(1)):.1f} s = {match.group(2)} rows/s; "
          f"whole command (schema, copy, verification) {took:.1f} s")
