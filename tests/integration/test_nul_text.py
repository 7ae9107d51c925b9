"""Text holding NUL: a prompt and a tool's output that contain one are kept on both stores.

SQLite keeps the character; PostgreSQL's text cannot hold it, so that store keeps U+FFFD in
its place (store/pg.py).  Either way the turn completes and nothing is lost around it.
"""

from __future__ import annotations

from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend
from .wire import Connect, create_session, run_turn, terminal, tool_messages, transcript


async def test_a_prompt_and_a_tool_output_with_nul_complete_their_turn(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    nul = "\x00" if backend.store is None else "\ufffd"
    fake_provider.script(Reply.calls(terminal("printf 'left\\0right'")), Reply(deltas=["seen"]))
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    _, complete = await run_turn(rpc, sid, "before\x00after")
    assert complete["data"]["status"] == "completed", complete["data"]
    rows = await transcript(rpc, sid)
    assert rows[0]["content"] == f"before{nul}after"
    [tool] = [r for r in rows if r["role"] == "tool"]
    assert f"left{nul}right" in tool["content"]
    second = fake_provider.snapshot()[1].body
    assert any(f"left{nul}right" in str(m.get("content")) for m in tool_messages(second))
