"""`backend.stats` on a real backend: what it measured of itself, its fleet counters, and who may
ask."""

from __future__ import annotations

import time

import msgspec
import pytest

from shared.errors import ErrorCode
from shared.protocol import STATS_RECENT_MAX, BackendStatsResult, FleetStats
from tests.fakes.openai_server import FakeOpenAI

from .wire import Connect, RpcError, create_session, run_turn


async def test_stats_count_the_writers_batches_and_name_their_slowest_job(
    connect: Connect, fake_provider: FakeOpenAI
) -> None:
    owner = await connect()
    sid = await create_session(owner)
    await run_turn(owner, sid, "hello")
    t0 = time.monotonic()
    stats = await owner.call("backend.stats", {"recent": 5})
    writer, loop = stats["writer"], stats["loop"]
    assert writer["count"] >= 4, "admission, claim, a delta and the close commit at least"
    assert 0 < len(writer["recent"]) <= 5
    assert writer["max_ms"] == writer["slowest"][0]["ms"] > 0
    assert all(":" in s["slowest"] and s["jobs"] >= 1 for s in writer["recent"])
    assert [t["ms"] for t in writer["over"]] == [10, 20, 50, 100, 1000]
    assert loop["interval_ms"] == 20
    assert len(loop["recent"]) <= 5
    assert stats["uptime_s"] > 0
    assert abs(stats["now"] - t0) < 60, "the backend's monotonic clock is this host's"
    assert (await owner.call("backend.stats", {}))["writer"]["recent"] == []


async def test_stats_need_admin_and_bound_recent(connect: Connect) -> None:
    owner = await connect()
    reader_token = (await owner.call("token.create", {"scopes": ["read", "submit"], "label": "r"}))["token"]
    reader = await connect(token=reader_token, name="reader")
    with pytest.raises(RpcError) as caught:
        await reader.call("backend.stats", {})
    assert caught.value.code == ErrorCode.FORBIDDEN
    with pytest.raises(RpcError) as caught:
        await owner.call("backend.stats", {"recent": STATS_RECENT_MAX + 1})
    assert caught.value.code == ErrorCode.INVALID_PARAMS


async def test_stats_carry_the_fleet_counters(connect: Connect) -> None:
    """Takeovers and fenced writes between backends on one store (none on a lone backend)."""
    owner = await connect()
    stats = await owner.call("backend.stats", {})
    assert stats["fleet"] == {"takeovers": 0, "fenced_writes": 0}
    assert msgspec.convert(stats, BackendStatsResult).fleet == FleetStats()
