"""Backend overhead per turn on the PostgreSQL store, against raw baselines of the same run.

The same loop as test_turn_overhead.py (prompt.submit → message.complete, instant provider),
with `store` pointing at a fresh database on the test run's PostgreSQL server.  Baselines,
measured in the same run: the raw model call (the very request bodies replayed with httpx)
and a raw psycopg commit of one row on the same server (serializable, as the store commits).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from statistics import median

import psycopg
import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.backend_proc import Backend
from tests.pg_server import PgServer

from .baselines import raw_model_calls
from .client import BenchClient, ms, pct
from .test_turn_overhead import _turn

WARMUP_TURNS = 10
TURNS = 300
RAW_COMMITS = 300


@pytest.fixture(scope="module")
def pg() -> Iterator[PgServer]:
    with PgServer() as server:
        yield server


def _raw_commits(dsn: str) -> list[float]:
    """One INSERT per serializable transaction, as the store's smallest write commits."""
    took: list[float] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE raw_bench (id BIGINT PRIMARY KEY, body TEXT NOT NULL)")
        for i in range(RAW_COMMITS):
            t0 = time.perf_counter()
            conn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
            conn.execute("INSERT INTO raw_bench (id, body) VALUES (%s, %s)", (i, "x" * 200))
            conn.execute("COMMIT")
            took.append(time.perf_counter() - t0)
    return took


@pytest.mark.bench
async def test_turn_overhead_on_postgresql(
    fake_provider: FakeOpenAI, pg: PgServer, tmp_path: Path,
) -> None:
    fake_provider.default = Reply(deltas=["ok"])
    name = pg.create_database()
    backend = Backend(tmp_path / "data", fake_provider.base_url, store=pg.dsn(name))
    backend.start()
    turns: list[float] = []
    try:
        client = await BenchClient.open(backend.port, backend.token)
        try:
            sid = (await client.call("session.create", {}))["session"]["session_id"]
            for k in range(WARMUP_TURNS + TURNS):
                t0, t1, complete = await _turn(client, sid, f"turn {k}")
                assert complete["data"]["text"] == "ok"
                if k >= WARMUP_TURNS:
                    turns.append(t1 - t0)
        finally:
            await client.close()
    finally:
        backend.close()
    bodies = [r.body for r in fake_provider.snapshot()]
    raw, texts = await raw_model_calls(fake_provider.base_url, bodies[WARMUP_TURNS:])
    assert texts == ["ok"] * TURNS
    commits = _raw_commits(pg.dsn(name))
    pg.drop_database(name)
    paired = [t - r for t, r in zip(turns, raw, strict=True)]
    print()
    print(f"BENCH turn overhead (PostgreSQL store): median {ms(median(paired))}, "
          f"p95 {ms(pct(paired, 95))} (turn − raw call, paired; {TURNS} sequential turns)")
    print(f"BENCH context: raw serializable commit of one row on the same server p50 "
          f"{ms(pct(commits, 50))}, p95 {ms(pct(commits, 95))}; overhead / raw commit = "
          f"{median(paired) / median(commits):.1f}x (a turn commits at least 3 times)")
