"""Live terminal output through a real backend: a stream with nothing lost, bounded under a flood."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend
from .wire import Connect, Json, Rpc, create_session, submit, terminal, transcript, wait_complete

MARKER = re.compile(r"\n?… [^\n]* not shown live; see the result …\n")


def progress_of(rpc: Rpc, sid: str, call_id: str) -> list[Json]:
    return [e for e in rpc.session_events(sid)
            if e["type"] == "tool.progress" and e["data"]["call_id"] == call_id]


def stdout_of(result: str) -> str:
    """The stdout part of a terminal result ("exit code: 0\\nstdout:\\n...")."""
    assert result.startswith("exit code: 0\nstdout:\n"), result[:200]
    return result.removeprefix("exit code: 0\nstdout:\n")


async def run_one(rpc: Rpc, fake: FakeOpenAI, tmp_path: Path, command: str) -> tuple[str, Json]:
    fake.script(Reply.calls(terminal(command)), Reply(deltas=["Ran it."]))
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "run it")
    done = await wait_complete(rpc, receipt["admission_id"], timeout=180)
    assert done["data"]["status"] == "completed", done
    (complete,) = [e for e in rpc.session_events(sid) if e["type"] == "tool.complete"]
    return sid, complete


async def test_progress_is_the_output_in_order_with_nothing_lost(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    """The report: `line 1` … `line 40` showed as `line 1line 3line 5...` while it ran."""
    rpc = await connect()
    command = "for i in $(seq 1 40); do echo \"line $i\"; sleep 0.05; done"
    sid, complete = await run_one(rpc, fake_provider, tmp_path, command)
    call_id = complete["data"]["call_id"]
    progress = progress_of(rpc, sid, call_id)
    streamed = "".join(e["data"]["text"] for e in progress)
    assert streamed == "".join(f"line {i}\n" for i in range(1, 41))
    assert len(progress) >= 5, "the output streams while the command runs"
    assert all(e["seq"] < complete["seq"] for e in progress), "the last chunk comes before the result"
    rows = await transcript(rpc, sid)
    (result,) = [m["content"] for m in rows if m["role"] == "tool"]
    assert stdout_of(result) == streamed.rstrip("\n")


async def test_a_gigabyte_of_output_is_skipped_live_and_memory_stays_flat(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    rpc = await connect()
    before = rss_kb(backend.pid)
    peak = before
    sampling = True

    async def sample() -> None:
        nonlocal peak
        while sampling:
            peak = max(peak, rss_kb(backend.pid))
            await asyncio.sleep(0.05)

    sampler = asyncio.create_task(sample())
    started = time.monotonic()
    try:
        sid, complete = await run_one(rpc, fake_provider, tmp_path, "yes 'a line' | head -c 1073741824")
    finally:
        sampling = False
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
    seconds = time.monotonic() - started
    print(f"1 GiB in {seconds:.1f} s; RSS {before // 1024} MB before, {peak // 1024} MB at most")
    assert peak - before < 100 * 1024, f"the backend grew by {(peak - before) // 1024} MB"

    progress = progress_of(rpc, sid, complete["data"]["call_id"])
    texts = [e["data"]["text"] for e in progress]
    skipped = [e for e in progress if e["data"].get("elided_bytes")]
    assert skipped, "a flood must be marked as skipped"
    size = sum(len(t.encode()) for t in texts)
    # 1 MiB at full rate, then 1 KiB every 2 s, and the last 64 KiB; heartbeats aside.
    print(f"{len(progress)} progress events, {size:,} bytes of text, {len(skipped)} with a marker")
    assert size < 1024 * 1024 + 2 * 1024 * seconds / 2 + 80 * 1024, size
    assert len(progress) < 2100 + seconds / 2, len(progress)
    assert all(MARKER.match(e["data"]["text"]) for e in skipped)
    shown = sum(len(MARKER.sub("", t).encode()) for t in texts)
    assert shown + sum(e["data"]["elided_bytes"] for e in skipped) == 1024 ** 3, \
        "what was shown and what was skipped add up to the output"
    rows = await transcript(rpc, sid)
    (result,) = [m["content"] for m in rows if m["role"] == "tool"]
    assert "".join(texts).endswith(stdout_of(result)[-10_000:]), "the live tail ends as the output does"


def rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    assert match is not None
    return int(match.group(1))
