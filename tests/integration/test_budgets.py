"""Turn budgets and stop conditions end to end: iteration and wall-clock limits with their
summary call, loop and empty-answer detection, and the no-progress watchdog."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAI, Reply, content_text

from .backend_proc import Backend, BackendFactory
from .wire import Json, Rpc, create_session, submit, wait_complete

LIMIT_NOTE = "[Turnkey: this turn has reached its limit"
SUMMARY = "I echoed a few things and stopped at the limit."


def terminal(command: str) -> dict[str, Any]:
    return {"name": "terminal", "arguments": {"command": command}}


def tools_then_summary(command: Callable[[int], str], text: str = "") -> Callable[[Json], Reply]:
    """A responder: tool calls (after `text`) while the request offers tools, the summary once
    it does not."""
    n = itertools.count(1)

    def respond(body: Json) -> Reply:
        if "tools" in body:
            return Reply.calls(terminal(command(next(n))), text=text)
        return Reply(deltas=[SUMMARY])

    return respond


@asynccontextmanager
async def started(
    backend_factory: BackendFactory, fake: FakeOpenAI, extra_config: str = ""
) -> AsyncIterator[tuple[Backend, Rpc]]:
    backend = backend_factory(fake.base_url, extra_config)
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        yield backend, rpc
    finally:
        if not rpc.closed.is_set():
            await rpc.close()


async def transcript(rpc: Rpc, sid: str) -> list[Json]:
    result = await rpc.call("session.messages", {"session_id": sid, "limit": 1000})
    messages: list[Json] = result["messages"]
    return messages


async def run(rpc: Rpc, sid: str, text: str, timeout: float = 30) -> Json:
    receipt = await submit(rpc, sid, text)
    done = await wait_complete(rpc, receipt["admission_id"], timeout)
    data: Json = done["data"]
    return data


# --- budgets ---------------------------------------------------------------------------------


async def test_iteration_budget_ends_with_one_tool_free_summary_call(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.responder = tools_then_summary(lambda i: f"echo step-{i}")
    async with started(backend_factory, fake_provider, "[limits]\nmax_iterations = 2\n") as (_, rpc):
        sid = await create_session(rpc, cwd=str(tmp_path))
        done = await run(rpc, sid, "keep going")
        assert done["status"] == "completed", done
        assert done["text"] == SUMMARY

        requests = fake_provider.snapshot()
        assert len(requests) == 3, [r.body.get("tools") is not None for r in requests]
        assert all("tools" in r.body for r in requests[:2])
        last = requests[-1].body
        assert "tools" not in last
        assert last["messages"][-1]["role"] == "user"
        assert content_text(last["messages"][-1]).startswith(LIMIT_NOTE)
        assert "max_iterations" in content_text(last["messages"][-1])

        rows = await transcript(rpc, sid)
        assert [m["role"] for m in rows] == ["user", "assistant", "tool", "assistant", "tool",
                                             "assistant"], rows
        assert [m["status"] for m in rows if m["role"] == "tool"] == ["ok", "ok"]
        assert rows[-1]["content"] == SUMMARY
        assert not any(LIMIT_NOTE in (m["content"] or "") for m in rows), "wire-only instruction"


async def test_wall_clock_budget_stops_a_running_tool_and_still_summarizes(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.responder = tools_then_summary(lambda i: "sleep 20")
    async with started(backend_factory, fake_provider, "[limits]\nturn_timeout_s = 1.5\n") as (
        _, rpc
    ):
        sid = await create_session(rpc, cwd=str(tmp_path))
        t0 = time.monotonic()
        done = await run(rpc, sid, "sleep for a long time")
        elapsed = time.monotonic() - t0
        assert done["status"] == "completed", done
        assert done["text"] == SUMMARY
        assert elapsed < 10, f"the turn took {elapsed:.1f} s"

        requests = fake_provider.snapshot()
        assert len(requests) == 2
        assert "tools" not in requests[-1].body
        assert content_text(requests[-1].body["messages"][-1]).startswith(LIMIT_NOTE)
        assert "turn_timeout_s" in content_text(requests[-1].body["messages"][-1])
        rows = await transcript(rpc, sid)
        [result] = [m for m in rows if m["role"] == "tool"]
        assert result["status"] in ("interrupted", "error"), result
        assert "limit" in result["content"]
        sent = [m for m in requests[-1].body["messages"] if m.get("role") == "tool"]
        assert len(sent) == 1, "the stopped call's result reaches the summary call"


async def test_summary_after_a_budget_stopped_tool_round_is_stored_in_the_transcript(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    # The tool-call message has text of its own; the summary must still replace it as the answer.
    fake_provider.responder = tools_then_summary(lambda i: "sleep 20", text="Sleeping first.")
    async with started(backend_factory, fake_provider, "[limits]\nturn_timeout_s = 1.5\n") as (
        _, rpc
    ):
        sid = await create_session(rpc, cwd=str(tmp_path))
        done = await run(rpc, sid, "sleep for a long time")
        assert done["text"] == SUMMARY
        rows = await transcript(rpc, sid)
        assert rows[-1]["role"] == "assistant", [(m["role"], m["content"]) for m in rows]
        assert rows[-1]["content"] == SUMMARY


async def test_a_failed_summary_call_still_gives_a_final_text(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    respond = tools_then_summary(lambda i: f"echo step-{i}")

    def responder(body: Json) -> Reply:
        if "tools" not in body:
            return Reply.http_error(500, "summary exploded")
        return respond(body)

    fake_provider.responder = responder
    async with started(backend_factory, fake_provider, "[limits]\nmax_iterations = 1\n") as (
        _, rpc
    ):
        sid = await create_session(rpc, cwd=str(tmp_path))
        done = await run(rpc, sid, "one step only")
        assert done["status"] == "completed", done
        assert done["text"].strip(), done
        assert "limit" in done["text"], done["text"]
        assert "max_iterations" in done["text"], done["text"]
        assert "tools" not in fake_provider.snapshot()[-1].body
        rows = await transcript(rpc, sid)
        assert rows[-1]["role"] == "assistant"
        assert rows[-1]["content"] == done["text"]


# --- loops and empty answers -----------------------------------------------------------------


async def test_identical_tool_batches_end_the_turn_with_a_summary_like_a_budget(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.responder = tools_then_summary(lambda i: "echo same")
    async with started(backend_factory, fake_provider) as (_, rpc):
        sid = await create_session(rpc, cwd=str(tmp_path))
        done = await run(rpc, sid, "loop forever")
        assert done["status"] == "completed", done
        assert done["text"] == SUMMARY, "the person gets what was done, not a blank failure"
        assert done.get("failure_reason") is None, done

        requests = fake_provider.snapshot()
        assert len(requests) == 4, "three identical batches, then the summary call"
        assert all("tools" in r.body for r in requests[:3])
        last = requests[-1].body
        assert "tools" not in last, "the summary call offers no tools"
        note = content_text(last["messages"][-1])
        assert note.startswith(LIMIT_NOTE), note
        assert "same tool calls 3 times in a row" in note, note

        rows = await transcript(rpc, sid)
        assert [m["role"] for m in rows] == ["user", "assistant", "tool", "assistant", "tool",
                                             "assistant"], rows
        assert len([m for m in rows if m.get("tool_calls")]) == 2, "the third batch never ran"
        assert [m["status"] for m in rows if m["role"] == "tool"] == ["ok", "ok"]
        assert (rows[-1]["content"], rows[-1].get("status")) == (SUMMARY, None)
        assert not any(m["role"] == "system_note" for m in rows), "not a failed turn"

        fake_provider.responder = None
        fake_provider.script(Reply(deltas=["out of the loop"]))
        nxt = await run(rpc, sid, "stop that")
        assert nxt["status"] == "completed", nxt
        assert nxt["text"] == "out of the loop"


async def test_two_empty_answers_fail_the_turn(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(Reply(deltas=[]), Reply(deltas=[]))
    async with started(backend_factory, fake_provider) as (_, rpc):
        sid = await create_session(rpc, cwd=str(tmp_path))
        done = await run(rpc, sid, "say nothing")
        assert done["status"] == "failed", done
        assert "empty answer" in done["failure_reason"], done
        assert len(fake_provider.snapshot()) == 2


async def test_one_empty_answer_is_retried(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(Reply(deltas=[]), Reply(deltas=["second time lucky"]))
    async with started(backend_factory, fake_provider) as (_, rpc):
        sid = await create_session(rpc, cwd=str(tmp_path))
        done = await run(rpc, sid, "say something eventually")
        assert done["status"] == "completed", done
        assert done["text"] == "second time lucky"
        requests = fake_provider.snapshot()
        assert len(requests) == 2
        assert requests[0].body["messages"] == requests[1].body["messages"]
        rows = await transcript(rpc, sid)
        assert [(m["role"], m["content"]) for m in rows] == [
            ("user", "say something eventually"), ("assistant", "second time lucky")]


# --- the watchdog ------------------------------------------------------------------------------


async def test_watchdog_interrupts_a_stalled_stream_and_the_next_prompt_works(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(Reply(deltas=["a", "b"], hang_after=1), Reply(deltas=["alive again"]))
    async with started(backend_factory, fake_provider, "[limits]\nstall_timeout_s = 1\n") as (
        _, rpc
    ):
        sid = await create_session(rpc, cwd=str(tmp_path))
        t0 = time.monotonic()
        done = await run(rpc, sid, "hang please")
        assert done["status"] == "interrupted", done
        assert "no progress" in done["failure_reason"], done
        assert done["text"] == "a", "what streamed is the final text"
        assert time.monotonic() - t0 < 10

        nxt = await run(rpc, sid, "and now?")
        assert nxt["status"] == "completed", nxt
        assert nxt["text"] == "alive again"


async def test_a_quiet_tool_longer_than_the_stall_timeout_is_not_taken_for_a_hang(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    """A running tool is progress: its own timeout and the batch deadline bound it, so the
    watchdog leaves a command that prints nothing for longer than stall_timeout_s alone."""
    fake_provider.script(Reply.calls(terminal("sleep 3; echo slept")),
                         Reply(deltas=["done sleeping"]))
    async with started(backend_factory, fake_provider, "[limits]\nstall_timeout_s = 1\n") as (
        _, rpc
    ):
        sid = await create_session(rpc, cwd=str(tmp_path))
        receipt = await submit(rpc, sid, "sleep a little")
        done = (await wait_complete(rpc, receipt["admission_id"], 30))["data"]
        assert done["status"] == "completed", done
        assert done["text"] == "done sleeping"
        rows = await transcript(rpc, sid)
        assert [(m["status"], "slept" in m["content"]) for m in rows if m["role"] == "tool"] == [
            ("ok", True)]
