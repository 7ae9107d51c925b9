"""Kill the disk: the data folder fills up while a turn streams, then has room again.

The backend's data folder is a small tmpfs of its own.  While the fake model holds the
stream after its first delta, the test fills the folder with a ballast file, lets the
stream go on and waits until the backend says the turn's end could not be saved.  With
the folder still full the process keeps serving (reads answer, writes fail with an
error); once the ballast is gone the turn is settled `unknown` in place — the state a
restart would give it — and the session works again without a restart: a new prompt
(after `admission.resolve`, or on its own) runs to completion, nothing runs twice, and
the process never died.  The log, which lives in the same full folder, loses lines at
worst and never a process.

Mounting needs root (CI runs the suite as root); elsewhere the test is skipped.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply, content_text

from .backend_proc import Backend
from .wire import (
    Json,
    Rpc,
    RpcError,
    create_session,
    get_receipt,
    is_event,
    submit,
    transcript,
    wait_complete,
)

pytestmark = pytest.mark.sqlite_only("fills the small disk DATA_DIR/state.db is on")

DISK_BYTES = 16 * 1024 * 1024
TRIES_WHILE_FULL = 60  # their warnings are far more than the slack of the log's last page
WAIT_S = 60.0  # a failure bound for what the backend does on its own, never a measured time
UNSAVED = "becomes unknown once the database takes writes again"  # the backend's stderr line
STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of DISK_BYTES mounted on a fresh folder, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("filling a disk needs a small tmpfs, and mounting one needs root "
                    "(CI runs as root)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES},mode=0700",
                           "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode})")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], check=True)  # a straggler holds a file


def fill(folder: Path) -> Path:
    """Writes a ballast file until the disk refuses another byte; returns it."""
    ballast = folder / "ballast"
    with ballast.open("wb", buffering=0) as f:
        for size in (1 << 20, 1 << 12, 1):
            chunk = b"\0" * size
            with pytest.raises(OSError, match=os.strerror(errno.ENOSPC)):  # noqa: PT012
                while True:
                    f.write(chunk)
    return ballast


async def wait_for_line(backend: Backend, text: str, timeout: float = WAIT_S) -> None:
    """Until the backend's stderr has `text` (its log is on the full disk, stderr is not)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while text not in backend.stderr_tail(chars=1_000_000):
        if loop.time() > deadline:
            raise AssertionError(f"no {text!r} on stderr within {timeout} s:\n"
                                 f"{backend.stderr_tail()}")
        await asyncio.sleep(0.05)


async def wait_not_started(rpc: Rpc, admission_id: str, timeout: float = WAIT_S) -> Json:
    """Polls the receipt until it leaves `started`; returns it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (receipt := await get_receipt(rpc, admission_id))["status"] == "started":
        if loop.time() > deadline:
            raise AssertionError(f"admission {admission_id} still started after {timeout} s")
        await asyncio.sleep(0.05)
    return receipt


async def session_status(rpc: Rpc, sid: str) -> str:
    return str((await rpc.call("session.get", {"session_id": sid}))["session"]["status"])


@pytest.mark.parametrize("moving_on", ["resolve", "prompt"])
async def test_a_disk_that_fills_mid_turn_leaves_nothing_stuck(
    moving_on: str, small_disk: Path, tmp_path: Path, fake_provider: FakeOpenAI
) -> None:
    release = threading.Event()
    fake_provider.routes["fill the disk"] = Reply(
        deltas=["seen ", "never ", "saved"], hang_after=1, release=release)
    fake_provider.routes["after the disk"] = Reply(deltas=["fresh ", "answer"])
    backend = Backend(small_disk, fake_provider.base_url)
    backend.stderr_path = tmp_path / "backend-stderr.log"  # off the disk that fills
    backend.start()
    try:
        rpc = await Rpc.open(backend.port, backend.token)
        sid = await create_session(rpc)
        await rpc.call("session.subscribe", {"session_id": sid})
        first = (await submit(rpc, sid, "fill the disk"))["admission_id"]
        await rpc.wait_event(is_event("message.delta", first))  # "seen " is stored and shown

        ballast = fill(small_disk)
        release.set()  # the rest of the answer arrives with no room to store it
        await wait_for_line(backend, UNSAVED)
        assert backend.alive()

        # Full, yet serving: reads answer, writes fail at once with an error, nothing hangs.
        # Someone keeps trying, and the log (one warning per try) outgrows its last page.
        assert await session_status(rpc, sid) == "running", "still started on disk"
        for n in range(TRIES_WHILE_FULL):
            with pytest.raises(RpcError) as refused:
                await submit(rpc, sid, f"try {n} while the disk is full")
            assert refused.value.code == -32603, refused.value
            assert "full" in refused.value.message, refused.value
        assert backend.alive()

        ballast.unlink()  # room again: no restart from here on
        if moving_on == "resolve":
            receipt = await wait_not_started(rpc, first)
            assert receipt["status"] == "unknown", receipt
            assert await session_status(rpc, sid) == "unknown", "not stuck running"
            result = await rpc.call("admission.resolve", {"admission_id": first,
                                                          "resolution": "interrupted"})
            assert (result["receipt"]["status"], result["receipt"]["outcome"]) == (
                "terminal", "interrupted")
        second = (await submit(rpc, sid, "after the disk"))["admission_id"]
        done = (await wait_complete(rpc, second))["data"]
        assert (done["status"], done["text"]) == ("completed", "fresh answer"), done
        assert backend.alive()

        receipt = await get_receipt(rpc, first)
        assert (receipt["status"], receipt["outcome"]) == ("terminal", "interrupted"), receipt
        assert await session_status(rpc, sid) == "idle"
        rows = await transcript(rpc, sid)
        shape = [(m["role"], m["content"] if m["role"] != "system_note" else m["note_kind"],
                  m.get("status")) for m in rows]
        assert shape == [
            ("user", "fill the disk", None),
            ("assistant", "seen ", "unknown"),  # what people saw of it, marked
            ("system_note", "recovered", None),
            ("user", "after the disk", None),
            ("assistant", "fresh answer", None),  # one row for the one completed turn
        ], shape
        assert not [e for e in rpc.events if is_event("message.complete", first)(e)], (
            "an unknown turn gets no made-up completion")
        requests = fake_provider.snapshot()
        assert len(requests) == 2, "the lost turn is never run again"
        sent = [(m["role"], content_text(m)) for m in requests[1].body["messages"][1:]]
        assert sent == [("user", "fill the disk"), ("assistant", "seen "),
                        ("user", "after the disk")], sent
        await rpc.close()
        assert backend.terminate() == 0, "and it still shuts down cleanly"
    finally:
        backend.close()

    log = (small_disk / "logs" / "backend.log").read_text(errors="replace")
    assert "Traceback" not in log, log[-4000:]
    assert "Logging error" not in log, log[-4000:]
    lines = log.splitlines()
    assert all(len(STAMP.findall(line)) <= 1 for line in lines), "no records glued together"
    cut = [line for line in lines if not STAMP.match(line)]
    assert len(cut) <= 1, f"at most the line the disk cut short: {cut}"
    assert re.search(r"WARNING logs: \d+ log records could not be written \(No space left on "
                     r"device\) and are missing here", log), log[-4000:]
    assert "the database commits again" in log, "logging went on once there was room"
    assert backend.logged_errors() == [], "a full disk is the environment's fault, not an error"
