"""Backend overhead per turn with an instant provider, and delta latency from provider to client.

Overhead: sequential turns in one session (send prompt.submit → message.complete arrives),
against the raw model call — the very request bodies the backend sent, replayed to the same
fake provider with httpx streaming in the same run.  What is left is the backend: the
admission commit (which claims the turn), the closing commit (which also stores a short
answer's delta), context building, fan-out and the WebSocket hops.

Delta latency: the fake paces its deltas at a fixed rate and stamps each one just before it
writes it to the socket; the client stamps each `message.delta` event on arrival.  Both
clocks are this process's ``perf_counter``.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from statistics import median

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .baselines import raw_commit_per_insert, raw_model_calls
from .client import BenchClient, Json, ms, pct
from .conftest import StartBackend

WARMUP_TURNS = 10
TURNS = 1000
WINDOW = 50  # turns per window of the growth line: the first, the middle and the last
FLAT_RATIO = 1.2  # the goal: the last window's overhead within 20% of the first's
DELTA_RATE = 200  # deltas per second from the provider
DELTAS_PER_TURN = 400  # 2 s per turn at 200/s
DELTA_TURNS = 3


def _submit_params(session_id: str, text: str) -> Json:
    return {"session_id": session_id, "request_id": f"req-{uuid.uuid4().hex}", "text": text}


def _cpu_s(pid: int) -> float:
    """The process's CPU time so far (user + system, all threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _turn(client: BenchClient, session_id: str, text: str) -> tuple[float, float, Json]:
    """Submits and waits for message.complete; returns (t_sent, t_complete_arrived, complete)."""
    t0 = time.perf_counter()
    fut = await client.send("prompt.submit", _submit_params(session_id, text))
    _, resp = await fut
    assert "result" in resp, f"prompt.submit failed: {resp.get('error')}"
    admission_id = resp["result"]["receipt"]["admission_id"]
    t1, complete = await client.wait_event("message.complete", admission_id)
    await client.wait_event("admission.settled", admission_id)  # same commit, next frame
    assert complete["data"]["status"] == "completed", complete["data"]
    return t0, t1, complete


@pytest.mark.bench
async def test_turn_overhead(fake_provider: FakeOpenAI, start_backend: StartBackend, tmp_path: Path) -> None:
    fake_provider.default = Reply(deltas=["ok"])  # instant: one delta, usage, [DONE]
    backend = start_backend(fake_provider.base_url)
    client = await BenchClient.open(backend.port, backend.token)
    try:
        sid = (await client.call("session.create", {}))["session"]["session_id"]
        turns: list[float] = []
        # The backend's CPU time at each window's edges: what a turn costs it, less swayed by
        # the other work on a shared machine than wall time.
        edges = {WARMUP_TURNS + a for a, _ in _windows()} | {WARMUP_TURNS + b for _, b in _windows()}
        cpu: dict[int, float] = {}
        for k in range(WARMUP_TURNS + TURNS):
            if k in edges:
                cpu[k] = _cpu_s(backend.pid)
            t0, t1, complete = await _turn(client, sid, f"turn {k}")
            assert complete["data"]["text"] == "ok"
            if k >= WARMUP_TURNS:
                turns.append(t1 - t0)
        cpu[WARMUP_TURNS + TURNS] = _cpu_s(backend.pid)
    finally:
        await client.close()
        backend.close()  # the baselines run with no backend process competing for the cores
    bodies = [r.body for r in fake_provider.snapshot()]
    assert len(bodies) == WARMUP_TURNS + TURNS, "one provider call per turn"
    raw, texts = await raw_model_calls(fake_provider.base_url, bodies[WARMUP_TURNS:])
    assert texts == ["ok"] * TURNS
    _, commits = raw_commit_per_insert(tmp_path / "raw-commits.db", max_rows=500, max_seconds=2.0)

    paired = [t - r for t, r in zip(turns, raw, strict=True)]
    print()
    print(
        f"BENCH turn overhead: median {ms(median(paired))}, p95 {ms(pct(paired, 95))} "
        f"(turn − raw call, paired by request body; {TURNS} sequential turns, instant provider)"
    )
    print(
        f"BENCH turn wall time: median {ms(median(turns))}, p95 {ms(pct(turns, 95))} "
        f"(prompt.submit sent → message.complete arrived) | raw httpx streaming call: "
        f"median {ms(median(raw))}, p95 {ms(pct(raw, 95))} | "
        f"median−median {ms(median(turns) - median(raw))}"
    )
    windows = _windows()
    shown = ", ".join(f"{ms(median(paired[a:b]))} over turns {WARMUP_TURNS + a + 1}–{WARMUP_TURNS + b}"
                      for a, b in windows)
    print(
        f"BENCH turn overhead as history grows: median {shown} (each turn's request holds the "
        f"whole transcript so far: {2 * (WARMUP_TURNS + TURNS)} messages by the end)"
    )
    first, last = (median(paired[a:b]) for a, b in (windows[0], windows[-1]))
    # A first window at or below zero (the raw call as slow as the turn: a loaded machine)
    # has no meaningful ratio.
    ratio = f"{last / first:.2f}" if first > 0 else "n/a"
    flat = "yes" if first > 0 and last <= FLAT_RATIO * first else "no"
    print(
        f"BENCH turn overhead flat: turns {WARMUP_TURNS + TURNS - WINDOW + 1}–{WARMUP_TURNS + TURNS} "
        f"{ms(last)} vs turns {WARMUP_TURNS + 1}–{WARMUP_TURNS + WINDOW} {ms(first)}: ratio "
        f"{ratio}, flat: {flat} (<= {FLAT_RATIO})"
    )
    per_turn = [(cpu[WARMUP_TURNS + b] - cpu[WARMUP_TURNS + a]) / (b - a) for a, b in windows]
    shown = ", ".join(f"{ms(c)} over turns {WARMUP_TURNS + a + 1}–{WARMUP_TURNS + b}"
                      for c, (a, b) in zip(per_turn, windows, strict=True))
    print(f"BENCH backend CPU per turn (all its threads): {shown}; last/first "
          f"{per_turn[-1] / per_turn[0]:.2f}")
    print(
        f"BENCH context: raw sqlite commit (WAL, synchronous=FULL) p50 {ms(pct(commits, 50))}, "
        f"p95 {ms(pct(commits, 95))}; a turn here commits twice on its path (admission with "
        f"its claim; the close, with a short answer's delta) and once after it (the drainer)"
    )


