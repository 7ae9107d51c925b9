"""Stalls under load: the backend's event-loop lag, its writer's lock holds and readers' delta
latency with many sessions streaming at once, and while a 100k-message session compresses.

The fake provider paces each streamed turn (`TimedDeltas`, as in test_turn_overhead.py: every
delta stamped just before it is written); each session has two readers, the connection that
submitted it and a watcher subscribed to every session; a reader stamps each `message.delta`
on arrival.  The backend's own numbers come from `backend.stats` (`recent` samples, kept only
when they fall inside the measured window, by the backend's monotonic clock, which is this
host's).  The baseline is the same streaming with one session, in the same run.  Correctness is
asserted (every turn completed, every delta reached both readers once and in order); timings
are printed.
"""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from statistics import median
from typing import Any, TypeVar

import pytest

from backend.compress import tokens as tok
from backend.compress.compressor import READ_PAGE_ROWS, to_entry
from backend.compress.model import Entry
from backend.compress.plan import plan
from backend.compress.prune import prune
from backend.providers.base import ChatRequest
from backend.server.loopwatch import LoopWatch
from backend.store import messages
from backend.store.db import Tx
from backend.store.migrations import migrate
from backend.turn.context import wire_messages
from tests.desktop.seed import seed_long_session_info

from .client import BenchClient, Json, pct
from .conftest import StartBackend
from .paced import PacedFake, paced_fake
from .test_turn_overhead import TOKEN

SESSIONS = 50
DELTAS = 200  # per turn
RATE = 20.0  # deltas per second per session: 10 s a turn, 1,000 deltas/s across 50 sessions
SUBMITTERS = 5  # connections that submit (each a fifth of the sessions), besides the watcher
STREAMERS = 10  # sessions streaming while the long session compresses
LONG_N = 100_000
RECENT = 4096  # shared/protocol/stats.py STATS_RECENT_MAX


@dataclass
class Window:
    """What one measured stretch saw: readers' latencies and the backend's samples in it."""

    started: float = 0.0  # time.monotonic()
    ended: float = 0.0
    latencies: list[float] = field(default_factory=list)  # seconds, every reader, every delta
    # The same deliveries split at the event's `ts` (stamped in the store's writer as it appends
    # the event, before its COMMIT; milliseconds): provider -> stored, and stored -> reader
    # (the rest of the batch, the COMMIT, fan-out, the socket and the reader).
    to_store: list[float] = field(default_factory=list)
    from_store: list[float] = field(default_factory=list)
    own_lags: list[float] = field(default_factory=list)  # ms, this process's loop (the readers')
    lags: list[float] = field(default_factory=list)  # ms, loop-watch samples in the window
    holds: list[Json] = field(default_factory=list)  # writer samples in the window
    batches: int = 0  # writer batches committed in the window (count difference)
    gcs: list[Json] = field(default_factory=list)  # generation-1/2 collections in the window

    def inside(self, sample: Json) -> bool:
        return bool(self.started <= sample["at"] <= self.ended)


async def _stats(client: BenchClient, recent: int = 0) -> Json:
    return await client.call("backend.stats", {"recent": recent})


async def _stream(clients: list[BenchClient], watcher: BenchClient, fake: PacedFake, n: int,
                  tag: str, during: Any = None) -> Window:
    """Creates `n` sessions and streams one paced turn in each at once; checks every delta
    reached both readers once and in order.  `during`: a coroutine run alongside.

    This process only reads (the fake paces in its own, `paced.py`), and its cyclic collector is
    off for the window: a collection here over pytest's heap (60 ms was seen) delays every reader
    at once and is the bench's lateness, not the backend's.  Its loop lag is still printed."""
    owners = [clients[k % len(clients)] for k in range(n)]
    sids = [(await c.call("session.create", {}))["session"]["session_id"] for c in owners]
    for sid in sids:
        await watcher.call("session.subscribe", {"session_id": sid})
    labels = [f"{tag}-{k}" for k in range(n)]
    before = await _stats(watcher)
    gc.collect()
    gc.disable()
    window = Window(started=time.monotonic())
    own = LoopWatch()  # the readers' own loop: its lag is in every delta latency too
    own.start()
    try:
        admissions = await _run_turns(owners, watcher, sids, labels, during)
    finally:
        window.ended = time.monotonic()
        await own.stop()
        gc.enable()
    window.own_lags = [x.ms for x in own.lags.recent(RECENT)]
    _check_and_time(window, owners, watcher, admissions, labels, fake.stamps())
    after = await _stats(watcher, RECENT)
    _collect(window, before, after)
    return window


