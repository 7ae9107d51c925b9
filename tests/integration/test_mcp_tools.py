"""MCP servers through the real backend: real servers (the SDK's, a published one), a scripted model.

Each test configures `[mcp.servers.NAME]` in the backend's config.toml, has
the fake model call the server's tools as `mcp__NAME__TOOL`, and checks what
the transcript, the events and the model's next request say.  The servers
are real processes speaking MCP over stdio or streamable HTTP.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.procs import running, wait_gone

from .backend_proc import Backend, BackendFactory
from .wire import Json, Rpc, create_session, is_event, submit, tool_messages, transcript, wait_complete

SERVER = Path(__file__).resolve().parents[1] / "fakes" / "mcp_server.py"


def stdio_server(name: str = "fake", marks: Path | None = None, tag: str = "", **extra: object) -> str:
    """A `[mcp.servers.NAME]` table running the test server over stdio.  With `tag` (which
    names its processes, for a test that looks for them) it outlives its stdin closing: only
    a signal ends it, as with a server that ignores EOF."""
    argv = [sys.executable, str(SERVER), *(["--tag", tag, "--linger"] if tag else [])]
    lines = [f"[mcp.servers.{name}]", f"command = {json.dumps(argv)}"]
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


@asynccontextmanager
async def session_on(backend: Backend, cwd: Path) -> AsyncIterator[tuple[Rpc, str]]:
    """A connection to `backend` and a new session in `cwd`."""
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        yield rpc, await create_session(rpc, cwd=str(cwd))
    finally:
        await rpc.close()


async def appears(path: Path, timeout: float) -> None:
    """Waits until the server leaves the mark `path` (or the time is up: the caller asserts)."""
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(path.exists) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


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
        assert names[:10] == ["terminal", "read_file", "write_file", "patch", "search_files",
                              "list_dir", "memory", "skill", "skill_manage", "delegate"]
        assert {"mcp__fake__echo", "mcp__fake__add", "mcp__fake__grow"} <= set(names[10:])
        assert names[10:] == sorted(names[10:]), "a stable order keeps the prompt's prefix cached"
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
    async with session_on(backend, marks) as (rpc, sid):
        assert (await run_turn(rpc, sid))["status"] == "completed"
        got = results(await transcript(rpc, sid))
        assert [m["status"] for m in got] == ["error", "ok", "error"]
        assert "argument 'a': 'two' is not of type 'integer'" in got[0]["content"]
        assert got[1]["content"] == "slept 0.1", "an optional argument sent as null counts as absent"
        assert "Unknown tool 'mcp__fake__nope'" in got[2]["content"]
        assert (marks / "began").read_text().split() == ["slow"], "only the valid call reached it"


async def test_an_mcp_tool_asks_for_approval_by_default_and_always_allows_that_tool_only(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path
) -> None:
    backend = backend_with(backend_factory, fake_provider, stdio_server(marks=marks))
    fake_provider.script(
        Reply.calls(call("mcp__fake__echo", text="one")), Reply(deltas=["ok"]),
        Reply.calls(call("mcp__fake__echo", text="two"), call("mcp__fake__add", a=1, b=1)),
        Reply(deltas=["ok"]),
    )
    async with session_on(backend, marks) as (rpc, sid):
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


async def test_a_server_that_crashes_mid_call_gives_an_error_result_and_is_started_again(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path
) -> None:
    backend = backend_with(backend_factory, fake_provider, stdio_server(marks=marks, approval="trusted"))
    fake_provider.script(
        Reply.calls(call("mcp__fake__crash")),
        Reply.calls(call("mcp__fake__echo", text="back again")),
        Reply(deltas=["Recovered."]),
    )
    async with session_on(backend, marks) as (rpc, sid):
        done = await run_turn(rpc, sid)
        assert done["status"] == "completed", "a dead server fails its call, never the turn"
        got = results(await transcript(rpc, sid))
        assert [m["status"] for m in got] == ["error", "ok"]
        assert "the MCP server 'fake' stopped while the call ran" in got[0]["content"]
        assert "crashing on purpose" in got[0]["content"], "its last words on stderr are kept"
        assert "being started again" in got[0]["content"]
        assert got[1]["content"] == "back again"
        assert len((marks / "starts").read_text().split()) == 2, "started again after the crash"
        states = mcp_events(rpc, "fake")
        assert states[states.index("failed"):] [:3] == ["failed", "starting", "ready"], states
        listed = (await rpc.call("mcp.list", {"name": "fake"}))["servers"][0]
        assert (listed["state"], listed["restarts"]) == ("ready", 1)


async def test_a_hung_call_times_out_into_an_error_and_the_server_is_told_to_cancel(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path
) -> None:
    backend = backend_with(backend_factory, fake_provider,
                           stdio_server(marks=marks, approval="trusted", timeout_s=1.5))
    fake_provider.script(
        Reply.calls(call("mcp__fake__slow", seconds=600, tag="hung")),
        Reply.calls(call("mcp__fake__echo", text="still serving")),
        Reply(deltas=["Done."]),
    )
    async with session_on(backend, marks) as (rpc, sid):
        assert (await run_turn(rpc, sid))["status"] == "completed"
        got = results(await transcript(rpc, sid))
        assert [m["status"] for m in got] == ["error", "ok"]
        assert "did not answer within 1.5 s" in got[0]["content"]
        assert got[1]["content"] == "still serving", "a hung call does not take the server down"
        await appears(marks / "cancelled-hung", 10)
        assert (marks / "cancelled-hung").exists(), "notifications/cancelled reached the server"
        assert not (marks / "finished-hung").exists()


async def test_an_interrupt_cancels_a_running_mcp_call(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path
) -> None:
    backend = backend_with(backend_factory, fake_provider, stdio_server(marks=marks, approval="trusted"))
    fake_provider.script(Reply.calls(call("mcp__fake__slow", seconds=600, tag="stopped")))
    async with session_on(backend, marks) as (rpc, sid):
        receipt = await submit(rpc, sid, "wait")
        await rpc.wait_event(is_event("tool.start", receipt["admission_id"]))
        await appears(marks / "began", 20)
        assert (await rpc.call("turn.interrupt", {"session_id": sid}))["interrupted"] is True
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "interrupted"
        got = results(await transcript(rpc, sid))
        assert [m["status"] for m in got] == ["interrupted"]
        await appears(marks / "cancelled-stopped", 10)
        assert (marks / "cancelled-stopped").exists(), "the interrupt reached the server as a cancel"


async def test_a_changed_tool_list_is_offered_from_the_next_request_on(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path
) -> None:
    backend = backend_with(backend_factory, fake_provider, stdio_server(marks=marks, approval="trusted"))
    fake_provider.script(
        Reply.calls(call("mcp__fake__grow")),
        Reply.calls(call("mcp__fake__double", x=21)),
        Reply(deltas=["42."]),
    )
    async with session_on(backend, marks) as (rpc, sid):
        assert (await run_turn(rpc, sid))["status"] == "completed"
        bodies = [r.body for r in fake_provider.snapshot()]
        assert "mcp__fake__double" not in offered(bodies[0])
        assert "mcp__fake__double" in offered(bodies[1]), "list_changed re-listed it between requests"
        got = results(await transcript(rpc, sid))
        assert [(m["status"], m["content"]) for m in got][1] == ("ok", "42")
        def listed_double(e: Json) -> bool:
            return e["type"] == "mcp.server" and "double" in [
                t["name"] for t in e["data"]["server"].get("tools") or []]

        await rpc.wait_until(lambda: any(listed_double(e) for e in rpc.events))


async def test_a_sandboxed_server_cannot_see_the_data_folder_or_keys_and_writes_only_its_folder(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path, tmp_path: Path
) -> None:
    backend = backend_factory(
        fake_provider.base_url, start=False,
        extra_config='[approvals]\nmode = "smart"\n' + stdio_server(marks=marks, approval="trusted"),
        extra_env={"TK_TEST_PROVIDER_KEY": "sk-never-seen", "TURNKEY_SECRET_THING": "x"})
    config = backend.data_dir / "config.toml"
    config.write_text(config.read_text() + 'api_key_env = "TK_TEST_PROVIDER_KEY"\n')
    backend.start()
    outside = Path.home() / f".turnkey-escaped-by-mcp-{os.getpid()}"  # a real folder, not /tmp's
    fake_provider.script(
        Reply.calls(call("mcp__fake__whoami"),
                    call("mcp__fake__read_path", path=str(backend.data_dir / "backend.json")),
                    call("mcp__fake__write_path", path=str(marks / "made.txt"), text="inside"),
                    call("mcp__fake__write_path", path=str(outside), text="escaped")),
        Reply(deltas=["Looked."]),
    )
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        # As for commands (test_sandbox_turns.py): scripts/bootstrap installs bubblewrap, so a
        # sandbox that is off here is a failure, not a reason to skip.
        assert rpc.init_result["capabilities"]["sandbox"]["active"], rpc.init_result["capabilities"]
        sid = await create_session(rpc, cwd=str(marks))
        assert (await run_turn(rpc, sid))["status"] == "completed"
        who, token, inside, escape = [m["content"] for m in results(await transcript(rpc, sid))]
        seen = json.loads(who)
        assert seen["cwd"] == str(marks)
        assert "TK_TEST_PROVIDER_KEY" not in seen["env"]
        assert not [name for name in seen["env"] if name.startswith("TURNKEY")]
        assert "cannot read" in token
        assert backend.token not in token
        assert inside == "written"
        assert (marks / "made.txt").read_text() == "inside"
        assert "cannot write: OSError: Read-only file system" in escape
        assert not outside.exists()
    finally:
        outside.unlink(missing_ok=True)
        await rpc.close()


async def test_a_server_that_cannot_start_says_why_and_the_turn_goes_on_without_it(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path
) -> None:
    failing = stdio_server().replace("[mcp.servers.fake]", "[mcp.servers.fake]\n"
                                     'env = { FAKE_MCP_FAIL_START = "fatal: no API key given" }')
    backend = backend_with(backend_factory, fake_provider,
                           failing + '[mcp.servers.missing]\ncommand = ["/nonexistent/mcp-server"]\n')
    fake_provider.script(Reply(deltas=["Answered anyway."]))
    async with session_on(backend, marks) as (rpc, sid):
        done = await run_turn(rpc, sid)
        assert (done["status"], done["text"]) == ("completed", "Answered anyway.")
        assert not [n for n in offered(fake_provider.snapshot()[0].body) if n.startswith("mcp__")]
        listed = {s["name"]: s for s in (await rpc.call("mcp.list", {}))["servers"]}
        assert listed["fake"]["state"] == "failed"
        assert "fatal: no API key given" in listed["fake"]["error"]
        assert listed["missing"]["state"] == "failed"
        assert "the program '/nonexistent/mcp-server' was not found" in listed["missing"]["error"]
        # Tested (in the home folder) while the session folder's instance keeps restarting
        # with backoff: each start quotes its own stderr, never the other's (fresh-ci once
        # read the other start's empty log section when both shared one file).
        for _ in range(8):
            tested = await rpc.call("mcp.test", {"name": "fake"})
            assert tested["ok"] is False
            assert "fatal: no API key given" in tested["error"]
            await asyncio.sleep(0.15)


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """The test server over streamable HTTP, wanting `Authorization: Bearer http-secret-0123`."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "http-server.log").open("wb")
    proc = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)], stdout=log,
                            stderr=subprocess.STDOUT,
                            env={**os.environ, "FAKE_MCP_HTTP_TOKEN": "http-secret-0123"})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((tmp_path / "http-server.log").read_text()) from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


