"""One real turn on the offline default model: a backend configured with kind "local" only."""

from __future__ import annotations

import pytest

from backend.providers.local import local_available

from .backend_proc import BackendFactory
from .wire import Rpc, create_session, deltas_text, run_turn

if not local_available():
    pytest.skip(
        "the offline model is not installed (scripts/bootstrap dev,local installs it)",
        allow_module_level=True,
    )

pytestmark = pytest.mark.slow

LOCAL_CONFIG = """\
default_provider = "local"

[providers.local]
kind = "local"
model = "SmolLM2-135M-Instruct"
context_window = 2048
max_output_tokens = 64
"""


async def test_one_real_turn_on_the_bundled_model(backend_factory: BackendFactory) -> None:
    backend = backend_factory("http://127.0.0.1:9/unused", start=False)
    backend.write_config(LOCAL_CONFIG)  # no OpenAI provider at all
    backend.start()
    rpc = await Rpc.open(backend.port, backend.token, initialize=True)
    try:
        sid = await create_session(rpc)
        # The server starts on the first call: model load included, well under the timeout.
        _, complete = await run_turn(rpc, sid, "Say hello in one short sentence.", timeout=180)
    finally:
        await rpc.close()

    data = complete["data"]
    assert data["status"] == "completed", f"turn did not complete: {data}"
    assert data["text"].strip(), "the model's answer is empty"
    streamed = deltas_text(rpc.events, complete["turn_id"])
    assert streamed.strip(), "no message.delta text was streamed"
    assert streamed == data["text"], "joined deltas != complete.text"
    assert data["usage"]["input_tokens"] > 0, f"usage not counted: {data['usage']}"
    assert data["usage"]["output_tokens"] > 0, f"usage not counted: {data['usage']}"
    assert (backend.data_dir / "logs" / "llama-server.log").is_file()


async def test_with_nothing_configured_the_bundled_model_answers(
    backend_factory: BackendFactory,
) -> None:
    backend = backend_factory("http://127.0.0.1:9/unused", start=False)
    if backend.on_postgres:
        backend.write_config("")  # the store and nothing else: no provider configured
    else:
        (backend.data_dir / "config.toml").unlink()  # a fresh install: no config at all
    backend.start()
    rpc = await Rpc.open(backend.port, backend.token, initialize=True)
    try:
        provider = rpc.init_result["capabilities"]["provider"]
        assert provider["offline_default"] is True, "front-ends can say the model is the tiny one"
        assert provider["model"] == "SmolLM2-135M-Instruct"
        sid = await create_session(rpc)
        session = (await rpc.call("session.get", {"session_id": sid}))["session"]
        assert session["model"] == "SmolLM2-135M-Instruct"
        _, complete = await run_turn(rpc, sid, "Say hello.", timeout=180)
        usage = await rpc.call("session.usage", {"session_id": sid})
    finally:
        await rpc.close()
    data = complete["data"]
    assert data["status"] == "completed", f"turn did not complete: {data}"
    assert data["text"].strip()
    [row] = usage["rows"]
    assert (row["provider"], row["model"]) == ("local", "SmolLM2-135M-Instruct")
    assert row["cost_usd"] == 0.0
