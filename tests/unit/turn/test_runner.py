"""The turn runner's stages, in process: a real store, authority and runner, a scripted model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import pytest

from backend.providers.base import TextChunk
from backend.store import messages
from backend.tools import executor, registry
from backend.tools.base import Guard, ToolContext, ToolResult
from shared.config import ApprovalMode
from shared.protocol import Message
from tests.unit.turn.harness import Harness, Pause, calls, text


def shape(rows: list[Message]) -> list[tuple[str, str | None]]:
    """Each row's role, with its call id, note kind or status where it has one."""
    return [(m.role, m.call_id or m.note_kind or m.status) for m in rows]


def call_ids(m: Message) -> list[str]:
    """The call ids of an assistant row (stored as dicts; typed ToolCalls on the wire)."""
    return [c["call_id"] if isinstance(c, dict) else c.call_id for c in m.tool_calls or ()]


async def open_calls(h: Harness, sid: str, turn_id: str) -> list[dict[str, Any]]:
    return await h.db.read(lambda tx: messages.open_calls(tx, sid, turn_id))


class Probe:
    """A test tool: notes whether its call was stored before it ran, then waits `delay`
    seconds (or, with `hold`, until the turn stops it)."""

    name = "probe"
    description = "A test tool."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object", "additionalProperties": False,
        "properties": {"delay": {"type": "number"}, "hold": {"type": "boolean"}},
    }
    spill = False
    changes_files = False

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.stored_first: dict[str, bool] = {}
        self.finished: list[str] = []
        self.running = asyncio.Event()

    def summary(self, args: dict[str, Any]) -> str:
        return "probe"

    def guard(self, args: dict[str, Any], cwd: Path, mode: ApprovalMode,
              data_dir: Path) -> Guard | None:
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        rows = await self.h.messages(ctx.session_id)
        self.stored_first[ctx.call_id] = any(ctx.call_id in call_ids(m) for m in rows)
        self.running.set()
        if args.get("hold"):
            await asyncio.Event().wait()
        await asyncio.sleep(float(args.get("delay", 0)))
        self.finished.append(ctx.call_id)
        return ToolResult("ok", f"probed {ctx.call_id}", "probe")