async def _run_turns(owners: list[BenchClient], watcher: BenchClient, sids: list[str],
                     labels: list[str], during: Any) -> list[str]:
    """Submits one paced turn per session and waits until both readers saw each settle."""
    sent = [await c.send("prompt.submit", {"session_id": sid, "request_id": f"req-{uuid.uuid4().hex}",
                                           "text": f"PACE-{label} go"})
            for c, sid, label in zip(owners, sids, labels, strict=True)]
    side = asyncio.ensure_future(during) if during is not None else None
    admissions = []
    for fut in sent:
        _, resp = await fut
        assert "result" in resp, resp.get("error")
        admissions.append(resp["result"]["receipt"]["admission_id"])
    for c, adm in zip(owners, admissions, strict=True):
        for reader in (c, watcher):
            _, complete = await reader.wait_event("message.complete", adm, timeout=120)
            await reader.wait_event("admission.settled", adm, timeout=120)
            assert complete["data"]["status"] == "completed", complete["data"]
    if side is not None:
        await side
    return admissions


def _check_and_time(window: Window, owners: list[BenchClient], watcher: BenchClient,
                    admissions: list[str], labels: list[str], stamps: dict[str, list[float]]) -> None:
    """Asserts every delta reached both readers once, in order; records each delivery's latency."""
    # CLOCK_REALTIME (the events' `ts`) to perf_counter (CLOCK_MONOTONIC) on this host.
    offset = time.time() - time.perf_counter()
    expected = "".join(f"<{i:05d}>" for i in range(DELTAS))
    for c, adm, label in zip(owners, admissions, labels, strict=True):
        sent = stamps[label]
        for reader in (c, watcher):
            got: list[int] = []
            for t, event in reader.events:
                if event.get("admission_id") != adm:
                    continue
                if event["type"] == "message.complete":
                    assert event["data"]["text"] == expected
                if event["type"] != "message.delta":
                    continue
                stored = datetime.fromisoformat(event["ts"]).timestamp() - offset
                for index in TOKEN.findall(event["data"]["text"]):
                    got.append(int(index))
                    at = sent[int(index)]
                    window.latencies.append(t - at)
                    window.to_store.append(stored - at)
                    window.from_store.append(t - stored)
            assert got == list(range(DELTAS)), "every delta reached each reader once, in order"


def _collect(window: Window, before: Json, after: Json) -> None:
    loop, writer = after["loop"], after["writer"]
    window.lags = [s["ms"] for s in loop["recent"] if window.inside(s)]
    window.holds = [s for s in writer["recent"] if window.inside(s)]
    # The slowest since the start are kept even when `recent` has moved past them.
    for s in writer["slowest"]:
        if window.inside(s) and s not in window.holds:
            window.holds.append(s)
    seen = max(window.lags or [0.0])
    window.lags += [s["ms"] for s in loop["slowest"] if window.inside(s) and s["ms"] > seen]
    window.batches = writer["count"] - before["writer"]["count"]
    gcs = {s["at"]: s for s in after["gc"]["recent"] + after["gc"]["slowest"] if window.inside(s)}
    window.gcs = list(gcs.values())


def _ms(values: list[float]) -> str:
    if not values:
        return "no samples"
    return f"p50 {pct(values, 50):.2f} ms, p99 {pct(values, 99):.2f} ms, max {max(values):.2f} ms"