async def test_a_streamable_http_server_gets_its_key_from_the_keyring_never_from_the_config(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path, http_server: str
) -> None:
    backend = backend_with(backend_factory, fake_provider, f"""[mcp.servers.web]
url = "{http_server}"
header_secrets = {{ Authorization = "web-key" }}
approval = "trusted"
""")
    fake_provider.script(Reply(deltas=["No tools yet."]),
                         Reply.calls(call("mcp__web__echo", text="over http")), Reply(deltas=["Done."]))
    async with session_on(backend, marks) as (rpc, sid):
        assert (await run_turn(rpc, sid))["status"] == "completed"
        status = (await rpc.call("mcp.list", {"name": "web"}))["servers"][0]
        assert status["state"] == "failed"
        assert "the secret 'web-key' (for the header Authorization) is not stored" in status["error"]
        assert "turnkey secret set web-key" in status["error"]

        await rpc.call("secret.set", {"name": "web-key", "value": "Bearer http-secret-0123"})
        tested = await rpc.call("mcp.test", {"name": "web"})
        assert tested["ok"] is True, tested
        assert tested["server"]["transport"] == "http"
        assert "echo" in [t["name"] for t in tested["server"]["tools"]]
        assert (await run_turn(rpc, sid))["status"] == "completed"
        got = results(await transcript(rpc, sid))
        assert [(m["status"], m["content"]) for m in got] == [("ok", "over http")]

        wrong = await rpc.call("mcp.test", {"name": "web", "server_config": {
            "header_secrets": None, "headers": {"Authorization": "Bearer wrong"}}})
        assert wrong["ok"] is False
        assert "HTTP 401 Unauthorized" in wrong["error"], wrong
        assert (await rpc.call("mcp.list", {"name": "web"}))["servers"][0]["state"] == "ready", \
            "testing a form leaves the saved server as it was"
    backend.terminate()
    for path in [*backend.data_dir.rglob("*.log"), backend.data_dir / "state.db", backend.stderr_path,
                 backend.data_dir / "config.toml"]:
        if path.is_file():
            assert b"http-secret-0123" not in path.read_bytes(), f"the key leaked into {path}"
    assert b"http-secret-0123" not in backend.store_dump(), "the key leaked into the store"


