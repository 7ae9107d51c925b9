"""The offline model's server dies under a real backend: the turn fails with the worded
reason after one restart at most, and nothing says the server could not be reached.

The server is tests/fakes/llama_stand_in, put first on the backend's PYTHONPATH, so the
backend starts it exactly as it starts llama.cpp's (`python -m llama_cpp.server ...`): it
passes the one-token start check, then kills itself with SIGILL in the middle of an answer.
"""

from __future__ import annotations

from pathlib import Path

from .backend_proc import Backend, BackendFactory
from .wire import Json, Rpc, create_session, run_turn, transcript

STAND_IN = Path(__file__).parents[1] / "fakes" / "llama_stand_in"

LOCAL_CONFIG = """\
default_provider = "local"

[providers.local]
kind = "local"
model = "stand-in"
model_path = "{model}"
context_window = 2048
max_output_tokens = 64
"""


def start(backend_factory: BackendFactory, tmp_path: Path, mode: str) -> tuple[Backend, Path]:
    journal = tmp_path / "journal"
    model = tmp_path / "model.gguf"
    model.write_bytes(b"not read by the stand-in")
    backend = backend_factory("http://127.0.0.1:9/unused", start=False, extra_env={
        "PYTHONPATH": str(STAND_IN), "FAKE_LLAMA_MODE": mode, "FAKE_LLAMA_JOURNAL": str(journal),
    })
    backend.write_config(LOCAL_CONFIG.format(model=model))
    backend.start()
    return backend, journal


async def turn(backend: Backend, text: str) -> tuple[Rpc, str, Json]:
    rpc = await Rpc.open(backend.port, backend.token, initialize=True)
    sid = await create_session(rpc)
    _, complete = await run_turn(rpc, sid, text, timeout=60)
    return rpc, sid, complete


async def test_sigill_mid_answer_fails_the_turn_in_words_after_one_restart(
    backend_factory: BackendFactory, tmp_path: Path,
) -> None:
    backend, journal = start(backend_factory, tmp_path, "sigill_answer")
    rpc, sid, done = await turn(backend, "Say hello.")
    try:
        data = done["data"]
        assert data["status"] == "failed"
        reason = data["failure_reason"]
        assert reason.startswith("The offline model stopped in the middle of an answer with an "
                                 "illegal instruction (SIGILL): it was built for a processor "
                                 "feature this machine does not allow."), reason
        assert "could not reach" not in reason
        assert "SIGILL" in data["failure_detail"]
        # The start check passed, the answer died, one restart (the check is not repeated for
        # the build it passed), its answer died too: then the error, and no retries.
        assert journal.read_text().split() == ["start", "check", "answer", "start", "answer"]
        kinds = [e["type"] for e in rpc.events if e.get("session_id") == sid]
        assert "provider.retry" not in kinds, "a crash is not retried by the turn"
        [note] = [m for m in await transcript(rpc, sid)
                  if m["role"] == "system_note" and m["note_kind"] == "failed"]
        assert note["content"] == reason, "said once, in the transcript"
        assert note["meta"]["kind"] == "crashed"
        log = (backend.data_dir / "logs" / "llama-server.log").read_text()
        assert log.count("=====") == 2, "two server starts in its log"
    finally:
        await rpc.close()


async def test_a_server_that_dies_once_answers_after_its_restart(
    backend_factory: BackendFactory, tmp_path: Path,
) -> None:
    backend, journal = start(backend_factory, tmp_path, "sigill_once")
    rpc, _, done = await turn(backend, "Say hello.")
    try:
        assert done["data"]["status"] == "completed", done["data"]
        assert done["data"]["text"] == "hello from the stand-in"
        assert journal.read_text().split() == ["start", "check", "answer", "start", "answer"]
    finally:
        await rpc.close()
