"""Properties of Transcript over generated histories: the Listener protocol a Qt model depends on,
paging that never doubles or loses a card, and live turns that end up exactly as stored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from desktop.state.session import SessionState
from desktop.state.transcript import (
    DONE_TOOL,
    AssistantItem,
    Item,
    NoteItem,
    ToolItem,
    UserItem,
    items_from_messages,
)
from shared import protocol as p
from shared.client import Incoming
from tests.unit.desktop.factories import (
    SID,
    Events,
    Rows,
    ShadowListener,
    approval,
    assistant,
    call,
    event,
    note,
    receipt,
    resume,
    tool,
    user,
)

SETTINGS = settings(max_examples=150, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

TURNS = st.sampled_from(["t1", "t2", "t3"])
CALL_IDS = st.sampled_from(["c1", "c2", "c3", "c4"])
ADMISSIONS = st.sampled_from(["a1", "a2", "a3"])
TEXT = st.text(alphabet="ab \n", max_size=6)
TOOL_STATUS = st.sampled_from(sorted(DONE_TOOL))


def full(item: Item) -> tuple[Any, ...]:
    if isinstance(item, ToolItem):
        return ("tool", item.key, item.turn_id, item.call_id, item.name, item.arguments, item.summary,
                item.status, item.output, item.diff, item.duration_ms, item.spilled_path, item.expanded)
    if isinstance(item, AssistantItem):
        return ("assistant", item.key, item.turn_id, item.text, item.streaming)
    if isinstance(item, UserItem):
        return ("user", item.key, item.turn_id, item.text)
    assert isinstance(item, NoteItem)
    return ("note", item.key, item.turn_id, item.kind, item.text)


# --- 1. the Listener protocol under any sequence of operations ---------------------------------------


@st.composite
def message_rows(draw: st.DrawFn, max_size: int = 6) -> list[p.Message]:
    """Rows of any roles in any order, ids from a shared counter: shapes right, history arbitrary."""
    out: list[p.Message] = []
    for _ in range(draw(st.integers(0, max_size))):
        mid = f"m{draw(st.integers(0, 10**6)):07d}"
        turn = draw(TURNS)
        kind = draw(st.sampled_from(["user", "assistant", "tool", "note"]))
        if kind == "user":
            out.append(user(mid, draw(TEXT), turn))
        elif kind == "assistant":
            calls = [call(c, command=draw(TEXT)) for c in draw(st.lists(CALL_IDS, max_size=2, unique=True))]
            out.append(assistant(mid, draw(TEXT), turn, calls))
        elif kind == "tool":
            out.append(tool(mid, draw(CALL_IDS), draw(TEXT), turn, status=draw(TOOL_STATUS),
                            meta={"diff": draw(TEXT), "duration_ms": draw(st.integers(0, 9))}))
        else:
            kind = draw(st.sampled_from(["interrupted", "failed", "summary"]))
            out.append(note(mid, kind, draw(TEXT), turn))
    return out


@st.composite
def live_event(draw: st.DrawFn) -> Incoming:
    turn, cid, text = draw(TURNS), draw(CALL_IDS), draw(TEXT)
    # reasoning.delta is no event of the protocol (it arrives as an UnknownEvent): it must change nothing
    kind = draw(st.sampled_from([
        "message.delta", "reasoning.delta", "tool.start", "tool.progress", "tool.complete",
        "approval.request", "approval.resolved", "turn.started", "message.complete", "usage.update",
    ]))
    data: dict[str, Any]
    if kind in ("message.delta", "reasoning.delta"):
        data = {"text": text}
    elif kind == "tool.start":
        data = {"call_id": cid, "name": "terminal", "arguments": {"command": text}, "summary": ""}
    elif kind == "tool.progress":
        data = {"call_id": cid, "text": text}
    elif kind == "tool.complete":
        data = {"call_id": cid, "name": "terminal", "status": draw(TOOL_STATUS), "summary": text,
                "duration_ms": 5, "meta": draw(st.one_of(st.none(), st.fixed_dictionaries({"diff": TEXT})))}
    elif kind.startswith("approval."):
        data = {"approval": approval("ap-" + cid, cid, turn)}
    elif kind == "turn.started":
        data = {"turn_id": turn, "admission_id": "a1", "model": "m"}
    elif kind == "message.complete":
        data = {"admission_id": "a1", "turn_id": turn, "text": text,
                "status": draw(st.sampled_from(["completed", "failed", "interrupted"])), "usage": {}}
    else:
        data = {"usage": {}}
    return event(kind, data, seq=1, turn_id=turn)


operation = st.one_of(
    st.tuples(st.just("event"), live_event()),
    st.tuples(st.just("event"), live_event()),
    st.tuples(st.just("event"), live_event()),
    st.tuples(st.just("add_user"), ADMISSIONS, TURNS, TEXT),
    st.tuples(st.just("toggle"), st.integers(0, 50)),
    st.tuples(st.just("load"), message_rows(), st.one_of(st.none(), st.builds(
        p.ActiveTurn, turn_id=TURNS, admission_id=ADMISSIONS, text=TEXT))),
    st.tuples(st.just("prepend"), message_rows(), st.booleans()),
    st.tuples(st.just("reconcile"), TURNS, message_rows()),
)


@SETTINGS
@given(st.lists(operation, max_size=40))
def test_every_mutation_is_notified_with_the_right_indices(ops: list[tuple[Any, ...]]) -> None:
    t, rec = ShadowListener.attach()
    for op in ops:
        if op[0] == "event":
            t.apply(op[1])
        elif op[0] == "add_user":
            t.add_user(op[1], op[2], op[3])
        elif op[0] == "toggle":
            if t.items:
                t.toggle(op[1] % len(t.items))
        elif op[0] == "load":
            t.load(op[1], has_more=True, active_turn=op[2])
        elif op[0] == "prepend":
            before = len(t.items)
            added = t.prepend(op[1], op[2])
            assert len(t.items) == before + added
        else:
            t.reconcile_turn(op[1], op[2])
        rec.check()  # the shadow list replayed from the notices is `items`; no change went unnoticed
        # the message being streamed into is on screen (else deltas would go nowhere visible)
        assert t._stream is None or any(it is t._stream for it in t.items)


# --- 2. paging: the pages together show what the whole history shows --------------------------------


@dataclass
class Step:
    text: str
    statuses: list[str]  # one call each


@dataclass
class TurnSpec:
    prompt: str
    steps: list[Step]
    final: str
    final_seen: int  # how much of the final text the deltas carried before message.complete
    chunk: int
    approvals: list[bool]  # per call, in order over the turn
    interrupted: bool = False  # stopped after its last step's tools (or while answering, if final_seen)


words = st.text(alphabet="abcdefgh .", min_size=1, max_size=12)


@st.composite
def turn_specs(draw: st.DrawFn) -> TurnSpec:
    steps = draw(st.lists(st.builds(Step, st.one_of(st.just(""), words),
                                    st.lists(TOOL_STATUS, min_size=1, max_size=3)), max_size=3))
    final = draw(st.one_of(st.just(""), words))
    n_calls = sum(len(s.statuses) for s in steps)
    return TurnSpec(draw(words), steps, final, draw(st.integers(0, len(final))), draw(st.integers(1, 4)),
                    draw(st.lists(st.booleans(), min_size=n_calls, max_size=n_calls)), draw(st.booleans()))


@dataclass
class Moment:
    """What `session.resume` would return right after one event: the rows stored by then, etc."""

    event: Incoming
    rows: int
    status: str
    active_turn: p.ActiveTurn | None
    approvals: list[p.Approval]
    queue: list[p.Receipt]


@dataclass
class History:
    rows: Rows
    per_turn: list[list[Incoming]]
    moments: list[Moment]

    def resume_after(self, i: int) -> p.ResumeResult:
        m = self.moments[i]
        assert m.event.seq is not None
        return resume(self.rows.rows[:m.rows], latest_seq=m.event.seq, status=m.status,
                      active_turn=m.active_turn, pending_approvals=m.approvals, queue=m.queue)


def build(specs: list[TurnSpec]) -> History:
    """The stored rows of these turns, each turn's events from admission to settlement, and when
    each row became durable (the backend's order: the prompt row with turn.started, an assistant
    row with calls before their tool.start, a result before its tool.complete, the final row
    before message.complete)."""
    rows, ev = Rows(), Events()
    per_turn: list[list[Incoming]] = []
    moments: list[Moment] = []
    state: dict[str, Any] = {"status": "idle", "active": None, "approvals": {}, "queue": []}

    def emit(evs: list[Incoming], e: Incoming) -> None:
        evs.append(e)
        active = p.ActiveTurn(**state["active"]) if state["active"] else None
        moments.append(Moment(e, len(rows.rows), state["status"], active, list(state["approvals"].values()),
                              list(state["queue"])))

    n_call = 0
    for k, spec in enumerate(specs):
        turn, aid = f"turn-{k}", f"adm-{k}"
        evs: list[Incoming] = []
        state["status"], state["queue"] = "queued", [receipt(aid, "queued", text=spec.prompt)]
        emit(evs, ev.queued(aid, spec.prompt))
        rows.user(spec.prompt, turn)
        state["status"], state["active"] = "running", {"turn_id": turn, "admission_id": aid, "text": ""}
        state["queue"] = []
        emit(evs, ev.started(turn, aid))
        i_call = 0
        for step in spec.steps:
            calls: list[tuple[p.ToolCall, str]] = []
            for status in step.statuses:
                cid = f"call-{n_call}"
                n_call += 1
                name = "patch" if status == "ok" and n_call % 2 else "terminal"
                calls.append((call(cid, name, path=f"f{n_call}.py") if name == "patch"
                              else call(cid, command=f"run {n_call}\nmore"), status))
            for i in range(0, len(step.text), spec.chunk):
                state["active"]["text"] += step.text[i:i + spec.chunk]
                emit(evs, ev.delta(turn, step.text[i:i + spec.chunk]))
            rows.assistant(step.text, turn, [c for c, _ in calls])
            state["active"]["text"] = ""
            for c, _ in calls:
                emit(evs, ev.tool_start(turn, c.call_id, c.name, **c.arguments))
            for c, status in calls:
                cid = c.call_id
                if spec.approvals[i_call]:
                    state["status"] = "waiting_approval"
                    state["approvals"][cid] = approval(f"ap-{cid}", cid, turn)
                    emit(evs, ev.approval_request(turn, f"ap-{cid}", cid))
                    state["status"] = "running"
                    del state["approvals"][cid]
                    emit(evs, ev.approval_resolved(turn, f"ap-{cid}", cid, "allowed"))
                i_call += 1
                emit(evs, ev.tool_progress(turn, cid, "working\n"))
                meta = {"diff": f"+{cid}"} if c.name == "patch" else None
                rows.tool(cid, f"output of {cid}", turn, status=status, name=c.name,
                          meta={"duration_ms": 3, **(meta or {})})
                emit(evs, ev.tool_complete(turn, cid, status, name=c.name, duration_ms=3, meta=meta))
        seen = spec.final[:spec.final_seen]
        for i in range(0, len(seen), spec.chunk):
            state["active"]["text"] += seen[i:i + spec.chunk]
            emit(evs, ev.delta(turn, seen[i:i + spec.chunk]))
        if not spec.interrupted:
            if spec.final:
                rows.assistant(spec.final, turn)
            final, status = spec.final, "completed"
        elif spec.steps and not seen:
            # Stopped in the tool round: the last message is the one with the calls, stored already.
            final, status = spec.steps[-1].text, "interrupted"
            rows.note("interrupted", "Interrupted.", turn)
        else:
            # Stopped while answering: what was streamed is kept, then a note.
            final, status = seen, "interrupted"
            if seen:
                rows.assistant(seen, turn)
            rows.note("interrupted", "Interrupted.", turn)
        state["status"], state["active"] = "idle", None
        emit(evs, ev.complete(turn, aid, final, status))
        emit(evs, ev.settled(aid))
        per_turn.append(evs)
    return History(rows, per_turn, moments)


@SETTINGS
@given(st.lists(turn_specs(), min_size=1, max_size=4), st.lists(st.integers(1, 60), max_size=6))
def test_pages_prepended_show_exactly_the_whole_history(specs: list[TurnSpec], cuts: list[int]) -> None:
    rows = build(specs).rows.rows
    bounds = sorted({c % len(rows) for c in cuts} - {0})
    pages = [rows[a:b] for a, b in zip([0, *bounds], [*bounds, len(rows)], strict=True)]
    t, rec = ShadowListener.attach()
    t.load(pages[-1], has_more=len(pages) > 1)
    for k in range(len(pages) - 2, -1, -1):
        t.prepend(pages[k], has_more=k > 0)
        rec.check()
    assert [full(it) for it in t.items] == [full(it) for it in items_from_messages(rows)]
    call_ids = [it.call_id for it in t.items if isinstance(it, ToolItem)]
    assert len(call_ids) == len(set(call_ids)), "exactly one card per call"
    assert all(it.status in DONE_TOOL for it in t.items if isinstance(it, ToolItem)), "each with its result"
    assert t.oldest_message_id == rows[0].message_id
    assert not t.has_more
    assert t.fetched_messages == len(rows)


# --- 3. live turns: the preview agrees with the stored rows, and reconciling makes them identical -------


def previews(items: list[Item]) -> list[tuple[Any, ...]]:
    """What the live view must already agree on with the stored rows (notes come only with those)."""
    return [preview(it) for it in items if not isinstance(it, NoteItem)]


def preview(item: Item) -> tuple[Any, ...]:
    if isinstance(item, ToolItem):
        return ("tool", item.call_id, item.name, item.arguments, item.status, item.diff, item.duration_ms)
    if isinstance(item, AssistantItem):
        return ("assistant", item.turn_id, item.text, item.streaming)
    if isinstance(item, UserItem):
        return ("user", item.turn_id, item.text)
    assert isinstance(item, NoteItem)
    return ("note", item.kind, item.text)


@SETTINGS
@given(st.lists(turn_specs(), min_size=1, max_size=4), st.data())
def test_live_turns_end_up_exactly_as_stored(specs: list[TurnSpec], data: st.DataObject) -> None:
    h = build(specs)
    rows, per_turn = h.rows, h.per_turn
    done: list[str] = []
    s = SessionState(SID, on_turn_done=done.append)
    _, rec = ShadowListener.attach(s.transcript)
    s.load(resume(latest_seq=0))

    # Each finished turn is reconciled some events later (the window fetches its rows
    # asynchronously), or only at the very end; meanwhile the next turn may have started.
    delays = [data.draw(st.one_of(st.none(), st.integers(0, 4)), label=f"delay {k}")
              for k in range(len(specs))]
    pending: list[tuple[int, str]] = []  # (events left before reconciling, turn)
    stream = [e for evs in per_turn for e in evs]
    for e in stream:
        s.apply(e)
        rec.check()
        for turn in done:
            delay = delays[int(turn.split("-")[1])]
            if delay is not None:
                pending.append((delay, turn))
        done.clear()
        still = []
        for left, turn in pending:
            if left == 0:
                s.transcript.reconcile_turn(turn, rows.rows)
                rec.check()
            else:
                still.append((left - 1, turn))
        pending = still
    assert s.status == "idle"
    assert s.queue == {}
    assert s.approvals == {}

    expected = items_from_messages(rows.rows)
    assert previews(s.transcript.items) == previews(expected)
    for k in range(len(specs)):
        s.transcript.reconcile_turn(f"turn-{k}", rows.rows)
        rec.check()
    assert [full(it) for it in s.transcript.items] == [full(it) for it in expected]


@SETTINGS
@given(st.lists(turn_specs(), min_size=1, max_size=3), st.data())
def test_a_window_opened_at_any_moment_ends_up_exactly_as_stored(specs: list[TurnSpec],
                                                                 data: st.DataObject) -> None:
    """Resume at any event; the shared client delivers some events before the snapshot's reply
    (some already in it, some not); the rest follow, with live copies of early ones doubled."""
    h = build(specs)
    events = [m.event for m in h.moments]
    at = data.draw(st.integers(0, len(events) - 1), label="snapshot after event")
    early_from = data.draw(st.integers(max(0, at - 5), at + 1), label="first early event")
    early_to = data.draw(st.integers(at + 1, min(len(events), at + 6)), label="end of early events")
    done: list[str] = []
    s = SessionState(SID, on_turn_done=done.append)
    _, rec = ShadowListener.attach(s.transcript)
    for e in events[early_from:early_to]:
        s.apply(e)
    assert s.transcript.items == []
    s.load(h.resume_after(at))
    rec.check()
    for e in events[early_from:]:  # the early ones again (delivered twice), then the rest
        s.apply(e)
        rec.check()
    assert s.mark == events[-1].seq
    assert s.status == "idle"
    assert s.approvals == {}
    assert s.queue == {}
    finished = {e.data.turn_id for e in events[at + 1:] if isinstance(e.data, p.MessageComplete)}
    assert sorted(done) == sorted(finished), "on_turn_done once per turn that finished after the snapshot"

    expected = items_from_messages(h.rows.rows)
    assert previews(s.transcript.items) == previews(expected)
    for k in range(len(specs)):
        s.transcript.reconcile_turn(f"turn-{k}", h.rows.rows)
        rec.check()
    assert [full(it) for it in s.transcript.items] == [full(it) for it in expected]