async def test_the_published_time_server_from_pypi_answers_through_a_turn(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path
) -> None:
    backend = backend_with(backend_factory, fake_provider, f"""[mcp.servers.time]
command = {json.dumps([sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"])}
approval = "trusted"
""")
    fake_provider.script(
        Reply.calls(call("mcp__time__get_current_time", timezone="Asia/Tokyo"),
                    call("mcp__time__convert_time", source_timezone="UTC", time="12:00",
                         target_timezone="Europe/Paris")),
        Reply(deltas=["It is late in Tokyo."]),
    )
    async with session_on(backend, marks) as (rpc, sid):
        assert (await run_turn(rpc, sid))["status"] == "completed"
        now, converted = results(await transcript(rpc, sid))
        assert now["status"] == "ok", now
        assert json.loads(now["content"])["timezone"] == "Asia/Tokyo"
        assert converted["status"] == "ok", converted
        target = json.loads(converted["content"])["target"]
        assert target["timezone"] == "Europe/Paris"
        assert target["datetime"][11:16] in ("13:00", "14:00")  # CET or CEST
        first = fake_provider.snapshot()[0].body
        assert {"mcp__time__get_current_time", "mcp__time__convert_time"} <= set(offered(first))


async def test_kill9_during_an_mcp_call_leaves_it_unknown_the_server_gone_and_the_next_turn_works(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path
) -> None:
    tag = f"kill9-{os.getpid()}-{time.monotonic_ns()}"
    backend = backend_with(backend_factory, fake_provider,
                           stdio_server(marks=marks, tag=tag, approval="trusted"))
    fake_provider.script(Reply.calls(call("mcp__fake__slow", seconds=600, tag="killed")))
    rpc = await Rpc.open(backend.port, backend.token)
    sid = await create_session(rpc, cwd=str(marks))
    receipt = await submit(rpc, sid, "wait for it")
    started = await rpc.wait_event(is_event("tool.start", receipt["admission_id"]))
    await appears(marks / "began", 20)
    assert running(tag), "the server runs the call"
    backend.kill9()
    await rpc.wait_closed()
    assert await wait_gone(tag) == [], "the server dies with the backend"
    assert not (marks / "finished-killed").exists()

    backend.start()
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        got = results(await transcript(rpc, sid))
        assert [(m["call_id"], m["status"]) for m in got] == [(started["data"]["call_id"], "unknown")]
        fake_provider.script(Reply.calls(call("mcp__fake__echo", text="alive")), Reply(deltas=["Fine."]))
        assert (await run_turn(rpc, sid, "again"))["status"] == "completed"
        got = results(await transcript(rpc, sid))
        assert [(m["status"], m["content"]) for m in got][1:] == [("ok", "alive")]
        assert len((marks / "starts").read_text().split()) == 2, "the server was started again"
        sent = tool_messages(fake_provider.snapshot()[-2].body)
        assert "unknown" in sent[0]["content"]
    finally:
        await rpc.close()


