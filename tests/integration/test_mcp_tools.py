"""MCP servers through the real backend: real servers (the SDK's, a published one), a scripted model.

Each test configures `[mcp.servers.NAME]` in the backend's config.toml, has
the fake model call the server's tools as `mcp__NAME__TOOL`, and checks what
the transcript, the events and the model's next request say.  The servers
are real processes speaking MCP over stdio or streamable HTTP.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory
from .wire import Json, Rpc, create_session, submit, tool_messages, transcript, wait_complete

SERVER = Path(__file__).resolve().parents[1] / "fakes" / "mcp_server.py"


def stdio_server(name: str = "fake", marks: Path | None = None, **extra: object) -> str:
    """A `[mcp.servers.NAME]` table running the test server over stdio."""
    lines = [f"[mcp.servers.{name}]", f"command = {json.dumps([sys.executable, str(SERVER)])}"]
    if marks is not None:
        lines.append(f'env = {{ FAKE_MCP_MARKS = "{marks}" }}')
    lines += [f"{key} = {json.dumps(value)}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def call(name: str, **arguments: object) -> Json:
    return {"name": name, "arguments": arguments}


def results(rows: list[Json]) -> list[Json]:
    return [m for m in rows if m["role"] == "tool"]


def offered(body: Json) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def mcp_events(rpc: Rpc, name: str) -> list[str]:
    return [e["data"]["server"]["state"] for e in rpc.events
            if e["type"] == "mcp.server" and e["data"]["server"]["name"] == name]


async def run_turn(rpc: Rpc, sid: str, text: str = "go") -> Json:
    receipt = await submit(rpc, sid, text)
    done = await wait_complete(rpc, receipt["admission_id"], timeout=60)
    data: Json = done["data"]
    return data


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    folder = tmp_path / "work"  # the session's folder: the one a sandboxed server may write
    folder.mkdir()
    return folder


def backend_with(factory: BackendFactory, fake: FakeOpenAI, extra: str,
                 env: dict[str, str] | None = None) -> Backend:
    return factory(fake.base_url, extra_config='[approvals]\nmode = "smart"\n' + extra, extra_env=env)


async def test_a_stdio_servers_tools_are_offered_called_and_stored_like_any_tool(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path
) -> None:
    backend = backend_with(backend_factory, fake_provider, stdio_server(marks=marks, approval="trusted"))
    fake_provider.script(
        Reply.calls(call("mcp__fake__echo", text="hello from MCP"), call("mcp__fake__add", a=2, b=40)),
        Reply(deltas=["Both ran."]),
    )
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        caps = rpc.init_result["capabilities"]
        assert [(s["name"], s["state"]) for s in caps["mcp"]] == [("fake", "stopped")], \
            "configured, and started only on first need"
        assert "mcp.server" in caps["events"]
        sid = await create_session(rpc, cwd=str(marks))
        done = await run_turn(rpc, sid)
        assert done["status"] == "completed", done
        first = fake_provider.snapshot()[0].body
        names = offered(first)
        assert names[:6] == ["terminal", "read_file", "write_file", "patch", "search_files", "list_dir"]
        assert {"mcp__fake__echo", "mcp__fake__add", "mcp__fake__grow"} <= set(names[6:])
        assert names[6:] == sorted(names[6:]), "a stable order keeps the prompt's prefix cached"
        echo = next(t["function"] for t in first["tools"] if t["function"]["name"] == "mcp__fake__echo")
        assert echo["parameters"]["required"] == ["text"]
        assert echo["description"].startswith("[MCP server fake] Returns the text")

        rows = await transcript(rpc, sid)
        got = results(rows)
        assert [(m["tool_name"], m["status"]) for m in got] == [("mcp__fake__echo", "ok"),
                                                                ("mcp__fake__add", "ok")]
        assert got[0]["content"] == "hello from MCP"
        assert json.loads(got[1]["content"]) == {"sum": 42}
        assert got[1]["meta"]["structured"] == {"sum": 42}
        assert (got[0]["meta"]["mcp_server"], got[0]["meta"]["mcp_tool"]) == ("fake", "echo")
        sent = tool_messages(fake_provider.snapshot()[1].body)
        assert sent[0]["content"] == "hello from MCP"
        assert json.loads(sent[1]["content"]) == {"sum": 42}
        starts = [e for e in rpc.session_events(sid) if e["type"] == "tool.start"]
        assert starts[0]["data"]["summary"].startswith("fake · echo")

        listed = (await rpc.call("mcp.list", {}))["servers"]
        assert (listed[0]["state"], listed[0]["sandboxed"]) == ("ready", True)
        assert {t["name"] for t in listed[0]["tools"]} >= {"echo", "add", "slow", "crash"}
        assert "ready" in mcp_events(rpc, "fake")
    finally:
        await rpc.close()


async def test_a_call_that_does_not_fit_the_schema_is_refused_before_the_server_sees_it(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path
) -> None:
    backend = backend_with(backend_factory, fake_provider, stdio_server(marks=marks, approval="trusted"))
    fake_provider.script(
        Reply.calls(call("mcp__fake__add", a="two", b=40), call("mcp__fake__slow", seconds=0.1, tag=None),
                    call("mcp__fake__nope")),
        Reply(deltas=["Fixed."]),
    )
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(marks))
        assert (await run_turn(rpc, sid))["status"] == "completed"
        got = results(await transcript(rpc, sid))
        assert [m["status"] for m in got] == ["error", "ok", "error"]
        assert "argument 'a': 'two' is not of type 'integer'" in got[0]["content"]
        assert got[1]["content"] == "slept 0.1", "an optional argument sent as null counts as absent"
        assert "Unknown tool 'mcp__fake__nope'" in got[2]["content"]
        assert (marks / "began").read_text().split() == ["slow"], "only the valid call reached it"
    finally:
        await rpc.close()


async def test_an_mcp_tool_asks_for_approval_by_default_and_always_allows_that_tool_only(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path
) -> None:
    backend = backend_with(backend_factory, fake_provider, stdio_server(marks=marks))
    fake_provider.script(
        Reply.calls(call("mcp__fake__echo", text="one")), Reply(deltas=["ok"]),
        Reply.calls(call("mcp__fake__echo", text="two"), call("mcp__fake__add", a=1, b=1)),
        Reply(deltas=["ok"]),
    )
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(marks))
        receipt = await submit(rpc, sid, "echo")
        asked = await rpc.wait_event(lambda e: e["type"] == "approval.request" and "seq" in e)
        approval = asked["data"]["approval"]
        assert approval["tool"] == "mcp__fake__echo"
        assert "the MCP server 'fake'" in approval["reason"]
        await rpc.call("approval.respond", {"approval_id": approval["approval_id"], "decision": "always"})
        assert (await wait_complete(rpc, receipt["admission_id"]))["data"]["status"] == "completed"

        receipt = await submit(rpc, sid, "again")
        second = await rpc.wait_event(lambda e: e["type"] == "approval.request" and "seq" in e
                                      and e["data"]["approval"]["approval_id"] != approval["approval_id"])
        assert second["data"]["approval"]["tool"] == "mcp__fake__add", "the rule covers echo only"
        await rpc.call("approval.respond", {"approval_id": second["data"]["approval"]["approval_id"],
                                            "decision": "deny"})
        assert (await wait_complete(rpc, receipt["admission_id"]))["data"]["status"] == "completed"
        got = results(await transcript(rpc, sid))
        assert [m["status"] for m in got] == ["ok", "ok", "denied"]
        assert got[1]["meta"]["decided_by"] == "rule"
    finally:
        await rpc.close()
