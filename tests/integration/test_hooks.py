"""Hooks in real turns: the person's commands run at a turn's points, in the command sandbox.

Each hook is a Python script the test writes into tmp_path, outside the session folder (the
model cannot write it), run with the test's own interpreter.  The backend runs them for real;
only the model is scripted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply, content_text
from tests.procs import unique_sleep, wait_gone

from .backend_proc import Backend, BackendFactory
from .wire import Json, Rpc, create_session, run_turn, terminal, tool_messages, transcript

BLOCK_RM = """
import json, sys
event = json.load(sys.stdin)
command = event["tool"]["args"].get("command", "")
if "rm" in command.split():
    print(json.dumps({"decision": "block", "reason": "rm is not allowed in this folder"}))
"""

# Writes the pids it is known by into the session folder (its working folder), then hangs;
# "fork" first starts a child that holds the output pipes too.  argv[1] is a unique sleep.
HANG = """
import json, os, subprocess, sys, time
json.load(sys.stdin)
pids = [os.getpid()]
if sys.argv[2] == "fork":
    pids.append(subprocess.Popen(sys.argv[1].split()).pid)
with open("hung.pids", "w") as f:
    f.write(json.dumps(pids))
time.sleep(1000)
"""


def hook_table(name: str, script: Path, event: str, *args: str, **extra: Any) -> str:
    """A `[hooks.NAME]` table running `script` with the test's interpreter."""
    lines = [f"[hooks.{name}]", f"event = {json.dumps(event)}",
             f"command = {json.dumps([sys.executable, str(script), *args])}"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def write_hook(tmp_path: Path, name: str, code: str) -> Path:
    folder = tmp_path / "hooks"
    folder.mkdir(exist_ok=True)
    script = folder / f"{name}.py"
    script.write_text(code)
    return script


def session_folder(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return work


async def open_session(backend: Backend, cwd: Path) -> tuple[Rpc, str]:
    rpc = await Rpc.open(backend.port, backend.token)
    return rpc, await create_session(rpc, cwd=str(cwd))


def notes(rows: list[Json], kind: str = "hook") -> list[str]:
    return [m["content"] for m in rows if m["role"] == "system_note" and m.get("note_kind") == kind]


async def test_a_pre_tool_hook_blocks_rm_and_the_model_reads_why(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    script = write_hook(tmp_path, "no_rm", BLOCK_RM)
    backend = backend_factory(fake_provider.base_url,
                              hook_table("no-rm", script, "pre_tool", tools=["terminal"]))
    work = session_folder(tmp_path)
    (work / "x").mkdir()
    (work / "x" / "keep.txt").write_text("precious")
    fake_provider.script(Reply.calls(terminal("rm -rf x")), Reply.calls(terminal("ls")),
                         Reply(deltas=["Could not remove it."]))
    rpc, sid = await open_session(backend, work)
    try:
        _, done = await run_turn(rpc, sid, "clean up")
        assert done["data"]["status"] == "completed", done
        assert (work / "x" / "keep.txt").read_text() == "precious"  # rm never ran
        requests = fake_provider.snapshot()
        blocked = tool_messages(requests[1].body)[-1]
        assert "blocked by hook no-rm: rm is not allowed in this folder" in content_text(blocked)
        listed = tool_messages(requests[2].body)[-1]
        assert "x" in content_text(listed).split("stdout:", 1)[1]  # ls passed the hook
        rows = [m for m in await transcript(rpc, sid) if m["role"] == "tool"]
        assert [m["status"] for m in rows] == ["denied", "ok"]
        assert rows[0]["meta"]["decided_by"] == "hook"
        assert rows[0]["meta"]["hook"] == "no-rm"
    finally:
        await rpc.close()


@pytest.mark.parametrize(("variant", "event"), [("hang", "prompt_submit"), ("fork", "pre_tool")])
async def test_a_hanging_hook_is_killed_at_its_timeout_and_the_turn_goes_on(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path,
    variant: str, event: str,
) -> None:
    token = unique_sleep(1000)
    script = write_hook(tmp_path, "hang", HANG)
    backend = backend_factory(fake_provider.base_url,
                              hook_table("stuck", script, event, token, variant, timeout_s=1))
    work = session_folder(tmp_path)
    fake_provider.script(Reply.calls(terminal("echo ran")), Reply(deltas=["Done anyway."]))
    rpc, sid = await open_session(backend, work)
    try:
        _, done = await run_turn(rpc, sid, "go on")
        assert done["data"]["status"] == "completed", done
        assert done["data"]["text"] == "Done anyway."
        pids = json.loads((work / "hung.pids").read_text())  # it ran, and started its child
        assert len(pids) == (2 if variant == "fork" else 1)
        assert await wait_gone(token) == []  # the hook and its child were killed
        rows = await transcript(rpc, sid)
        said = notes(rows)
        assert len(said) == 1, said
        assert f"{event} hook stuck did not finish within 1 s" in said[0]
        tool = [m for m in rows if m["role"] == "tool"]
        assert tool[0]["status"] == "ok"  # it failed open
        assert "ran" in tool[0]["content"]
    finally:
        await rpc.close()