def _report(name: str, w: Window) -> None:
    holds = [h["ms"] for h in w.holds]
    lat = [x * 1000 for x in w.latencies]
    print(f"BENCH   {name}: {w.ended - w.started:.1f} s")
    print(f"BENCH     loop lag: {_ms(w.lags)} ({len(w.lags)} wake-ups, every 20 ms)")
    print(f"BENCH     writer hold: {_ms(holds)} ({len(w.holds)} of {w.batches} batches sampled)")
    if w.holds:
        top = max(w.holds, key=lambda h: h["ms"])
        print(f"BENCH     longest hold: {top['ms']:.1f} ms, {top['jobs']} jobs, slowest "
              f"{top['slowest']} {top['slowest_ms']:.1f} ms, commit {top['commit_ms']:.1f} ms, "
              f"writer CPU {top['cpu_ms']:.1f} ms")
    commits = [h["commit_ms"] for h in w.holds]
    print(f"BENCH     writer COMMIT alone: {_ms(commits)} (the disk's fsync, shared with the machine)")
    print(f"BENCH     delta to reader: {_ms(lat)} ({len(lat)} deliveries)")
    print(f"BENCH       provider -> stored (event ts, 1 ms grain): {_ms([x * 1000 for x in w.to_store])}")
    print(f"BENCH       stored -> reader: {_ms([x * 1000 for x in w.from_store])}")
    print(f"BENCH       the readers' own loop lag (this process: readers only, gc off): {_ms(w.own_lags)}")
    gen2 = [g["ms"] for g in w.gcs if g["generation"] == 2]
    longest = max([g["ms"] for g in w.gcs] or [0])
    print(f"BENCH     gc: {len(w.gcs)} generation-1/2 passes, max {longest:.1f} ms"
          f" ({len(gen2)} of generation 2, max {max(gen2 or [0]):.1f} ms)")


def _slowest_jobs(holds: list[Json], gcs: list[Json], k: int = 6) -> None:
    for h in sorted(holds, key=lambda h: -h["ms"])[:k]:
        print(f"BENCH       {h['ms']:8.1f} ms hold: {h['slowest']} {h['slowest_ms']:.1f} ms "
              f"(+{h['jobs'] - 1} other jobs), commit {h['commit_ms']:.1f} ms, "
              f"writer CPU {h['cpu_ms']:.1f} ms{_gc_inside(h, gcs)}")


def _gc_inside(hold: Json, gcs: list[Json]) -> str:
    """The collections of 1 ms or more that ran while the hold lasted: every thread waited."""
    start = hold["at"] - hold["ms"] / 1000
    inside = [g for g in gcs if g["at"] - g["ms"] / 1000 < hold["at"] and g["at"] > start
              and g["ms"] >= 1.0]
    if not inside:
        return ""
    return ", during it gc " + " + ".join(f"gen{g['generation']} {g['ms']:.1f} ms" for g in inside)


def _timeline(marks: dict[str, float], w: Window, stats: Json) -> None:
    """When the long turn's stages arrived, and the longest stalls (start → end) among them."""
    t0 = marks["prompt.submit sent"]
    rows = [(t - t0, f"arrived: {name}") for name, t in marks.items()]
    lags = sorted((s for s in stats["loop"]["recent"] if w.inside(s)), key=lambda s: -s["ms"])[:5]
    rows += [(s["at"] - t0, f"loop stalled {s['ms']:.0f} ms (from {(s['at'] - t0) * 1000 - s['ms']:.0f})")
             for s in lags]
    rows += [(h["at"] - t0, f"writer held {h['ms']:.0f} ms (from {(h['at'] - t0) * 1000 - h['ms']:.0f}): "
              f"{h['slowest']}") for h in sorted(w.holds, key=lambda h: -h["ms"])[:3]]
    rows += [(g["at"] - t0, f"gc generation {g['generation']} took {g['ms']:.0f} ms")
             for g in sorted(w.gcs, key=lambda g: -g["ms"])[:3]]
    print("BENCH     timeline of the long turn (ms after its prompt.submit was sent):")
    for at, what in sorted(rows):
        print(f"BENCH       {at * 1000:8.0f}  {what}")


