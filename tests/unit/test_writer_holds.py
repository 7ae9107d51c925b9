"""The store writer's lock-hold timing (Database.holds): per batch, named by its slowest job."""

from __future__ import annotations

import asyncio
import inspect
import time
from pathlib import Path

import pytest

from backend.store.db import SqliteDatabase, Tx

SLEEP_S = 0.03


async def test_a_slow_job_shows_as_the_batchs_hold_and_by_name(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "state.db")
    await db.open()
    try:
        before = db.holds.count

        def quick(tx: Tx) -> int:
            return 1

        def slow_job(tx: Tx) -> int:
            time.sleep(SLEEP_S)  # under the write lock
            return 2

        results = await asyncio.gather(db.write(quick), db.write(slow_job), db.write(quick))
        assert list(results) == [1, 2, 1], "timing changes no result"
    finally:
        await db.close()
    assert db.holds.count > before
    assert db.holds.max_ms >= SLEEP_S * 1000
    [longest, *_] = db.holds.slowest()
    assert longest.ms >= SLEEP_S * 1000
    assert longest.slowest_ms >= SLEEP_S * 1000
    assert longest.slowest.endswith(":test_a_slow_job_shows_as_the_batchs_hold_and_by_name.<locals>.slow_job")
    assert longest.ms >= longest.slowest_ms + longest.commit_ms - 1e-6
    assert longest.jobs >= 1
    assert db.holds.recent(1)[0].at <= time.monotonic()


async def test_a_failing_job_is_timed_too_and_still_fails(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "state.db")
    await db.open()
    try:
        def failing(tx: Tx) -> None:
            time.sleep(SLEEP_S)
            raise ValueError("no")

        with pytest.raises(ValueError, match="no"):
            await db.write(failing)
    finally:
        await db.close()
    [longest, *_] = db.holds.slowest()
    assert longest.ms >= SLEEP_S * 1000
    assert longest.slowest.endswith(".failing")


async def test_a_lambda_is_named_by_its_line_and_cpu_time_is_counted(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "state.db")
    await db.open()

    def spin(seconds: float) -> int:
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass
        return 3

    try:
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        assert await db.write(lambda tx: spin(SLEEP_S)) == 3
    finally:
        await db.close()
    [longest, *_] = db.holds.slowest()
    assert longest.slowest.endswith(f".<lambda>@{line}")
    assert longest.cpu_ms >= SLEEP_S * 1000
