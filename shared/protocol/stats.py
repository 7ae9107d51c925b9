"""backend.stats: event-loop lag, the store writer's lock holds, garbage-collector pauses, and
what happened between backends sharing one store."""

from __future__ import annotations

from typing import Annotated

import msgspec

from shared.protocol.base import Params

STATS_RECENT_MAX = 4096  # recent samples kept per measurement


class BackendStatsParams(Params):
    recent: Annotated[int, msgspec.Meta(ge=0, le=STATS_RECENT_MAX)] = 0  # latest samples wanted


class Threshold(msgspec.Struct, kw_only=True):
    ms: int
    count: int  # samples at least `ms` long


class LagSample(msgspec.Struct, kw_only=True, frozen=True):
    """One wake-up of the loop watch: how late it woke."""

    at: float  # the backend's monotonic clock (seconds) at the wake-up
    ms: float


class GcPause(msgspec.Struct, kw_only=True, frozen=True):
    """One pass of the cyclic garbage collector over generation 1 or 2 (every thread waits)."""

    at: float  # the backend's monotonic clock (seconds) when it ended
    ms: float
    generation: int
    collected: int  # objects it freed


class HoldSample(msgspec.Struct, kw_only=True, frozen=True):
    """One write transaction of the store's writer: BEGIN IMMEDIATE to the end of COMMIT."""

    at: float  # the backend's monotonic clock (seconds) when the transaction ended
    ms: float  # the write lock's hold: the batch's jobs and the durable COMMIT
    jobs: int  # jobs in the batch (group commit)
    slowest: str  # the batch's longest job: its function's module and qualified name
    slowest_ms: float
    commit_ms: float  # the COMMIT alone (WAL append and fsync)
    # The writer thread's CPU time over the hold: `ms` well above `cpu_ms + commit_ms` is
    # waiting, mostly for the GIL (the sqlite3 module releases it around each statement).
    cpu_ms: float


class LoopStats(msgspec.Struct, kw_only=True):
    interval_ms: float  # the watch's tick while a turn runs or is queued (1 s otherwise)
    count: int
    max_ms: float
    mean_ms: float
    over: list[Threshold]
    slowest: list[LagSample]  # since the start, longest first
    recent: list[LagSample]  # the latest `recent` asked for, oldest first


class WriterStats(msgspec.Struct, kw_only=True):
    count: int
    max_ms: float
    mean_ms: float
    over: list[Threshold]
    slowest: list[HoldSample]  # since the start, longest first
    recent: list[HoldSample]  # the latest `recent` asked for, oldest first


class GcStats(msgspec.Struct, kw_only=True):
    count: int
    max_ms: float
    mean_ms: float
    over: list[Threshold]
    slowest: list[GcPause]  # since the start, longest first
    recent: list[GcPause]  # the latest `recent` asked for, oldest first


class FleetStats(msgspec.Struct, kw_only=True):
    """Addition: this backend's count, since it started, of what happened between the backends
    sharing its store (always 0 on SQLite)."""

    takeovers: int = 0  # another holder's turns it ended `unknown`, freeing their sessions
    fenced_writes: int = 0  # writes of its own turns refused: their lease named another holder


class BackendStatsResult(msgspec.Struct, kw_only=True):
    """Since the backend started: event-loop lag and the store writer's lock holds."""

    now: float  # the backend's monotonic clock (seconds) as it answered, to age `at` values
    uptime_s: float
    loop: LoopStats
    writer: WriterStats
    gc: GcStats  # generations 1 and 2 only
    fleet: FleetStats = msgspec.field(default_factory=FleetStats)  # addition
