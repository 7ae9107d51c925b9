"""LocalChat against the real bundled model: the server starts, streams, counts usage, stops."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from backend.errors import ProviderError
from backend.providers import llama_build, local
from backend.providers.base import ChatRequest, DoneChunk, TextChunk, UsageChunk, WireMessage
from backend.providers.local import (
    CHECK_FILE,
    LOCAL_DEFAULT,
    LocalChat,
    bundled_model_path,
    chatml_prompt,
    local_available,
)
from shared.config import ProviderConfig

needs_model = pytest.mark.skipif(
    not local_available(),
    reason="the offline model is not installed (scripts/bootstrap dev,local installs it)",
)


@needs_model
def test_bundled_model_path_is_an_existing_gguf() -> None:
    path = bundled_model_path()
    assert path is not None
    assert path.suffix == ".gguf"
    assert path.is_file()
    assert path.stat().st_size > 10_000_000, "a real model file, not a pointer"


@needs_model
@pytest.mark.slow
async def test_streams_one_reply_then_stops_the_server(tmp_path: Path) -> None:
    chat = LocalChat("local", LOCAL_DEFAULT, tmp_path)
    request = ChatRequest(
        model=LOCAL_DEFAULT.model,
        messages=[
            WireMessage("system", "You are a helpful assistant."),
            WireMessage("user", "Say hello in one short sentence."),
        ],
        max_tokens=32,
    )
    try:
        chunks = [chunk async for chunk in chat.stream(request)]
        pid = _server_pid(chat)
    finally:
        await chat.aclose()

    text = "".join(c.text for c in chunks if isinstance(c, TextChunk))
    assert text.strip(), f"no text streamed: {chunks}"
    [usage] = [c for c in chunks if isinstance(c, UsageChunk)]
    assert usage.input_tokens > 0
    assert 0 < usage.output_tokens <= 32
    assert any(isinstance(c, DoneChunk) for c in chunks)
    assert not _alive(pid), "aclose must stop the server"
    assert (tmp_path / "logs" / "llama-server.log").is_file()


@needs_model
@pytest.mark.slow
async def test_a_server_that_dies_at_start_names_its_log(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    cfg = ProviderConfig(kind="local", model="bad", model_path=str(bad), context_window=2048)
    chat = LocalChat("local", cfg, tmp_path)
    request = ChatRequest(model="bad", messages=[WireMessage("user", "hi")])
    with pytest.raises(ProviderError) as caught:
        async for _ in chat.stream(request):
            pass
    await chat.aclose()
    assert caught.value.kind == "crashed", "a server that exits is named, not unreachable"
    assert "exited while starting" in (caught.value.words or "")
    assert "llama-server.log" in caught.value.message


def _loaded_cpu_libraries(data_dir: Path) -> list[str]:
    log = (data_dir / "logs" / "llama-server.log").read_text()
    return [line.rsplit("/", 1)[-1] for line in log.splitlines()
            if "loaded CPU backend from" in line]


async def _hello(chat: LocalChat) -> str:
    request = ChatRequest(model=LOCAL_DEFAULT.model, max_tokens=8,
                          messages=[WireMessage("user", "Say hello.")])
    try:
        return "".join([c.text async for c in chat.stream(request) if isinstance(c, TextChunk)])
    finally:
        await chat.aclose()


@needs_model
def test_the_installed_build_is_the_portable_one() -> None:
    build = llama_build.installed_build()
    assert build is not None
    assert build.portable, f"no plain x86-64 CPU library in {build.lib_dir}: a native build"
    assert set(build.variants) >= {"x64", "sse42", "haswell", "skylakex"}


@needs_model
@pytest.mark.slow
async def test_the_server_loads_the_best_cpu_library_this_machine_allows(tmp_path: Path) -> None:
    build = llama_build.installed_build()
    assert build is not None
    best = llama_build.ranked(list(build.variants), llama_build.read_machine())[0]
    assert (await _hello(LocalChat("local", LOCAL_DEFAULT, tmp_path))).strip()
    assert _loaded_cpu_libraries(tmp_path) == [f"libggml-cpu-{best}.so"], "that one, and only it"
    remembered = json.loads((tmp_path / CHECK_FILE).read_text())
    assert remembered["variant"] == best, "the start check passed and was remembered"


@needs_model
@pytest.mark.slow
async def test_after_a_sigill_the_plain_x86_64_library_answers(tmp_path: Path) -> None:
    build = llama_build.installed_build()
    assert build is not None
    # What a SIGILL leaves behind: this build, remembered as needing plain x86-64.
    (tmp_path / CHECK_FILE).write_text(json.dumps({"build": build.fingerprint(), "variant": "x64"}))
    assert (await _hello(LocalChat("local", LOCAL_DEFAULT, tmp_path))).strip()
    assert _loaded_cpu_libraries(tmp_path) == ["libggml-cpu-x64.so"]


async def test_not_installed_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "_spec", lambda module: None)
    assert not local_available()
    assert bundled_model_path() is None
    chat = LocalChat("local", LOCAL_DEFAULT, tmp_path)
    with pytest.raises(ProviderError) as caught:
        async for _ in chat.stream(ChatRequest(model="m", messages=[WireMessage("user", "hi")])):
            pass
    await chat.aclose()
    assert caught.value.kind == "not_configured"
    assert "scripts/turnkey" in caught.value.message


def test_chatml_prompt_frames_each_message_and_opens_the_answer() -> None:
    prompt = chatml_prompt([WireMessage("system", "Be brief."), WireMessage("user", "Hi")])
    assert prompt == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def _server_pid(chat: LocalChat) -> int:
    proc = chat._proc
    assert proc is not None, "the server runs after a reply"
    return proc.pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