async def _clients(port: int, token: str) -> tuple[list[BenchClient], BenchClient]:
    clients = [await BenchClient.open(port, token) for _ in range(SUBMITTERS)]
    return clients, await BenchClient.open(port, token)


async def _close(clients: list[BenchClient]) -> None:
    for c in clients:
        await c.close()


@pytest.mark.bench
async def test_fifty_sessions_streaming_at_once(
    start_backend: StartBackend
) -> None:
    windows: dict[str, Window] = {}
    with paced_fake(DELTAS, RATE) as fake:
        for name, n in (("1 session (baseline)", 1), (f"{SESSIONS} sessions", SESSIONS)):
            backend = start_backend(fake.base_url)  # a fresh backend per run
            clients, watcher = await _clients(backend.port, backend.token)
            try:
                windows[name] = await _stream(clients, watcher, fake, n, f"n{n}")
            finally:
                await _close([*clients, watcher])
                backend.close()
    print()
    print(f"BENCH load: one turn per session, {DELTAS} deltas at {RATE:.0f}/s each, 2 readers per "
          f"session ({SUBMITTERS} submitting connections + 1 watching all); goals: loop stalls "
          f"< 20 ms, delta p99 < 10 ms")
    for name, w in windows.items():
        _report(name, w)
    print("BENCH     slowest writer batches under load:")
    loaded = windows[f"{SESSIONS} sessions"]
    _slowest_jobs(loaded.holds, loaded.gcs)


@pytest.mark.bench
async def test_writer_hold_while_a_long_session_compresses(
    start_backend: StartBackend
) -> None:
    with paced_fake(DELTAS, RATE) as fake:
        await _compression_under_load(fake, start_backend)


async def _compression_under_load(fake: PacedFake, start_backend: StartBackend) -> None:
    backend = start_backend(fake.base_url)
    assert backend.terminate() == 0
    seeded = seed_long_session_info(backend.data_dir, LONG_N)
    backend.start()
    clients, watcher = await _clients(backend.port, backend.token)
    first: list[float] = []
    marks: dict[str, float] = {}

    async def compress_on_first_turn() -> None:
        await asyncio.sleep(1.0)  # the streams are under way
        long = clients[0]
        await long.call("session.subscribe", {"session_id": seeded.session_id})
        t0 = time.perf_counter()
        resp = await long.call("prompt.submit", {"session_id": seeded.session_id,
                                                 "request_id": f"req-{uuid.uuid4().hex}",
                                                 "text": "carry on"})
        adm = resp["receipt"]["admission_id"]
        _, complete = await long.wait_event("message.complete", adm, timeout=120)
        await long.wait_event("admission.settled", adm, timeout=120)
        first.append(time.perf_counter() - t0)
        assert complete["data"]["status"] == "completed", complete["data"]
        assert any(e.get("type") == "compression.complete" and e.get("admission_id") == adm
                   for _, e in long.events), "the first turn compressed"
        # perf_counter is CLOCK_MONOTONIC on Linux, as the backend's `at` stamps are.
        marks.update({e["type"]: t for t, e in long.events if e.get("admission_id") == adm
                      and e["type"] in ("compression.start", "compression.complete", "message.complete")})
        marks["prompt.submit sent"] = t0

    try:
        alone = await _stream(clients, watcher, fake, STREAMERS, "alone")
        with_long = await _stream(clients, watcher, fake, STREAMERS, "long", compress_on_first_turn())
        after_stats = await _stats(watcher, RECENT)
        since_start = after_stats["writer"]["slowest"]
    finally:
        await _close([*clients, watcher])
    print()
    print(f"BENCH compression under load: {STREAMERS} sessions streaming ({DELTAS} deltas at "
          f"{RATE:.0f}/s each), then the same while a {LONG_N:,}-message session's first turn "
          f"compresses (that turn took {first[0] * 1000:.0f} ms); goal: no write-lock hold over 20 ms")
    _report(f"{STREAMERS} sessions streaming (baseline)", alone)
    _report(f"{STREAMERS} sessions streaming + the long session compressing", with_long)
    print("BENCH     slowest writer batches while it compressed:")
    _slowest_jobs(with_long.holds, with_long.gcs)
    print("BENCH     slowest writer batches since the backend started (start-up recovery included):")
    gcs = {g["at"]: g for g in after_stats["gc"]["recent"] + after_stats["gc"]["slowest"]}
    _slowest_jobs(since_start, list(gcs.values()))
    _timeline(marks, with_long, after_stats)
    stamps = fake.stamps()
    assert median([len(stamps[f"long-{k}"]) for k in range(STREAMERS)]) == DELTAS


