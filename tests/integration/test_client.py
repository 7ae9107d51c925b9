"""The shared async client and the turnkey CLI against a real backend process.

The client must survive the backend being killed mid-stream and restarted
(new port, new token, new epoch): it finds it again through backend.json,
re-subscribes from its watermark and delivers each event exactly once.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from shared import protocol as p
from shared.client import Client, Incoming
from shared.methods import EventsSince, PromptSubmit, SessionCreate
from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, config_toml


async def wait_for(pred: Any, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not pred():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(0.02)


async def test_client_reconnects_after_restart_and_replays_exactly_once(
    backend: Backend, fake_provider: FakeOpenAI
) -> None:
    release = threading.Event()
    fake_provider.script(Reply(deltas=[f"a{i} " for i in range(10)], hang_after=5, release=release))
    client = Client(backend.data_dir, name="test-client")
    seen: list[Incoming] = []
    client.handlers.append(seen.append)
    await client.connect()
    try:
        sid = (await client.call(SessionCreate())).session.session_id
        client.follow(sid)
        receipt = (await client.call(PromptSubmit(session_id=sid, request_id="r1", text="stream"))).receipt
        await wait_for(lambda: any(isinstance(e.data, p.TextDelta) for e in seen))

        backend.kill9()
        release.set()
        backend.restart()
        await wait_for(lambda: client.state == "connected" and client.server is not None
                       and client.server.epoch >= 2)

        # The unknown turn holds the queue; a new prompt resolves it and runs.
        fake_provider.script(Reply(deltas=["after ", "restart"]))
        second = (await client.call(PromptSubmit(session_id=sid, request_id="r2", text="again"))).receipt
        await wait_for(lambda: any(
            isinstance(e.data, p.MessageComplete) and e.admission_id == second.admission_id
            for e in seen
        ))
        stored = await client.call(EventsSince(session_id=sid, since_seq=0))
        mine = [e for e in seen if e.seq is not None and e.session_id == sid]
        assert [e.seq for e in mine] == [e.seq for e in stored.events], (
            "the client saw every stored event exactly once, in order"
        )
        settled = [e.data.receipt for e in mine if e.type == "admission.settled"
                   and isinstance(e.data, p.AdmissionEvent)
                   and e.data.receipt.admission_id == receipt.admission_id]
        assert settled
        assert settled[0].outcome == "interrupted"
        assert client.watermarks[sid] == stored.latest_seq
    finally:
        await client.close()


def test_cli_chat_streams_an_answer_and_lists_the_session(
    backend: Backend, fake_provider: FakeOpenAI
) -> None:
    fake_provider.default = Reply(deltas=["Hello", " from ", "the CLI"])
    env = backend.env()
    cli = [sys.executable, "-m", "desktop.cli", "--data-dir", str(backend.data_dir)]
    out = subprocess.run([*cli, "chat", "Say hello"], env=env, capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Hello from the CLI"
    listed = subprocess.run([*cli, "sessions"], env=env, capture_output=True, text=True,
                            timeout=60, check=True)
    assert "Say hello" in listed.stdout
    assert "idle" in listed.stdout
    status = subprocess.run([*cli, "backend", "status"], env=env, capture_output=True, text=True,
                            timeout=60, check=False)
    assert status.returncode == 0
    assert f"pid {backend.pid}" in status.stdout


def test_cli_renders_markdown_on_a_terminal_and_says_what_the_turn_cost(
    backend: Backend, fake_provider: FakeOpenAI
) -> None:
    """On a terminal (a pty here) the answer is rendered markdown; a pipe gets it verbatim.
    Every turn ends with its tokens and cost on stderr."""
    import pty

    answer = "# Plan\n\nUse **bold** moves and `code`:\n\n```python\nprint('hi')\n```\n"
    fake_provider.default = Reply(deltas=[answer[i:i + 7] for i in range(0, len(answer), 7)])
    cli = [sys.executable, "-m", "desktop.cli", "--data-dir", str(backend.data_dir)]
    env = dict(backend.env(), COLUMNS="80", TERM="xterm-256color")
    main, child = pty.openpty()
    try:
        proc = subprocess.Popen([*cli, "chat", "plan it"], env=env, stdout=child,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=False)
        os.close(child)
        chunks: list[bytes] = []
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(main)
    shown = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0, err
    assert "\x1b[" in shown, "styled for the terminal"
    assert "bold" in shown
    assert "**bold**" not in shown, "markdown is rendered, not shown raw"
    assert "```" not in shown
    assert "print" in shown
    assert "11 in · 7 out" in err.decode(), err
    # Piped, the same answer comes out verbatim.
    piped = subprocess.run([*cli, "chat", "plan it again"], env=backend.env(), capture_output=True,
                           text=True, timeout=60, check=False)
    assert piped.stdout.strip() == answer.strip()
    assert "$0.0" in piped.stderr


def test_cli_chat_asks_the_models_question_and_answers_it_from_stdin(
    backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(
        Reply.calls({"name": "clarify", "arguments": {
            "question": "Which language?", "choices": ["Python", "Rust"]}}),
        Reply(deltas=["Rust, then."]),
    )
    cli = [sys.executable, "-m", "desktop.cli", "--data-dir", str(backend.data_dir)]
    out = subprocess.run([*cli, "chat", "--cwd", str(tmp_path), "write a tool"], env=backend.env(),
                         input="2\n", capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert "[question] Which language?" in out.stderr
    assert "  1. Python\n  2. Rust" in out.stderr
    assert out.stdout.strip() == "Rust, then."
    [result] = [m for m in fake_provider.snapshot()[1].body["messages"] if m["role"] == "tool"]
    assert result["content"] == "The person answered with choice 2: Rust"


def test_cli_shows_tool_calls_and_asks_for_approval_on_the_terminal(
    backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep me")
    fake_provider.script(
        Reply.calls({"name": "terminal", "arguments": {"command": "rm -rf victim"}}),
        Reply(deltas=["I did not delete it."]),
    )
    cli = [sys.executable, "-m", "desktop.cli", "--data-dir", str(backend.data_dir)]
    out = subprocess.run([*cli, "chat", "--cwd", str(tmp_path), "clean up"], env=backend.env(),
                         input="d\n", capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert "[approval needed] terminal: rm -rf victim" in out.stderr
    assert "[terminal denied" in out.stderr
    assert out.stdout.strip() == "I did not delete it."
    assert (victim / "keep.txt").read_text() == "keep me"


def test_cli_starts_a_detached_backend_and_stops_it(tmp_path: Path, fake_provider: FakeOpenAI) -> None:
    data = tmp_path / "home"
    data.mkdir()
    (data / "config.toml").write_text(config_toml(fake_provider.base_url))
    fake_provider.default = Reply(deltas=["started ", "for you"])
    env = {**os.environ, "TURNKEY_HOME": str(data), "NO_PROXY": "127.0.0.1"}
    cli = [sys.executable, "-m", "desktop.cli"]
    try:
        out = subprocess.run([*cli, "chat", "hi"], env=env, capture_output=True, text=True,
                             timeout=60, check=False)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "started for you"
        info = json.loads((data / "backend.json").read_text())
        assert os.getsid(info["pid"]) == info["pid"], "the backend leads its own session"
        status = subprocess.run([*cli, "backend", "status"], env=env, capture_output=True,
                                text=True, timeout=60, check=False)
        assert status.returncode == 0, "the backend outlives the CLI that started it"
    finally:
        stop = subprocess.run([*cli, "backend", "stop"], env=env, capture_output=True, text=True,
                              timeout=60, check=False)
    assert stop.returncode == 0, stop.stderr
    assert "stopped" in stop.stdout, stop.stdout
    assert not (data / "backend.json").exists(), "a clean stop withdraws backend.json"
