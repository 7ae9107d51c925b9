"""Turns on a 100k-message session, end to end: the first (which compresses the context) and
the ones after it, and the backend's peak memory, against a turn on a fresh session in the
same run.

A real backend, the fake provider (instant: one delta, usage, [DONE]; it also answers the
summary call), and a session seeded with 100,000 realistic messages while the backend is
stopped (`tests/desktop/seed.py`).  Turn time: `prompt.submit` sent → `admission.settled`
arrived.  Peak memory: the backend's VmHWM from /proc after the turns.  Only completion is
asserted; the numbers are printed.
"""

from __future__ import annotations

import statistics
import time
import uuid
from pathlib import Path

import pytest

from tests.desktop.seed import seed_long_session_info
from tests.fakes.openai_server import FakeOpenAI, Reply

from .client import BenchClient, Json
from .conftest import StartBackend

N = 100_000
LATER = 15  # turns after the first


async def _turn(client: BenchClient, session_id: str, text: str) -> tuple[float, Json]:
    t0 = time.perf_counter()
    resp = await client.call("prompt.submit", {"session_id": session_id,
                                               "request_id": f"req-{uuid.uuid4().hex}", "text": text})
    admission_id = resp["receipt"]["admission_id"]
    _, complete = await client.wait_event("message.complete", admission_id, timeout=120)
    t1, _ = await client.wait_event("admission.settled", admission_id, timeout=120)
    return (t1 - t0) * 1000, complete["data"]


def _vm(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.bench
async def test_a_100k_message_sessions_turns(fake_provider: FakeOpenAI, start_backend: StartBackend) -> None:
    fake_provider.default = Reply(deltas=["ok"])
    backend = start_backend(fake_provider.base_url)
    assert backend.terminate() == 0
    seeded = seed_long_session_info(backend.data_dir, N)
    backend.start()
    client = await BenchClient.open(backend.port, backend.token)
    try:
        fresh = (await client.call("session.create", {}))["session"]["session_id"]
        baseline = [(await _turn(client, fresh, f"short {i}"))[0] for i in range(LATER)]
        rss_before = _vm(backend.pid, "VmRSS")
        await client.call("session.subscribe", {"session_id": seeded.session_id})
        first, data = await _turn(client, seeded.session_id, "carry on")
        assert data["status"] == "completed", data
        later = []
        for i in range(LATER):
            took, data = await _turn(client, seeded.session_id, f"next {i}")
            assert data["status"] == "completed", data
            later.append(took)
        peak = _vm(backend.pid, "VmHWM")
        rss_after = _vm(backend.pid, "VmRSS")
        compressions = [e for _, e in client.events if e.get("type") == "compression.complete"]
    finally:
        await client.close()
    print()
    print(f"BENCH long session turns ({N:,} seeded messages, instant provider):")
    print(f"BENCH   first turn (compression included: {len(compressions)} compression(s)): "
          f"{first:.0f} ms — goal < 1,000 ms")
    print(f"BENCH   later turns: median {statistics.median(later):.1f} ms, max {max(later):.1f} ms "
          f"— goal < 15 ms; a fresh session's turns in the same run: median "
          f"{statistics.median(baseline):.1f} ms")
    print(f"BENCH   backend memory: {rss_before:.0f} MB before the session, {rss_after:.0f} MB after, "
          f"peak {peak:.0f} MB — goal < 120 MB")
