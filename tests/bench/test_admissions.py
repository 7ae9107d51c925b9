"""Admissions accepted per second across sessions, against raw SQLite commit-per-insert.

Every turn hangs in the fake provider (it never sends a delta), so after one warm-up prompt
per session holds each session's queue, every measured prompt.submit is pure admission: a
durable `queued` row plus its `admission.queued` event, committed (WAL, synchronous=FULL)
before the receipt is sent.  No turn competes for the writer during the measurement.

The baseline writes the same two rows per admission with plain ``sqlite3`` into the
backend's own schema on the same disk, one transaction per admission.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .baselines import raw_commit_per_insert
from .client import BenchClient, Json, ms, pct
from .conftest import StartBackend

SESSIONS = 20
PER_SESSION = 250  # measured prompts per session: 5,000 admissions
CONNECTIONS = 4
IDLE_SAMPLES = 300


def _submit_params(session_id: str, text: str) -> Json:
    return {"session_id": session_id, "request_id": f"req-{uuid.uuid4().hex}", "text": text}


def _check_queued(resp: Json) -> None:
    assert "result" in resp, f"prompt.submit failed: {resp.get('error')}"
    receipt = resp["result"]["receipt"]
    assert (receipt["status"], receipt["duplicate"]) == ("queued", False), receipt


async def _blast(client: BenchClient, work: list[Json]) -> list[tuple[float, Json]]:
    """Sends every submission back to back (pipelined), then collects the receipts."""
    futures = [await client.send("prompt.submit", params) for params in work]
    return list(await asyncio.gather(*futures))


@pytest.mark.bench
async def test_admissions_per_second(
    fake_provider: FakeOpenAI, start_backend: StartBackend, tmp_path: Path
) -> None:
    fake_provider.default = Reply(deltas=["never sent"], hang_after=0)  # hang until disconnect
    backend = start_backend(fake_provider.base_url)
    clients = [await BenchClient.open(backend.port, backend.token) for _ in range(CONNECTIONS)]
    try:
        # SESSIONS for the burst plus one for the idle round trips.
        sids: list[str] = []
        for i in range(SESSIONS + 1):
            result = await clients[i % CONNECTIONS].call("session.create", {})
            sids.append(result["session"]["session_id"])
        # Warm-up: each session's first prompt starts a turn that hangs in the provider,
        # so everything submitted later only queues behind it.
        for i, sid in enumerate(sids):
            await clients[i % CONNECTIONS].call("prompt.submit", _submit_params(sid, "hold the queue"))
        await fake_provider.async_wait_requests(len(sids))

        # Idle round trip: one prompt.submit at a time, nothing else going on.
        idle_sid = sids[-1]
        idle: list[float] = []
        for k in range(IDLE_SAMPLES):
            t0 = time.perf_counter()
            fut = await clients[0].send("prompt.submit", _submit_params(idle_sid, f"idle {k}"))
            t1, resp = await fut
            _check_queued(resp)
            idle.append(t1 - t0)

        # Burst: SESSIONS x PER_SESSION submissions, sessions interleaved, spread over the
        # connections and pipelined; wall time from the first send to the last receipt.
        work: list[list[Json]] = [[] for _ in range(CONNECTIONS)]
        for n in range(PER_SESSION):
            for i in range(SESSIONS):
                work[i % CONNECTIONS].append(_submit_params(sids[i], f"prompt {n} for session {i}"))
        t_start = time.perf_counter()
        results = await asyncio.gather(*(_blast(c, w) for c, w in zip(clients, work, strict=True)))
        t_end = max(t for per_conn in results for t, _ in per_conn)
        for per_conn in results:
            for _, resp in per_conn:
                _check_queued(resp)
        accepted = sum(len(r) for r in results)
        assert accepted == SESSIONS * PER_SESSION
        # No turn ran during the measurement: still only the warm-up calls reached the provider.
        assert len(fake_provider.snapshot()) == len(sids)
    finally:
        for client in clients:
            await client.close()
        backend.close()  # its hung provider calls end with it

    raw_rate, raw_lat = raw_commit_per_insert(tmp_path / "raw-baseline.db", SESSIONS)
    rate = accepted / (t_end - t_start)
    print()
    print(
        f"BENCH admissions: {rate:,.0f}/s ({accepted:,} prompt.submit over {SESSIONS} sessions, "
        f"{CONNECTIONS} connections, pipelined; provider hangs so no turn competes) "
        f"(raw sqlite commit-per-insert: {raw_rate:,.0f}/s, ratio {rate / raw_rate:.2f}x)"
    )
    print(
        f"BENCH prompt.submit idle round trip: p50 {ms(pct(idle, 50))}, p99 {ms(pct(idle, 99))} "
        f"({IDLE_SAMPLES} sequential) (raw sqlite commit: p50 {ms(pct(raw_lat, 50))}, "
        f"p99 {ms(pct(raw_lat, 99))})"
    )