@pytest.fixture
def probe(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> Probe:
    tool = Probe(harness)
    monkeypatch.setitem(registry.BUILTINS, tool.name, tool)
    return tool


async def test_a_plain_answer_completes_with_its_assistant_row_and_message_complete(
    harness: Harness,
) -> None:
    sid = await harness.session()
    harness.provider.script(text("Hello", ", world"))
    receipt = await harness.turn(sid, "hi there")
    assert (receipt.status, receipt.outcome, receipt.final_text) == \
        ("terminal", "completed", "Hello, world")
    rows = await harness.messages(sid)
    assert [(m.role, m.content) for m in rows] == [("user", "hi there"), ("assistant", "Hello, world")]
    assert rows[1].turn_id == receipt.turn_id
    assert rows[1].status is None
    [complete] = harness.events(sid, "message.complete")
    assert complete.data["status"] == "completed"
    assert complete.data["text"] == "Hello, world"
    assert complete.data["usage"]["output_tokens"] == 5
    assert "".join(e.data["text"] for e in harness.events(sid, "message.delta")) == "Hello, world"
    types = [e.type for e in await harness.stored_events(sid)]
    assert types.index("message.complete") < types.index("admission.settled")
    assert types[-1] == "admission.settled"
    [request] = harness.provider.requests
    assert (request.messages[-1].role, request.messages[-1].content) == ("user", "hi there")


async def test_a_tool_round_stores_the_calls_before_running_them_and_results_in_call_order(
    harness: Harness, probe: Probe,
) -> None:
    sid = await harness.session()
    harness.provider.script(
        calls(("c1", "probe", '{"delay": 0.3}'), ("c2", "probe", '{"delay": 0}'), say="Checking."),
        text("All probed."),
    )
    receipt = await harness.turn(sid, "probe twice")
    assert receipt.outcome == "completed", receipt
    assert probe.stored_first == {"c1": True, "c2": True}, "a call ran before its row was stored"
    assert probe.finished == ["c2", "c1"], "the second call finishes first"
    rows = await harness.messages(sid)
    assert shape(rows) == [("user", None), ("assistant", None), ("tool", "c1"), ("tool", "c2"),
                           ("assistant", None)]
    assert call_ids(rows[1]) == ["c1", "c2"]
    assert rows[1].content == "Checking."
    assert [m.content for m in rows[2:4]] == ["probed c1", "probed c2"]
    assert [e.data["call_id"] for e in harness.events(sid, "tool.complete")] == ["c1", "c2"]
    # The model's next request replays the calls and their results in call order.
    wire = harness.provider.requests[1].messages
    assert [(m.role, m.tool_call_id) for m in wire[-3:]] == \
        [("assistant", None), ("tool", "c1"), ("tool", "c2")]


async def test_an_interrupt_mid_stream_keeps_what_streamed_and_closes_the_transcript(
    harness: Harness, probe: Probe,
) -> None:
    sid = await harness.session()
    pause = Pause()
    harness.provider.script(calls(("c1", "probe", "{}")),
                            [TextChunk("Half an ans"), pause, *text("wer")])
    receipt = await harness.submit(sid, "go")
    await asyncio.wait_for(pause.reached.wait(), 10)
    assert harness.authority.interrupt(sid)
    settled = await harness.settled(receipt.admission_id)
    assert settled.outcome == "interrupted"
    assert settled.final_text == "Half an ans"
    rows = await harness.messages(sid)
    assert shape(rows) == [("user", None), ("assistant", None), ("tool", "c1"),
                           ("assistant", "interrupted"), ("system_note", "interrupted")]
    assert rows[3].content == "Half an ans"
    assert await open_calls(harness, sid, settled.turn_id or "") == []
    [complete] = harness.events(sid, "message.complete")
    assert complete.data["status"] == "interrupted"


async def test_an_interrupt_while_a_tool_runs_leaves_no_call_without_a_result(
    harness: Harness, probe: Probe,
) -> None:
    sid = await harness.session()
    harness.provider.script(calls(("c1", "probe", '{"hold": true}'), ("c2", "probe", "{}")))
    receipt = await harness.submit(sid, "go")
    await asyncio.wait_for(probe.running.wait(), 10)
    assert harness.authority.interrupt(sid)
    settled = await harness.settled(receipt.admission_id)
    assert settled.outcome == "interrupted"
    rows = await harness.messages(sid)
    assert [r.role for r in rows] == ["user", "assistant", "tool", "tool", "system_note"]
    assert (rows[2].call_id, rows[2].status) == ("c1", "interrupted")
    assert rows[3].call_id == "c2"  # ran, or skipped: the interrupt may come before it starts
    assert rows[3].status in ("ok", "skipped")
    assert await open_calls(harness, sid, settled.turn_id or "") == []
    assert len(harness.provider.requests) == 1, "no model call after the interrupt"


class Printer:
    """A test tool that prints `lines` lines through `ctx.progress`, `pause` seconds apart, then
    stays quiet for `quiet` seconds."""

    name = "printer"
    description = "A test tool."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object", "additionalProperties": False,
        "properties": {"lines": {"type": "integer"}, "pause": {"type": "number"},
                       "quiet": {"type": "number"}},
    }
    spill = False
    changes_files = False

    def summary(self, args: dict[str, Any]) -> str:
        return "printer"

    def guard(self, args: dict[str, Any], cwd: Path, mode: ApprovalMode,
              data_dir: Path) -> Guard | None:
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        for i in range(int(args.get("lines", 0))):
            ctx.progress(f"line {i}\n")
            await asyncio.sleep(float(args.get("pause", 0)))
        await asyncio.sleep(float(args.get("quiet", 0)))
        return ToolResult("ok", "printed", "printer")


async def test_progress_streams_every_chunk_and_the_last_comes_before_the_result(
    harness: Harness, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(registry.BUILTINS, "printer", Printer())
    sid = await harness.session()
    harness.provider.script(calls(("c1", "printer", '{"lines": 300, "pause": 0.002}')), text("Done."))
    receipt = await harness.turn(sid, "print")
    assert receipt.outcome == "completed", receipt
    stored = await harness.stored_events(sid)
    progress = [e for e in stored if e.type == "tool.progress"]
    assert "".join(e.data["text"] for e in progress) == "".join(f"line {i}\n" for i in range(300))
    assert 1 < len(progress) < 30, "batched, not one event per line"
    complete = next(e for e in stored if e.type == "tool.complete")
    assert max(e.seq or 0 for e in progress) < (complete.seq or 0)


async def test_a_quiet_call_gets_heartbeats_that_add_no_text(
    harness: Harness, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(registry.BUILTINS, "printer", Printer())
    monkeypatch.setattr(executor, "HEARTBEAT_S", 0.3)
    sid = await harness.session()
    harness.provider.script(calls(("c1", "printer", '{"lines": 1, "quiet": 1.0}')), text("Done."))
    receipt = await harness.turn(sid, "print, then think")
    assert receipt.outcome == "completed", receipt
    progress = harness.events(sid, "tool.progress")
    assert progress[0].data == {"call_id": "c1", "text": "line 0\n"}
    beats = progress[1:]
    assert beats, "a heartbeat while the call is quiet"
    assert all(b.data["text"] == "" and b.data["elapsed_s"] >= 0 for b in beats)
