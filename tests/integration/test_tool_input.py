"""Bad tool input: every bad call gets a clear result, the turn goes on to the model's next
reply, and the backend stays healthy."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory
from .wire import (
    Connect,
    Json,
    Rpc,
    assert_backend_healthy,
    create_session,
    submit,
    terminal,
    tool_messages,
    transcript,
    wait_complete,
)

Call = dict[str, Any]
AFTER = "Noted the tool result."


@dataclass
class Ran:
    """One turn with one tool call: the stored row, its events and what the model got next."""

    row: Json
    start: Json
    complete: Json
    sent: str
    call: Json
    seconds: float


async def run_one_call(
    rpc: Rpc, fake: FakeOpenAI, cwd: Path, call: Call, after: str = AFTER
) -> Ran:
    """Runs a turn whose model makes `call` then answers `after`; checks the turn goes on."""
    fake.script(Reply.calls(call), Reply(deltas=[after]))
    before = len(fake.snapshot())
    sid = await create_session(rpc, cwd=str(cwd))
    began = time.monotonic()
    receipt = await submit(rpc, sid, "go")
    done = await wait_complete(rpc, receipt["admission_id"])
    seconds = time.monotonic() - began
    assert done["data"]["status"] == "completed", done
    assert done["data"]["text"] == after
    requests = fake.snapshot()[before:]
    assert len(requests) == 2, "the model got the result and answered"
    rows = await transcript(rpc, sid)
    assert [m["role"] for m in rows] == ["user", "assistant", "tool", "assistant"], rows
    events = rpc.session_events(sid)
    start = next(e["data"] for e in events if e["type"] == "tool.start")
    complete = next(e["data"] for e in events if e["type"] == "tool.complete")
    sent = tool_messages(requests[1].body)
    assert len(sent) == 1
    assert sent[0]["tool_call_id"] == rows[2]["call_id"]
    assert rows[2]["call_id"] == start["call_id"] == complete["call_id"]
    assert complete["status"] == rows[2]["status"]
    return Ran(rows[2], start, complete, sent[0]["content"], rows[1]["tool_calls"][0], seconds)


async def test_malformed_json_arguments_are_an_error_and_the_raw_text_is_kept(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    raw = '{"command": "ls"'
    rpc = await connect()
    ran = await run_one_call(rpc, fake_provider, tmp_path, {"name": "terminal", "arguments": raw})
    assert ran.row["status"] == "error"
    assert "not valid JSON" in ran.row["content"]
    assert "not valid JSON" in ran.sent
    assert ran.call["arguments"] == {}
    assert ran.call["arguments_raw"] == raw
    assert ran.start["arguments"] == {}
    assert ran.start["arguments_raw"] == raw
    assert "exit_code" not in (ran.row.get("meta") or {}), "nothing was run"
    await assert_backend_healthy(backend, fake_provider)


@dataclass(frozen=True)
class Case:
    call: Callable[[Path], Call]
    expect: tuple[str, ...]  # in the result content, case-insensitive
    prepare: Callable[[Path], None] = lambda root: None


def _binary(root: Path) -> None:
    (root / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02" + bytes(range(256)) * 4)


def _loop(root: Path) -> None:
    (root / "loop").symlink_to(root / "pool")
    (root / "pool").symlink_to(root / "loop")


def _huge(root: Path) -> None:
    with (root / "huge.log").open("wb") as f:
        f.truncate(51 * 1024 * 1024)  # sparse: over the checkpoint limit, nothing on disk


def _twice(root: Path) -> None:
    (root / "twice.txt").write_text("x = 1\ny = 2\nx = 1\n")


CASES = {
    "unknown tool": Case(
        lambda root: {"name": "launch_rockets", "arguments": {"target": "moon"}},
        ("unknown tool 'launch_rockets'", "available tools", "terminal", "read_file", "write_file",
         "patch", "search_files", "list_dir"),
    ),
    "wrong type": Case(
        lambda root: terminal(f"touch {root / 'ran'}", timeout_s="soon"),
        ("invalid arguments for terminal", "'timeout_s' must be an integer", "got a string"),
    ),
    "command not a string": Case(
        lambda root: {"name": "terminal", "arguments": {"command": ["rm", "-rf", "x"]}},
        ("'command' must be a string", "got an array"),
    ),
    "missing required": Case(
        lambda root: {"name": "read_file", "arguments": {"offset": 3}},
        ("invalid arguments for read_file", "'path' is required"),
    ),
    "unknown argument": Case(
        lambda root: {"name": "read_file", "arguments": {"path": "a.txt", "mode": "rb"}},
        ("unknown argument 'mode'",),
    ),
    "arguments not an object": Case(
        lambda root: {"name": "terminal", "arguments": '["ls"]'},
        ("must be a json object",),
    ),
    "binary file": Case(
        lambda root: {"name": "read_file", "arguments": {"path": "blob.bin"}},
        ("binary",), _binary,
    ),
    "missing file": Case(
        lambda root: {"name": "read_file", "arguments": {"path": "no/such/file.txt"}},
        ("no such file", "no/such/file.txt"),
    ),
    "folder as file": Case(
        lambda root: {"name": "read_file", "arguments": {"path": "."}},
        ("is a folder",),
    ),
    "nul byte in path": Case(
        lambda root: {"name": "read_file", "arguments": {"path": "bad\u0000name.txt"}},
        ("nul",),
    ),
    "nul byte in write path": Case(
        lambda root: {"name": "write_file", "arguments": {"path": "bad\u0000name.txt", "content": "x"}},
        ("nul",),
    ),
    "nul byte in patch path": Case(
        lambda root: {"name": "patch", "arguments": {"path": "a\u0000", "old": "x", "new": "y"}},
        ("nul",),
    ),
    "nul byte in list_dir path": Case(
        lambda root: {"name": "list_dir", "arguments": {"path": "\u0000"}},
        ("nul",),
    ),
    "nul byte in search path": Case(
        lambda root: {"name": "search_files", "arguments": {"pattern": "x", "path": "a\u0000b"}},
        ("nul",),
    ),
    "nul byte in workdir": Case(
        lambda root: terminal(f"touch {root / 'ran'}", workdir="sub\u0000dir"),
        ("nul",),
    ),
    "nul byte in command": Case(
        lambda root: terminal("echo a\u0000b"),
        ("could not start the shell", "null byte"),
    ),
    "unknown user's home": Case(
        lambda root: {"name": "read_file", "arguments": {"path": "~no-such-user-turnkey/x.txt"}},
        ("no such file",),
    ),
    "symlink loop": Case(
        lambda root: {"name": "read_file", "arguments": {"path": "loop/x.txt"}},
        ("symbolic links",), _loop,
    ),
    "write into a symlink loop": Case(
        lambda root: {"name": "write_file", "arguments": {"path": "loop/x.txt", "content": "x"}},
        ("symbolic links",), _loop,
    ),
    "invalid regex": Case(
        lambda root: {"name": "search_files", "arguments": {"pattern": "(unclosed"}},
        ("invalid regular expression",),
    ),
    "file too large to checkpoint": Case(
        lambda root: {"name": "write_file", "arguments": {"path": "huge.log", "content": "x"}},
        ("not checkpointed", "not changed"), _huge,
    ),
    "path far too long": Case(
        lambda root: {"name": "read_file", "arguments": {"path": "a" * 5000}},
        ("name too long",),
    ),
    "ambiguous patch": Case(
        lambda root: {"name": "patch", "arguments": {"path": "twice.txt", "old": "x = 1", "new": "x = 3"}},
        ("occurs 2 times", "replace_all"), _twice,
    ),
    "patch of missing text": Case(
        lambda root: {"name": "patch", "arguments": {"path": "twice.txt", "old": "z = 9", "new": "z = 0"}},
        ("was not found",), _twice,
    ),
}


def snapshot(root: Path) -> dict[str, bytes | str]:
    return {p.name: str(p.readlink()) if p.is_symlink() else p.read_bytes() for p in root.iterdir()}


@pytest.mark.parametrize("name", list(CASES))
async def test_bad_call_gets_a_clear_error_and_the_turn_goes_on(
    name: str, backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    case = CASES[name]
    root = tmp_path / "work"
    root.mkdir()
    case.prepare(root)
    before = snapshot(root)
    rpc = await connect()
    ran = await run_one_call(rpc, fake_provider, root, case.call(root))
    assert ran.row["status"] == "error", ran.row
    content = ran.row["content"].lower()
    for words in case.expect:
        assert words.lower() in content, (words, ran.row["content"])
    assert ran.sent == ran.row["content"], "the model reads the same error"
    assert "The tool failed" not in ran.row["content"], "a tool must not crash on bad input"
    assert snapshot(root) == before, "nothing changed on disk"
    if name in ("nul byte in path", "unknown tool"):
        await assert_backend_healthy(backend, fake_provider)


async def test_a_command_that_never_exits_times_out(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    rpc = await connect()
    ran = await run_one_call(rpc, fake_provider, tmp_path,
                             terminal("echo started; sleep 1000", timeout_s=1))
    assert ran.row["status"] == "error"
    assert "timed out" in ran.row["content"]
    assert "started" in ran.row["content"]
    assert ran.complete["meta"]["timed_out"] is True
    assert ran.seconds < 30, f"the turn took {ran.seconds:.1f} s"


async def test_hundreds_of_megabytes_of_output_give_a_bounded_result(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    rpc = await connect()
    ran = await run_one_call(rpc, fake_provider, tmp_path,
                             terminal("head -c 300000000 /dev/zero | tr '\\0' 'a'; echo; echo END"))
    assert ran.row["status"] == "ok", ran.row["content"][:500]
    content = ran.row["content"]
    assert len(content) < 100_000, len(content)
    assert "characters omitted" in content
    assert content.rstrip().endswith("END")
    assert content.count("a") > 10_000
    assert ran.complete.get("spilled_path") is None, "bounded below limits.spill_chars"
    assert len(ran.sent) < 100_000
    assert ran.seconds < 45


def spilled_text(path: str) -> str:
    return Path(path).read_text()


async def test_output_over_spill_chars_is_spilled_and_read_file_never_is(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    backend = backend_factory(fake_provider.base_url, "[limits]\nspill_chars = 2000\n")
    work = tmp_path / "work"
    work.mkdir()
    long_file = work / "long.txt"
    long_file.write_text("".join(f"line {i:05d} " + "r" * 40 + "\n" for i in range(300)))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        ran = await run_one_call(rpc, fake_provider, work,
                                 terminal("head -c 10000 /dev/zero | tr '\\0' 'b'"))
        assert ran.row["status"] == "ok"
        spilled = ran.complete.get("spilled_path")
        assert spilled, ran.complete
        assert Path(spilled).is_relative_to(backend.data_dir / "spill")
        assert spilled_text(spilled).count("b") == 10_000, "the whole output is in the file"
        assert (ran.row.get("meta") or {}).get("spilled_path") == spilled
        assert ran.sent == ran.row["content"]
        assert len(ran.sent) < 10_000, "the model got a preview"
        assert "b" * 1000 in ran.sent
        assert spilled in ran.sent
        assert "truncated" in ran.sent.lower()

        read = await run_one_call(rpc, fake_provider, work,
                                  {"name": "read_file", "arguments": {"path": "long.txt"}})
        assert read.row["status"] == "ok"
        assert read.complete.get("spilled_path") is None
        assert "spilled_path" not in (read.row.get("meta") or {})
        assert len(read.sent) > 10_000
        assert "line 00000" in read.sent
        assert "line 00299" in read.sent
        assert len(list((backend.data_dir / "spill").rglob("*.txt"))) == 1
        await assert_backend_healthy(backend, fake_provider)
    finally:
        await rpc.close()