T = TypeVar("T")


@pytest.mark.bench
def test_the_long_sessions_cpu_steps_one_by_one(tmp_path: Path) -> None:
    """Where the loop stalls of the compression run come from: the steps the first turn and the
    compressor take over a 100k-message session, timed one by one in this thread on the same
    seeded file, with the generation-2 GC passes that fell inside each."""
    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    migrate(conn)
    conn.close()
    sid = seed_long_session_info(tmp_path, LONG_N).session_id
    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    conn.row_factory = sqlite3.Row
    tx = Tx(conn)
    passes: list[float] = []
    started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if info["generation"] == 2:
            if phase == "start":
                started[0] = time.perf_counter()
            else:
                passes.append((time.perf_counter() - started[0]) * 1000)

    lines: list[str] = []

    def timed(name: str, fn: Callable[[], T]) -> T:
        n, t0 = len(passes), time.perf_counter()
        result = fn()
        took = (time.perf_counter() - t0) * 1000
        lines.append(f"BENCH   {name}: {took:.0f} ms (generation-2 gc inside: "
                     f"{sum(passes[n:]):.0f} ms in {len(passes) - n})")
        return result

    gc.callbacks.append(on_gc)
    try:
        # What the first turn does now: count in SQL, then the compressor's paged read.
        timed("turn: messages.model_size, the SQL count that decides (reader thread)",
              lambda: messages.model_size(tx, sid))
        entries: list[Entry] = []

        def paged() -> None:
            after = 0
            while page := messages.model_page(tx, sid, after, READ_PAGE_ROWS):
                entries.extend(e for e in map(to_entry, page) if e is not None)
                after = page[-1].id

        timed(f"compressor: pages of {READ_PAGE_ROWS:,} rows read and made entries "
              "(reader thread, a page per read)", paged)
        cal = tok.Calibration()
        p = timed("compressor: request_tokens and plan (a worker thread)",
                  lambda: (tok.request_tokens("prompt", entries, 0, cal),
                           plan(entries, 2, tok.tail_budget(128_000), cal))[1])
        assert p is not None
        head = timed("compressor: prune, the head only (on the loop)",
                     lambda: prune(p.head, len(p.head)))
        changed = [(o, n) for o, n in zip(p.head, head, strict=True) if o is not n]
        # What it did before (a full request built only to learn it was too large, on the
        # loop); kept as the comparison.
        rows = timed("before: messages.for_model, all of it (reader thread)",
                     lambda: messages.for_model(tx, sid))
        wire = timed("before: context.wire_messages (on the loop)", lambda: wire_messages("prompt", rows))
        request = ChatRequest(model="m", messages=wire, tools=())
        timed("before: tokens.request_chars, preflight and due (on the loop)",
              lambda: tok.request_chars(request))
    finally:
        gc.callbacks.remove(on_gc)
        conn.close()
    print()
    print(f"BENCH long session's CPU steps, one thread ({LONG_N:,} seeded messages; "
          f"{len(p.middle):,} to compact, {len(changed):,} pruned):")
    for line in lines:
        print(line)
