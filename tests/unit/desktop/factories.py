"""Builders of wire values (shared/protocol/) and a listener that checks the Listener protocol.

Messages, receipts, approvals, sessions and events are built as the JSON the backend
sends, then decoded the way the shared client decodes it (`msgspec.convert`,
`Incoming.decode`), so the view-models under test see exactly what they would see live.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

import msgspec

from desktop.state.transcript import Item, Transcript
from shared import protocol as p
from shared.client import Incoming

SID = "sess-1"
T0 = "2026-11-29T18:00:00.000Z"


def usage(inp: int = 0, out: int = 0, cached: int = 0, cost_usd: float = 0.0,
          estimated: bool = False) -> p.Usage:
    return p.Usage(input_tokens=inp, output_tokens=out, cached_tokens=cached, cost_usd=cost_usd,
                   estimated=estimated)


# --- messages ---------------------------------------------------------------------------


def call(call_id: str, name: str = "terminal", **arguments: Any) -> p.ToolCall:
    return p.ToolCall(call_id=call_id, name=name, arguments=arguments)


def message(message_id: str, role: str, content: str = "", *, turn_id: str | None = None,
            session_id: str = SID, **extra: Any) -> p.Message:
    row: dict[str, Any] = {
        "message_id": message_id, "session_id": session_id, "role": role, "content": content,
        "compacted": False, "created_at": T0, "turn_id": turn_id,
    }
    row.update(extra)
    return msgspec.convert(row, p.Message, from_attributes=True)


def user(message_id: str, text: str, turn_id: str | None = None, **extra: Any) -> p.Message:
    return message(message_id, "user", text, turn_id=turn_id, **extra)


def assistant(message_id: str, text: str = "", turn_id: str | None = None,
              calls: list[p.ToolCall] | None = None, **extra: Any) -> p.Message:
    if calls:
        extra["tool_calls"] = calls
    return message(message_id, "assistant", text, turn_id=turn_id, **extra)


def tool(message_id: str, call_id: str, content: str = "", turn_id: str | None = None, *,
         status: str | None = "ok", name: str = "terminal", meta: dict[str, Any] | None = None,
         **extra: Any) -> p.Message:
    return message(message_id, "tool", content, turn_id=turn_id, call_id=call_id, tool_name=name,
                   status=status, meta=meta, **extra)


def note(message_id: str, kind: str, text: str, turn_id: str | None = None,
         session_id: str = SID) -> p.Message:
    return message(message_id, "system_note", text, turn_id=turn_id, note_kind=kind,
                   session_id=session_id)


class Rows:
    """Transcript rows with message ids that sort in transcript order (zero-padded counters)."""

    def __init__(self, session_id: str = SID) -> None:
        self.session_id = session_id
        self.rows: list[p.Message] = []
        self._n = itertools.count(1)

    def _id(self) -> str:
        return f"m{next(self._n):06d}"

    def user(self, text: str, turn_id: str | None = None) -> p.Message:
        return self._add(user(self._id(), text, turn_id, session_id=self.session_id))

    def assistant(self, text: str = "", turn_id: str | None = None,
                  calls: list[p.ToolCall] | None = None) -> p.Message:
        return self._add(assistant(self._id(), text, turn_id, calls, session_id=self.session_id))

    def tool(self, call_id: str, content: str = "", turn_id: str | None = None, **kw: Any) -> p.Message:
        return self._add(tool(self._id(), call_id, content, turn_id, session_id=self.session_id, **kw))

    def note(self, kind: str, text: str, turn_id: str | None = None) -> p.Message:
        return self._add(note(self._id(), kind, text, turn_id, session_id=self.session_id))

    def _add(self, row: p.Message) -> p.Message:
        self.rows.append(row)
        return row


# --- receipts, approvals, sessions --------------------------------------------------------


def receipt(admission_id: str, status: str = "queued", *, text: str | None = None,
            session_id: str = SID, **extra: Any) -> p.Receipt:
    r: dict[str, Any] = {
        "admission_id": admission_id, "session_id": session_id, "request_id": f"req-{admission_id}",
        "status": status, "duplicate": False, "created_at": T0,
    }
    if text is not None:
        r["text"] = text
    r.update(extra)
    return msgspec.convert(r, p.Receipt)


def approval(approval_id: str, call_id: str, turn_id: str = "t1", status: str = "pending", *,
             tool_name: str = "terminal", session_id: str = SID, **extra: Any) -> p.Approval:
    return msgspec.convert({
        "approval_id": approval_id, "session_id": session_id, "turn_id": turn_id, "call_id": call_id,
        "tool": tool_name, "summary": "rm -rf build", "reason": "recursive delete", "status": status,
        "created_at": T0, "expires_at": "2026-11-29T18:05:00.000Z", **extra,
    }, p.Approval)


def question(question_id: str, call_id: str, turn_id: str = "t1", status: str = "pending", *,
             choices: list[str] | None = None, allow_other: bool = True,
             text: str = "Which colour?", session_id: str = SID, **extra: Any) -> p.Question:
    return msgspec.convert({
        "question_id": question_id, "session_id": session_id, "turn_id": turn_id,
        "call_id": call_id, "question": text, "choices": choices or [],
        "allow_other": allow_other, "status": status, "created_at": T0,
        "expires_at": "2026-11-29T18:10:00.000Z", **extra,
    }, p.Question)


def session(session_id: str = SID, *, updated_at: str = T0, status: str = "idle", title: str = "A session",
            cost_usd: float = 0.0, **extra: Any) -> p.Session:
    return msgspec.convert({
        "session_id": session_id, "title": title, "cwd": "/home/me/project", "model": "some-model",
        "created_at": T0, "updated_at": updated_at, "status": status, "message_count": 0,
        "usage": usage(cost_usd=cost_usd), **extra,
    }, p.Session)


def resume(messages: list[p.Message] | None = None, *, latest_seq: int = 0, status: str = "idle",
           session_info: p.Session | None = None, has_more: bool = False,
           queue: list[p.Receipt] | None = None, pending_approvals: list[p.Approval] | None = None,
           active_turn: p.ActiveTurn | None = None,
           pending_questions: list[p.Question] | None = None) -> p.ResumeResult:
    """A `session.resume` result (without since_seq: no events, not truncated)."""
    result: dict[str, Any] = {
        "session": session_info or session(status=status),
        "status": status,
        "messages": [msgspec.to_builtins(m) for m in messages or []],
        "has_more": has_more,
        "latest_seq": latest_seq,
        "events": [],
        "truncated": False,
        "pending_approvals": pending_approvals or [],
        "queue": queue or [],
        "pending_questions": pending_questions or [],
    }
    if active_turn is not None:
        result["active_turn"] = active_turn
    return msgspec.convert(msgspec.to_builtins(result), p.ResumeResult)


# --- events -----------------------------------------------------------------------------


def event(type_: str, data: dict[str, Any] | None = None, *, seq: int | None = None,
          turn_id: str | None = None, admission_id: str | None = None,
          session_id: str = SID) -> Incoming:
    """One event notification's params; `seq` None makes it an unsequenced broadcast copy."""
    ev: dict[str, Any] = {"session_id": session_id, "type": type_, "ts": T0,
                          "data": msgspec.to_builtins(data or {})}
    if seq is not None:
        ev["seq"] = seq
    if turn_id is not None:
        ev["turn_id"] = turn_id
    if admission_id is not None:
        ev["admission_id"] = admission_id
    return Incoming.decode(ev)


