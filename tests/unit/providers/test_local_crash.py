"""The offline model's server dies: it is named for what it was, in words, and started once
more at most; a new build is proven by a one-token answer before its first request.

The server is tests/fakes/llama_stand_in, a real process that kills itself with SIGILL (or
exits) when its mode says so, through LocalChat's `command` seam.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from backend.errors import ProviderError
from backend.providers.base import ChatRequest, TextChunk, UsageChunk, WireMessage
from backend.providers.errors import policy, told
from backend.providers.local import CHECK_FILE, LocalChat
from shared.config import ProviderConfig

STAND_IN = Path(__file__).parents[2] / "fakes" / "llama_stand_in" / "llama_cpp" / "server" / "__main__.py"
REQUEST = ChatRequest(model="stand-in", messages=[WireMessage("user", "hi")])


class Server:
    """The stand-in in one mode, and the journal of what its processes did."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
        self.journal = tmp_path / "journal"
        monkeypatch.setenv("FAKE_LLAMA_MODE", mode)
        monkeypatch.setenv("FAKE_LLAMA_JOURNAL", str(self.journal))
        model = tmp_path / "model.gguf"
        model.write_bytes(b"not read")
        self.cfg = ProviderConfig(kind="local", model="stand-in", model_path=str(model),
                                  context_window=2048)
        self.data_dir = tmp_path

    def command(self, model_path: Path, port: int, cfg: ProviderConfig) -> list[str]:
        return [sys.executable, str(STAND_IN), "--port", str(port)]

    def chat(self, start_check: bool = False) -> LocalChat:
        return LocalChat("local", self.cfg, self.data_dir, command=self.command,
                         start_check=start_check)

    def events(self) -> list[str]:
        return self.journal.read_text().split() if self.journal.exists() else []


async def ask(chat: LocalChat) -> tuple[str, ProviderError | None]:
    """The text streamed, and the error that ended the stream (None if it ended well)."""
    text: list[str] = []
    try:
        async for chunk in chat.stream(REQUEST):
            if isinstance(chunk, TextChunk):
                text.append(chunk.text)
    except ProviderError as exc:
        return "".join(text), exc
    finally:
        await chat.aclose()
    return "".join(text), None


async def test_sigill_mid_answer_is_named_after_one_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server(tmp_path, monkeypatch, "sigill_answer")
    chat = server.chat()
    text, error = await ask(chat)
    assert error is not None, "the stream must fail"
    assert text == ""
    assert server.events() == ["start", "answer", "start", "answer"], "one restart, then the error"
    assert error.kind == "crashed"
    words = told(error)
    assert "illegal instruction (SIGILL)" in words
    assert "processor feature this machine does not allow" in words
    assert "could not reach" not in words
    assert "SIGILL" in error.message
    assert "llama-server.log" in error.message
    assert not policy(error).retryable, "the turn must not start it three more times"
    assert policy(error).fallback, "another provider may still answer"
    assert chat.crashes == 2


async def test_a_server_that_died_once_is_started_again_and_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server(tmp_path, monkeypatch, "sigill_once")
    chat = server.chat()
    text, error = await ask(chat)
    assert error is None
    assert text == "hello from the stand-in", "the request was asked again of the new server"
    assert server.events() == ["start", "answer", "start", "answer"]
    assert chat.crashes == 1


async def test_a_death_after_text_was_streamed_is_not_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server(tmp_path, monkeypatch, "sigill_after_text")
    text, error = await ask(server.chat())
    assert text == "hello from ", "what was streamed reached the caller"
    assert error is not None
    assert error.kind == "crashed"
    assert "in the middle of an answer" in told(error)
    assert server.events() == ["start", "answer"], "a second answer would repeat the first"


async def test_an_exit_while_starting_is_named_with_its_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server(tmp_path, monkeypatch, "exit_start")
    _text, error = await ask(server.chat())
    assert error is not None
    assert error.kind == "crashed"
    assert "exited while starting (status 3)" in told(error)
    assert "stand-in: cannot start" in error.message, "the detail carries the log's tail"
    assert server.events() == ["start", "start"], "one restart, then the error"


async def test_the_start_check_runs_once_per_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server(tmp_path, monkeypatch, "ok")
    text, error = await ask(server.chat(start_check=True))
    assert (text, error) == ("hello from the stand-in", None)
    assert server.events() == ["start", "check", "answer"]
    assert json.loads((tmp_path / CHECK_FILE).read_text())["key"], "the pass is remembered"

    again = server.chat(start_check=True)  # the next backend start, same build
    text, error = await ask(again)
    assert error is None
    assert server.events() == ["start", "check", "answer", "start", "answer"], "no second check"


async def test_a_build_that_dies_in_the_start_check_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server(tmp_path, monkeypatch, "sigill_always")
    _text, error = await ask(server.chat(start_check=True))
    assert error is not None
    assert error.kind == "crashed"
    assert "during its first test answer with an illegal instruction (SIGILL)" in told(error)
    assert server.events() == ["start", "check", "start", "check"]
    assert not (tmp_path / CHECK_FILE).exists(), "a failed check is not remembered as passed"


async def test_usage_is_still_counted_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server(tmp_path, monkeypatch, "sigill_once")
    chat = server.chat()
    try:
        chunks = [chunk async for chunk in chat.stream(REQUEST)]
    finally:
        await chat.aclose()
    [usage] = [chunk for chunk in chunks if isinstance(chunk, UsageChunk)]
    assert usage.output_tokens == 3, "counted by the restarted server's tokenizer"


async def test_a_server_stopped_under_a_request_is_no_crash_and_not_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server(tmp_path, monkeypatch, "slow")
    chat = server.chat()
    asking = asyncio.create_task(ask(chat))
    while "answer" not in server.events():
        await asyncio.sleep(0.02)
    await chat.aclose()  # the backend shutting down
    _, error = await asking
    assert error is not None
    assert error.kind != "crashed", "a stop of ours is not the model dying"
    assert server.events() == ["start", "answer"], "and no server is started after it"
    assert chat.crashes == 0