async def test_a_server_that_never_answers_holds_the_first_turn_only(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path
) -> None:
    """A start is waited for once (up to startup_timeout_s); while its supervisor retries,
    turns go on without it instead of waiting for every attempt."""
    backend = backend_with(backend_factory, fake_provider, """[mcp.servers.mute]
command = ["sleep", "600"]
startup_timeout_s = 6
""")
    fake_provider.script(Reply(deltas=["first"]), Reply(deltas=["second"]))
    async with session_on(backend, marks) as (rpc, sid):
        assert (await run_turn(rpc, sid))["text"] == "first"
        assert mcp_events(rpc, "mute") == ["starting", "failed"], "the first turn waited for it"
        failed = (await rpc.call("mcp.list", {"name": "mute"}))["servers"][0]["error"]
        assert "did not finish starting within 6 s" in failed
        assert (await run_turn(rpc, sid))["text"] == "second"
        assert mcp_events(rpc, "mute").count("failed") == 1, \
            "the second turn did not wait for the retry (still starting: 1 s backoff + 6 s)"


async def test_a_large_result_is_spilled_like_any_tool_output(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path
) -> None:
    backend = backend_with(backend_factory, fake_provider,
                           "[limits]\nspill_chars = 2000\n" + stdio_server(marks=marks, approval="trusted"))
    big = "".join(f"line {i:05d}\n" for i in range(3000))
    fake_provider.script(Reply.calls(call("mcp__fake__echo", text=big)), Reply(deltas=["Read it."]))
    async with session_on(backend, marks) as (rpc, sid):
        assert (await run_turn(rpc, sid))["status"] == "completed"
        (row,) = results(await transcript(rpc, sid))
        assert await asyncio.to_thread(Path(row["meta"]["spilled_path"]).read_text) == big
        assert row["content"].startswith("line 00000\n")
        assert "[Output truncated: 33,000 characters in total." in row["content"]
        assert len(tool_messages(fake_provider.snapshot()[1].body)[0]["content"]) < 5000