def _windows() -> list[tuple[int, int]]:
    """The growth line's windows of measured turns: the first, the middle and the last."""
    return [(0, WINDOW), (TURNS // 2 - WINDOW // 2, TURNS // 2 + WINDOW // 2), (TURNS - WINDOW, TURNS)]


class TimedDeltas:
    """A Reply's ``deltas`` that paces itself and stamps each delta just before it is sent."""

    def __init__(self, count: int, rate: float) -> None:
        self.count = count
        self.interval = 1.0 / rate
        self.sent: list[float] = [0.0] * count

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[str]:
        due = time.perf_counter()
        for i in range(self.count):
            due += self.interval
            if (wait := due - time.perf_counter()) > 0:
                time.sleep(wait)
            self.sent[i] = time.perf_counter()
            yield f"<{i:05d}>"  # the fake writes the chunk right after this yield returns


TOKEN = re.compile(r"<(\d{5})>")


@pytest.mark.bench
async def test_delta_to_client_latency(fake_provider: FakeOpenAI, start_backend: StartBackend) -> None:
    paced: list[TimedDeltas] = []

    def respond(body: Json) -> Reply:
        deltas = TimedDeltas(DELTAS_PER_TURN, DELTA_RATE)
        paced.append(deltas)
        return Reply(deltas=deltas)  # type: ignore[arg-type]  # any iterable of str works

    fake_provider.responder = respond
    backend = start_backend(fake_provider.base_url)
    client = await BenchClient.open(backend.port, backend.token)
    latencies: list[float] = []
    events_per_turn: list[int] = []
    try:
        sid = (await client.call("session.create", {}))["session"]["session_id"]
        await _turn(client, sid, "warm-up")  # first turn also stores the system prompt
        for k in range(DELTA_TURNS):
            _, _, complete = await _turn(client, sid, f"stream {k}")
            timed = paced[k + 1]
            expected = "".join(f"<{i:05d}>" for i in range(DELTAS_PER_TURN))
            assert complete["data"]["text"] == expected
            admission_id = complete["admission_id"]
            got: list[int] = []
            events = [
                (t, e)
                for t, e in client.events
                if e["type"] == "message.delta" and e.get("admission_id") == admission_id
            ]
            for t, event in events:
                for index in TOKEN.findall(event["data"]["text"]):
                    got.append(int(index))
                    latencies.append(t - timed.sent[int(index)])
            assert got == list(range(DELTAS_PER_TURN)), "every delta reached the client once, in order"
            events_per_turn.append(len(events))
    finally:
        await client.close()
    print()
    print(
        f"BENCH delta to client: p50 {ms(pct(latencies, 50))}, p99 {ms(pct(latencies, 99))}, "
        f"max {ms(max(latencies))} ({len(latencies)} deltas at {DELTA_RATE}/s from the provider, "
        f"{DELTA_TURNS} turns; {median(events_per_turn):.0f} message.delta events per "
        f"{DELTAS_PER_TURN} deltas, i.e. coalesced)"
    )
