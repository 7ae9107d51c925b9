"""The terminal tool with real subprocesses: exit codes, bounded output, killing on timeout and interrupt."""

import asyncio
import os
import time
from pathlib import Path

import pytest

from backend.tools.base import ToolContext
from backend.tools.terminal import Terminal

TOOL = Terminal()


def _ctx(cwd: Path, progress: list[str] | None = None) -> ToolContext:
    seen = progress if progress is not None else []
    return ToolContext(cwd=cwd, session_id="s", turn_id="t", call_id="c", env=dict(os.environ),
                       progress=seen.append)


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for a parent (container init may never reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # (gone between the open and the read)
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def _gone(pids: list[int], within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        await asyncio.sleep(0.05)
    return False


def _real(path: Path) -> str:
    return str(path.resolve())


def _words(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


async def _pids(path: Path, count: int) -> list[int]:
    for _ in range(200):
        lines = _words(path)
        if len(lines) >= count:
            return [int(x) for x in lines]
        await asyncio.sleep(0.025)
    raise AssertionError(f"{path} never got {count} pids")


async def test_exit_code_stdout_and_stderr(tmp_path: Path) -> None:
    result = await TOOL.run({"command": "echo out; echo err >&2; exit 3", "timeout_s": 30}, _ctx(tmp_path))
    assert result.status == "error"
    assert result.content == "exit code: 3\nstdout:\nout\nstderr:\nerr"
    assert result.meta == {"exit_code": 3}


async def test_success_omits_empty_sections(tmp_path: Path) -> None:
    result = await TOOL.run({"command": "true"}, _ctx(tmp_path))
    assert (result.status, result.content, result.meta) == ("ok", "exit code: 0", {"exit_code": 0})
    quiet_err = await TOOL.run({"command": "echo only-err >&2"}, _ctx(tmp_path))
    assert "stdout:" not in quiet_err.content
    assert "stderr:\nonly-err" in quiet_err.content


async def test_runs_in_cwd_and_workdir(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    real = _real(tmp_path)
    here = await TOOL.run({"command": "pwd -P"}, _ctx(tmp_path))
    assert here.content.endswith(real)
    sub = await TOOL.run({"command": "pwd -P", "workdir": "sub"}, _ctx(tmp_path))
    assert sub.content.endswith(os.path.join(real, "sub"))


async def test_missing_workdir_is_an_error(tmp_path: Path) -> None:
    result = await TOOL.run({"command": "pwd", "workdir": "nope"}, _ctx(tmp_path))
    assert result.status == "error"
    assert "workdir" in result.content


async def test_env_is_passed(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    ctx.env = {**ctx.env, "TURNKEY_TEST_VALUE": "hello-env"}
    result = await TOOL.run({"command": "echo $TURNKEY_TEST_VALUE"}, ctx)
    assert "hello-env" in result.content


async def test_undecodable_output_is_replaced(tmp_path: Path) -> None:
    result = await TOOL.run({"command": r"printf 'a\377b'"}, _ctx(tmp_path))
    assert "a\ufffdb" in result.content


async def test_huge_output_stays_bounded(tmp_path: Path) -> None:
    started = time.monotonic()
    result = await TOOL.run({"command": "yes | head -c 300000000; echo tail-marker"}, _ctx(tmp_path))
    assert time.monotonic() - started < 60
    assert result.status == "ok"
    assert len(result.content) < 100_000
    assert "characters omitted ...]" in result.content
    assert result.content.rstrip().endswith("tail-marker")
    assert result.content.startswith("exit code: 0\nstdout:\ny\ny\n")


async def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    command = f"sh -c 'sleep 30 & echo $! >> {pidfile}; sleep 30' & echo $! >> {pidfile}; wait"
    started = time.monotonic()
    result = await TOOL.run({"command": command, "timeout_s": 1}, _ctx(tmp_path))
    assert time.monotonic() - started < 5
    assert result.status == "error"
    assert "timed out after 1 s" in result.content
    assert result.meta["timed_out"] is True
    assert await _gone(await _pids(pidfile, 2)), "children of a timed-out command survived"


async def test_timeout_escalates_to_sigkill(tmp_path: Path) -> None:
    started = time.monotonic()
    result = await TOOL.run({"command": "trap '' TERM; echo ready; sleep 30", "timeout_s": 1}, _ctx(tmp_path))
    assert time.monotonic() - started < 10
    assert result.status == "error"
    assert "ready" in result.content


@pytest.mark.parametrize("trap", ["", "trap '' TERM; "], ids=["plain", "ignores-sigterm"])
async def test_cancel_kills_the_group_and_reraises(tmp_path: Path, trap: str) -> None:
    pidfile = tmp_path / "pids"
    command = f"{trap}echo $$ >> {pidfile}; sleep 30 & echo $! >> {pidfile}; wait"
    task = asyncio.create_task(TOOL.run({"command": command, "timeout_s": 60}, _ctx(tmp_path)))
    pids = await _pids(pidfile, 2)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The executor waits for a cancelled call; the contract is "gone within about 2.5 s".
    assert time.monotonic() - started < 2.5
    assert await _gone(pids), "an interrupted command's processes survived"


async def test_background_child_holding_the_pipes_does_not_hang(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    started = time.monotonic()
    result = await TOOL.run({"command": f"sleep 100 & echo $! > {pidfile}; echo started"}, _ctx(tmp_path))
    try:
        assert time.monotonic() - started < 10
        assert result.status == "ok"
        assert "started" in result.content
    finally:
        os.kill(int(pidfile.read_text()), 9)


async def test_progress_gets_every_byte_in_order_as_it_comes(tmp_path: Path) -> None:
    seen: list[str] = []
    command = "for i in 1 2 3 4 5 6; do echo line$i; sleep 0.1; done"
    result = await TOOL.run({"command": command}, _ctx(tmp_path, seen))
    assert result.status == "ok"
    assert "".join(seen) == "".join(f"line{i}\n" for i in range(1, 7))
    assert len(seen) >= 3, "it comes while the command runs, not at the end"


async def test_progress_interleaves_stdout_and_stderr_and_keeps_characters_whole(
    tmp_path: Path,
) -> None:
    seen: list[str] = []
    # "é" is \xc3\xa9: its two bytes come in two writes, with stderr in between.
    command = ("printf 'out 1\\n'; sleep 0.2; printf 'err 1\\n' >&2; sleep 0.2; "
               "printf 'caf\\303'; sleep 0.2; printf 'err 2\\n' >&2; sleep 0.2; "
               "printf '\\251 \\033[32mgreen\\033[0m\\r50%%\\r100%%\\n'")
    result = await TOOL.run({"command": command}, _ctx(tmp_path, seen))
    assert result.status == "ok", result.content
    # Arrival order, as a terminal would show it; the held byte waits for its partner.
    assert "".join(seen) == ("out 1\nerr 1\ncaferr 2\né \x1b[32mgreen\x1b[0m\r50%\r100%\n")
    assert "\ufffd" not in "".join(seen)


def test_summary_and_guard(tmp_path: Path) -> None:
    assert TOOL.summary({"command": "make test\nmake lint"}) == "make test …"
    assert TOOL.guard({"command": "ls"}, tmp_path, "smart") is None
    guard = TOOL.guard({"command": "rm -rf build"}, tmp_path, "smart")
    assert guard is not None
    assert guard.kind == "dangerous"
    assert TOOL.spill is True
    assert TOOL.changes_files is False
