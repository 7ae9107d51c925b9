"""Tool executor overhead: one call, and a batch of 8, against running the same tool directly.

In-process on a real SQLite file (WAL, synchronous=FULL) with the real executor, approvals
and checkpoints.  The tool is the built-in `list_dir` on a tiny folder, so what is measured
beyond the raw call is the executor: the start-order gate, the `tool.start` commit, the
result row with its `tool.complete` commit, ordering and the monitor task.  The raw baseline
is `await tool.run(...)` with the same arguments, in the same run.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median

import pytest

from backend.config import ConfigFile
from backend.ids import new_id
from backend.store import leases, sessions
from backend.store.db import SqliteDatabase
from backend.store.fenced import TurnFence
from backend.store.leases import Holder
from backend.tools.approvals import Approvals
from backend.tools.base import ToolContext
from backend.tools.checkpoints import Checkpoints
from backend.tools.executor import BatchContext, Executor, PreparedCall
from backend.tools.procs import ProcessTable
from backend.tools.registry import BUILTINS

from .client import ms, pct


@dataclass(frozen=True)
class _Turn:
    session_id: str
    holder: Holder

ROUNDS = 200
BATCH_ROUNDS = 60


@pytest.mark.bench
async def test_executor_overhead(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a")
    db = SqliteDatabase(tmp_path / "state.db")
    await db.open()
    try:
        sid = new_id("ses")
        await db.write(lambda tx: sessions.insert(tx, sid, "bench", str(work), "m"))
        turn = _Turn(sid, Holder.here(1, new_id("turn")))  # its writes are fenced on this lease
        await db.write(lambda tx: leases.put(tx, sid, turn.holder, time.time(), 3600))
        config = ConfigFile(tmp_path / "config.toml")
        config.load()
        executor = Executor(db, Approvals(db, config, 1), Checkpoints(db, tmp_path), tmp_path / "data",
                            ProcessTable(tmp_path))
        tool = BUILTINS["list_dir"]
        args = {"path": "."}

        def scope() -> BatchContext:
            return BatchContext(session_id=sid, turn_id=new_id("turn"), admission_id="adm_bench", cwd=work,
                         env={}, mode="smart", deadline_s=420, spill_chars=100_000,
                         stop=asyncio.Event(), fence=TurnFence(db, turn))

        def calls(n: int) -> list[PreparedCall]:
            return [PreparedCall(new_id("call"), "list_dir", dict(args), None, tool) for _ in range(n)]

        raw: list[float] = []
        ctx = ToolContext(work, sid, "turn", "call", {})
        for _ in range(ROUNDS):
            t0 = time.perf_counter()
            await tool.run(dict(args), ctx)
            raw.append(time.perf_counter() - t0)

        one: list[float] = []
        for _ in range(ROUNDS):
            t0 = time.perf_counter()
            result = await executor.run(scope(), calls(1))
            one.append(time.perf_counter() - t0)
            assert [o.status for o in result.outcomes] == ["ok"]

        eight: list[float] = []
        for _ in range(BATCH_ROUNDS):
            t0 = time.perf_counter()
            result = await executor.run(scope(), calls(8))
            eight.append(time.perf_counter() - t0)
            assert [o.status for o in result.outcomes] == ["ok"] * 8
    finally:
        await db.close()

    raw_med = median(raw)
    print()
    print(f"BENCH executor raw tool call (list_dir, direct): median {ms(raw_med)}")
    print(f"BENCH executor 1 call: median {ms(median(one))}, p95 {ms(pct(one, 95))}; "
          f"overhead {ms(median(one) - raw_med)} per call")
    print(f"BENCH executor batch of 8: median {ms(median(eight))}, p95 {ms(pct(eight, 95))}; "
          f"overhead {ms((median(eight) - 8 * raw_med) / 8)} per call, "
          f"{median(eight) / (8 * raw_med):.1f}x eight direct calls")