class Events:
    """Events of one session with consecutive seqs, shaped per shared/PROTOCOL.md, "Events"."""

    def __init__(self, session_id: str = SID, seq: int = 0) -> None:
        self.session_id = session_id
        self.seq = seq

    def _next(self, type_: str, data: dict[str, Any], turn: str | None = None,
              admission: str | None = None) -> Incoming:
        self.seq += 1
        return event(type_, data, seq=self.seq, turn_id=turn, admission_id=admission,
                     session_id=self.session_id)

    def queued(self, admission_id: str, text: str | None = None, status: str = "queued") -> Incoming:
        return self._next("admission.queued",
                          {"receipt": receipt(admission_id, status, text=text, session_id=self.session_id)},
                          admission=admission_id)

    def settled(self, admission_id: str, outcome: str = "completed") -> Incoming:
        r = receipt(admission_id, "terminal", outcome=outcome, session_id=self.session_id)
        return self._next("admission.settled", {"receipt": r}, admission=admission_id)

    def started(self, turn: str, admission_id: str) -> Incoming:
        return self._next("turn.started", {"turn_id": turn, "admission_id": admission_id, "model": "m"},
                          turn, admission_id)

    def delta(self, turn: str, text: str) -> Incoming:
        return self._next("message.delta", {"text": text}, turn)

    def tool_start(self, turn: str, call_id: str, name: str = "terminal",
                   summary: str = "", **arguments: Any) -> Incoming:
        return self._next("tool.start", {"call_id": call_id, "name": name, "arguments": arguments,
                                         "summary": summary}, turn)

    def tool_progress(self, turn: str, call_id: str, text: str) -> Incoming:
        return self._next("tool.progress", {"call_id": call_id, "text": text}, turn)

    def tool_complete(self, turn: str, call_id: str, status: str = "ok", *, name: str = "terminal",
                      summary: str = "", duration_ms: int = 12, spilled_path: str | None = None,
                      meta: dict[str, Any] | None = None, output: str | None = None,
                      output_truncated: bool = False) -> Incoming:
        data: dict[str, Any] = {"call_id": call_id, "name": name, "status": status, "summary": summary,
                                "duration_ms": duration_ms}
        if output is not None:
            data["output"] = output
            if output_truncated:
                data["output_truncated"] = True
        if spilled_path is not None:
            data["spilled_path"] = spilled_path
        if meta is not None:
            data["meta"] = meta
        return self._next("tool.complete", data, turn)

    def approval_request(self, turn: str, approval_id: str, call_id: str) -> Incoming:
        a = approval(approval_id, call_id, turn, session_id=self.session_id)
        return self._next("approval.request", {"approval": a}, turn)

    def approval_resolved(self, turn: str, approval_id: str, call_id: str,
                          status: str = "allowed") -> Incoming:
        a = approval(approval_id, call_id, turn, status, session_id=self.session_id, decision="once")
        return self._next("approval.resolved", {"approval": a}, turn)

    def question_request(self, turn: str, q: p.Question) -> Incoming:
        return self._next("clarify.request", {"question": q}, turn)

    def question_resolved(self, turn: str, q: p.Question) -> Incoming:
        return self._next("clarify.resolved", {"question": q}, turn)

    def complete(self, turn: str, admission_id: str, text: str, status: str = "completed",
                 failure_reason: str | None = None,
                 turn_usage: p.Usage | None = None) -> Incoming:
        data: dict[str, Any] = {"admission_id": admission_id, "turn_id": turn, "text": text, "status": status,
                                "usage": turn_usage or usage(10, 5, 0, 0.001)}
        if failure_reason is not None:
            data["failure_reason"] = failure_reason
        return self._next("message.complete", data, turn, admission_id)

    def other(self, type_: str, data: dict[str, Any], turn: str | None = None) -> Incoming:
        return self._next(type_, data, turn)