async def test_an_unsandboxed_server_still_dies_with_the_backend(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path
) -> None:
    tag = f"nosandbox-{os.getpid()}-{time.monotonic_ns()}"
    backend = backend_with(backend_factory, fake_provider,
                           stdio_server(marks=marks, tag=tag, approval="trusted", sandbox=False))
    fake_provider.script(Reply.calls(call("mcp__fake__whoami")), Reply(deltas=["Known."]))
    async with session_on(backend, marks) as (rpc, sid):
        assert (await run_turn(rpc, sid))["status"] == "completed"
        assert "sandboxed" not in (await rpc.call("mcp.list", {"name": "fake"}))["servers"][0]
        assert running(tag)
    backend.kill9()
    assert await wait_gone(tag) == [], "setpriv --pdeathsig: no server outlives a killed backend"


async def test_an_image_is_saved_and_named_for_a_provider_that_takes_no_images(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path
) -> None:
    backend = backend_with(backend_factory, fake_provider, stdio_server(marks=marks, approval="trusted"))
    fake_provider.script(Reply.calls(call("mcp__fake__picture")), Reply(deltas=["A pixel."]))
    async with session_on(backend, marks) as (rpc, sid):
        assert (await run_turn(rpc, sid))["status"] == "completed"
        (row,) = results(await transcript(rpc, sid))
        (saved,) = row["meta"]["attachments"]
        assert row["content"] == f"[image image/png, {saved['bytes']} bytes, saved to {saved['path']}]"
        assert saved["path"].startswith(str(backend.data_dir / "spill"))
        head = await asyncio.to_thread(Path(saved["path"]).read_bytes)
        assert head.startswith(b"\x89PNG")
        (sent,) = tool_messages(fake_provider.snapshot()[1].body)
        assert sent["content"] == row["content"], "the OpenAI wire sends the text naming the file"


async def test_a_servers_progress_notifications_are_the_calls_live_output(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, marks: Path
) -> None:
    backend = backend_with(backend_factory, fake_provider, stdio_server(marks=marks, approval="trusted"))
    fake_provider.script(Reply.calls(call("mcp__fake__steps", n=3)), Reply(deltas=["Done."]))
    async with session_on(backend, marks) as (rpc, sid):
        assert (await run_turn(rpc, sid))["status"] == "completed"
        live = "".join(e["data"]["text"] for e in rpc.session_events(sid) if e["type"] == "tool.progress")
        assert live == "[1/3] step 1\n[2/3] step 2\n[3/3] step 3\n"
        (row,) = results(await transcript(rpc, sid))
        assert row["content"] == "3 steps", "the result is the server's answer, not its progress"
