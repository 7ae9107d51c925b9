"""A real backend speaking to an Anthropic-format fake: streamed text and a tool-use round trip."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.anthropic_server import FakeAnthropic, Reply

from .backend_proc import Backend, BackendFactory
from .wire import Rpc, create_session, submit, transcript, wait_complete

KEY = "sk-ant-test-0123456789abcdef"


@pytest.fixture
def anthropic() -> Iterator[FakeAnthropic]:
    fake = FakeAnthropic()
    yield fake
    fake.close()
    assert fake.errors == [], f"requests the real API would refuse: {fake.errors}"


def start(backend_factory: BackendFactory, fake: FakeAnthropic, extra: str = "") -> Backend:
    backend = backend_factory("http://unused", start=False)
    backend.write_config(
        'default_provider = "claude"\n[providers.claude]\nkind = "anthropic"\n'
        f'base_url = "http://127.0.0.1:{fake.port}/v1"\nmodel = "claude-test"\n'
        'api_key_env = "TURNKEY_TEST_ANTHROPIC_KEY"\n'
        "input_usd_per_mtok = 3.0\noutput_usd_per_mtok = 15.0\n" + extra
    )
    backend.extra_env["TURNKEY_TEST_ANTHROPIC_KEY"] = KEY
    backend.start()
    return backend


async def test_streamed_text_and_usage(
    backend_factory: BackendFactory, anthropic: FakeAnthropic
) -> None:
    anthropic.script(Reply(deltas=["Hello ", "from ", "Claude."], input_tokens=120,
                           output_tokens=30, cache_read_tokens=100))
    backend = start(backend_factory, anthropic)
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc)
        receipt = await submit(rpc, sid, "hi")
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "completed", done
        assert done["data"]["text"] == "Hello from Claude."
        deltas = "".join(e["data"]["text"] for e in rpc.session_events(sid)
                         if e["type"] == "message.delta")
        assert deltas == "Hello from Claude."
        usage = done["data"]["usage"]
        assert (usage["input_tokens"], usage["output_tokens"], usage["cached_tokens"]) == (
            220, 30, 100)
        [request] = anthropic.snapshot()
        assert request.headers["x-api-key"] == KEY
        assert request.body["system"], "the system prompt goes top-level"
        assert all(m["role"] != "system" for m in request.body["messages"])
    finally:
        await rpc.close()


async def test_a_tool_use_round_trip(
    backend_factory: BackendFactory, anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    anthropic.script(
        Reply.tools({"id": "toolu_01", "name": "read_file", "input": {"path": "notes.txt"}},
                    text="Let me look."),
        Reply(deltas=["The file says 42."]),
    )
    backend = start(backend_factory, anthropic)
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(tmp_path))
        receipt = await submit(rpc, sid, "what does notes.txt say?")
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "completed", done
        assert done["data"]["text"] == "The file says 42."
        rows = await transcript(rpc, sid)
        assert [m["role"] for m in rows] == ["user", "assistant", "tool", "assistant"]
        assert rows[1]["tool_calls"][0]["call_id"] == "toolu_01"
        assert rows[2]["status"] == "ok"
        assert "42" in rows[2]["content"]

        second = anthropic.snapshot()[1].body
        assistant, results = second["messages"][-2], second["messages"][-1]
        assert assistant["role"] == "assistant"
        uses = [b for b in assistant["content"] if b["type"] == "tool_use"]
        assert uses == [{"type": "tool_use", "id": "toolu_01", "name": "read_file",
                         "input": {"path": "notes.txt"}}]
        assert results["role"] == "user"
        [result] = [b for b in results["content"] if b["type"] == "tool_result"]
        assert result["tool_use_id"] == "toolu_01"
        text = result["content"] if isinstance(result["content"], str) else "".join(
            part.get("text", "") for part in result["content"])
        assert "the answer is 42" in text
        assert [t["name"] for t in anthropic.snapshot()[0].body["tools"]][:2] == [
            "terminal", "read_file"]
    finally:
        await rpc.close()


async def test_an_mcp_tools_image_reaches_the_model_as_an_image(
    backend_factory: BackendFactory, anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """Anthropic takes images in a tool result: an MCP server's picture is sent as one (the
    OpenAI-compatible wire sends the text naming the saved file, test_mcp_tools.py)."""
    server = json.dumps([sys.executable, str(Path(__file__).parents[1] / "fakes" / "mcp_server.py")])
    anthropic.script(
        Reply.tools({"id": "toolu_01", "name": "mcp__fake__picture", "input": {}}),
        Reply(deltas=["A single pixel."]),
    )
    backend = start(backend_factory, anthropic,
                    f'[mcp.servers.fake]\ncommand = {server}\napproval = "trusted"\n')
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(tmp_path))
        receipt = await submit(rpc, sid, "show me")
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "completed", done
        (row,) = [m for m in await transcript(rpc, sid) if m["role"] == "tool"]
        saved = row["meta"]["attachments"][0]
        assert saved["mime_type"] == "image/png"
        [result] = [b for b in anthropic.snapshot()[1].body["messages"][-1]["content"]
                    if b["type"] == "tool_result"]
        text, image = result["content"]
        assert text == {"type": "text", "text": row["content"]}
        assert image["type"] == "image"
        assert image["source"]["media_type"] == "image/png"
        on_disk = await asyncio.to_thread(Path(saved["path"]).read_bytes)
        assert base64.b64decode(image["source"]["data"]) == on_disk
    finally:
        await rpc.close()