# --- a listener that checks the Listener protocol -----------------------------------------------


def snapshot(item: Item) -> tuple[Any, ...]:
    """Everything a view could show of an item, version included."""
    return tuple((f.name, repr(getattr(item, f.name))) for f in fields(item))


class ShadowListener:
    """Replays each notified mutation on a shadow list, as a Qt model would, and checks it.

    - before_* / after_* come in pairs, never nested, with `changed` only outside a pair;
    - at before_*, the transcript still has its old rows (the shadow); the indices are in range;
    - after each pair, the shadow with the notified rows inserted/removed equals `items`;
    - `changed(i)` names the row whose item changed.
    `check()` then says whether every item still looks as it did when last notified: an item
    changed without `changed` (or without a version bump) would be painted stale.
    """

    def __init__(self) -> None:
        self.transcript: Transcript | None = None
        self.shadow: list[Item] = []
        self.seen: dict[int, tuple[Any, ...]] = {}
        self.ops: list[tuple[Any, ...]] = []
        self._open: tuple[str, int, int] | None = None

    @classmethod
    def attach(cls, transcript: Transcript | None = None) -> tuple[Transcript, ShadowListener]:
        rec = cls()
        t = transcript or Transcript()
        t.listener = rec
        rec.transcript = t
        rec.shadow = list(t.items)
        rec.seen = {id(it): snapshot(it) for it in t.items}
        return t, rec

    @property
    def items(self) -> list[Item]:
        assert self.transcript is not None
        return self.transcript.items

    def before_insert(self, index: int, count: int) -> None:
        assert self._open is None, f"before_insert inside {self._open}"
        assert count > 0
        assert 0 <= index <= len(self.shadow)
        assert _same(self.items, self.shadow), "items changed before before_insert"
        self._open = ("insert", index, count)
        self.ops.append(("insert", index, count))

    def after_insert(self) -> None:
        assert self._open is not None, "after_insert without before_insert"
        assert self._open[0] == "insert", f"after_insert closing {self._open}"
        _, index, count = self._open
        self._open = None
        new = self.items[index:index + count]
        assert len(new) == count
        self.shadow[index:index] = new
        assert _same(self.items, self.shadow), "the insert notified differs from the mutation"
        for it in new:
            self.seen[id(it)] = snapshot(it)

    def before_remove(self, index: int, count: int) -> None:
        assert self._open is None, f"before_remove inside {self._open}"
        assert count > 0
        assert index >= 0
        assert index + count <= len(self.shadow)
        assert _same(self.items, self.shadow), "items changed before before_remove"
        self._open = ("remove", index, count)
        self.ops.append(("remove", index, count))

    def after_remove(self) -> None:
        assert self._open is not None, "after_remove without before_remove"
        assert self._open[0] == "remove", f"after_remove closing {self._open}"
        _, index, count = self._open
        self._open = None
        gone = self.shadow[index:index + count]
        del self.shadow[index:index + count]
        assert _same(self.items, self.shadow), "the removal notified differs from the mutation"
        for it in gone:
            if not any(it is kept for kept in self.shadow):
                self.seen.pop(id(it), None)

    def changed(self, index: int) -> None:
        assert self._open is None, f"changed inside {self._open}"
        assert 0 <= index < len(self.shadow)
        assert self.shadow[index] is self.items[index]
        self.ops.append(("changed", index))
        self.seen[id(self.items[index])] = snapshot(self.items[index])

    def check(self) -> None:
        """No pair left open; the shadow is the list; nothing changed without notice."""
        assert self._open is None
        assert _same(self.items, self.shadow)
        for i, it in enumerate(self.items):
            now = snapshot(it)
            assert self.seen.get(id(it)) == now, f"row {i} ({it.key}) changed without a notice"

    def changes(self) -> list[int]:
        return [op[1] for op in self.ops if op[0] == "changed"]

    def clear(self) -> None:
        self.ops.clear()


def _same(a: Iterable[Item], b: Iterable[Item]) -> bool:
    a, b = list(a), list(b)
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
