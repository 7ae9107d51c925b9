"""Where to cut (the protected head, the middle to summarize, the tail kept verbatim); tool-pair repair.

A cut may only fall where it separates no tool call from its result: an
assistant entry with calls and the tool entries answering them (wherever
they are, later in the list) are one unit.  The model would otherwise see a
result without its call or a call without its result, which providers
reject.  `repair` is the safety net for transcripts that arrive already
unpaired (an orphan result, a call whose result was never stored).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from backend.compress.model import Entry
from backend.compress.tokens import Calibration, entry_tokens

TAIL_SOFT_CEILING = 1.5  # the tail may overrun its budget this far to take one more whole call group
STUB_RESULT = "[Result from earlier conversation — see the summary above]"


@dataclass(frozen=True)
class Plan:
    """A transcript split for compression; the model will see head + summary + tail.

    `previous_summary` is the newest existing summary entry: the new summary
    updates it, and it is in neither head nor tail (it is replaced).
    """

    head: tuple[Entry, ...]
    middle: tuple[Entry, ...]
    tail: tuple[Entry, ...]
    previous_summary: Entry | None = None


def plan(
    entries: Sequence[Entry], protect_first_n: int, tail_tokens: int, cal: Calibration | None = None
) -> Plan | None:
    """Split `entries` (transcript order) into head, middle and tail; None when the middle is empty.

    Summary entries are set aside first.  The head is the first
    `protect_first_n` other entries, extended forward to the end of a unit
    it would split.  The tail is taken whole units at a time walking back
    from the end while it fits `tail_tokens` (a unit is one entry, or a call
    with its results); a call group that overruns the budget is still taken
    if the tail stays within 1.5× the budget, and the walk stops there.  The
    tail then always reaches back to the latest user message (to the start
    of its unit), however large that makes it, unless that message is in
    the head.
    """
    summaries = [e for e in entries if e.role == "summary"]
    convo = [e for e in entries if e.role != "summary"]
    cuts = allowed_cuts(convo)
    head_end = min(max(protect_first_n, 0), len(convo))
    while not cuts[head_end]:
        head_end += 1
    tail_start = _tail_start(convo, cuts, head_end, tail_tokens, cal)
    if tail_start <= head_end:
        return None
    return Plan(
        head=tuple(convo[:head_end]),
        middle=tuple(convo[head_end:tail_start]),
        tail=tuple(convo[tail_start:]),
        previous_summary=summaries[-1] if summaries else None,
    )


def allowed_cuts(convo: Sequence[Entry]) -> list[bool]:
    """For each position 0..len (a cut before entry p), whether it separates no call from its result.

    A result belongs to the nearest earlier assistant entry that made a call
    with its call_id; results with no such call belong to nothing.
    """
    depth = [0] * (len(convo) + 2)  # a difference array: +1 where a blocked range starts, -1 after it
    caller: dict[str, int] = {}
    for i, entry in enumerate(convo):
        if entry.role == "assistant":
            for call in entry.calls:
                caller[call.call_id] = i
        elif entry.role == "tool" and entry.call_id is not None and entry.call_id in caller:
            depth[caller[entry.call_id] + 1] += 1  # cuts after the call, up to just before this result
            depth[i + 1] -= 1
    cuts, open_ranges = [], 0
    for p in range(len(convo) + 1):
        open_ranges += depth[p]
        cuts.append(open_ranges == 0)
    return cuts


def _tail_start(
    convo: Sequence[Entry], cuts: Sequence[bool], head_end: int, budget: int, cal: Calibration | None
) -> int:
    start, used = len(convo), 0
    while start > head_end:
        unit_start = start - 1
        while not cuts[unit_start]:
            unit_start -= 1
        cost = sum(entry_tokens(convo[k], cal) for k in range(unit_start, start))
        if used + cost > budget:
            if start - unit_start > 1 and used + cost <= budget * TAIL_SOFT_CEILING:
                start = unit_start  # a call group may overrun a little rather than be left out
            break
        used += cost
        start = unit_start
    latest_user = next((i for i in range(len(convo) - 1, -1, -1) if convo[i].role == "user"), None)
    if latest_user is not None and head_end <= latest_user < start:
        start = latest_user
        while not cuts[start]:
            start -= 1
    return start


def assemble(p: Plan, summary: Entry | None) -> list[Entry]:
    """What the model sees after compression: head, the summary, tail, with tool pairs repaired."""
    return repair([*p.head, *([summary] if summary is not None else []), *p.tail])


def repair(entries: Sequence[Entry]) -> list[Entry]:
    """The entries with every call answered exactly once and every result answering a call.

    A tool entry answers the nearest earlier call with its call_id; it is
    dropped when there is none or that call is already answered (the first
    result wins).  A call left unanswered gets a stub result (STUB_RESULT,
    negative ids from -1 down, meta `synthetic`) placed right after its
    assistant entry and the run of that entry's results that follows it.
    Order is otherwise kept; repairing a repaired list changes nothing.
    """
    answered_by: dict[int, int] = {}  # kept tool entry index -> index of the assistant it answers
    answered: set[tuple[int, int]] = set()  # (assistant index, call index)
    caller: dict[str, tuple[int, int]] = {}
    for i, entry in enumerate(entries):
        if entry.role == "assistant":
            for k, call in enumerate(entry.calls):
                caller[call.call_id] = (i, k)
        elif entry.role == "tool":
            slot = caller.get(entry.call_id) if entry.call_id is not None else None
            if slot is not None and slot not in answered:
                answered.add(slot)
                answered_by[i] = slot[0]
    out: list[Entry] = []
    open_group: int | None = None  # the assistant whose stubs are due once its run of results ends
    next_id = -1
    for i, entry in enumerate(entries):
        if open_group is not None and answered_by.get(i) != open_group:
            next_id = _add_stubs(out, entries[open_group], open_group, answered, next_id)
            open_group = None
        if entry.role == "tool" and i not in answered_by:
            continue  # an orphan or a duplicate result
        out.append(entry)
        if entry.role == "assistant" and entry.calls:
            open_group = i
    if open_group is not None:
        _add_stubs(out, entries[open_group], open_group, answered, next_id)
    return out


def _add_stubs(
    out: list[Entry], caller: Entry, index: int, answered: set[tuple[int, int]], next_id: int
) -> int:
    for k, call in enumerate(caller.calls):
        if (index, k) not in answered:
            out.append(Entry(
                next_id, "tool", STUB_RESULT, call_id=call.call_id, name=call.name, meta={"synthetic": True}
            ))
            next_id -= 1
    return next_id
