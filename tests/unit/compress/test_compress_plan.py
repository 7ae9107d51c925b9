"""Boundaries (head, middle, tail) and tool-pair repair: by example, and as properties of random ones."""

from __future__ import annotations

import json
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace as struct_replace

from backend.compress.model import Call, Entry
from backend.compress.plan import STUB_RESULT, TAIL_SOFT_CEILING, Plan, allowed_cuts, assemble, plan, repair
from backend.compress.tokens import MESSAGE_OVERHEAD_TOKENS, entry_tokens


def text(tokens: int) -> str:
    """Content that makes an entry cost exactly `tokens` (overhead included)."""
    return "x" * (4 * (tokens - MESSAGE_OVERHEAD_TOKENS))


def user(id_: int, tokens: int = 10) -> Entry:
    return Entry(id_, "user", text(tokens))


def said(id_: int, tokens: int = 10) -> Entry:
    return Entry(id_, "assistant", text(tokens))


def calls(id_: int, *call_ids: str, tokens: int = 10) -> Entry:
    return Entry(id_, "assistant", text(tokens), calls=tuple(Call(c, "terminal", "{}") for c in call_ids))


def result(id_: int, call_id: str, tokens: int = 10) -> Entry:
    return Entry(id_, "tool", text(tokens), call_id=call_id, name="terminal")


def ids(entries: Sequence[Entry]) -> list[int]:
    return [e.id for e in entries]


# --- boundaries --------------------------------------------------------------------------------


def test_head_middle_tail_by_budget() -> None:
    entries = [user(i) if i % 2 else said(i) for i in range(1, 11)]  # 10 entries of 10 tokens
    p = plan(entries, 3, 30)
    assert p is not None
    assert ids(p.head) == [1, 2, 3]
    assert ids(p.tail) == [8, 9, 10]
    assert ids(p.middle) == [4, 5, 6, 7]
    assert p.previous_summary is None


def test_nothing_to_summarize_is_none() -> None:
    entries = [user(1), said(2), user(3), said(4)]
    assert plan(entries, 3, 1000) is None  # the tail reaches the head
    assert plan(entries, 10, 0) is None  # all head
    assert plan([], 3, 1000) is None


def test_the_head_is_extended_so_a_call_keeps_its_results() -> None:
    entries = [user(1), said(2), calls(3, "a", "b"), result(4, "a"), result(5, "b"),
               *[said(i) for i in range(6, 12)]]
    p = plan(entries, 3, 20)
    assert p is not None
    assert ids(p.head) == [1, 2, 3, 4, 5]


def test_the_tail_never_starts_inside_a_call_group() -> None:
    entries = [user(1), *[said(i) for i in range(2, 8)], calls(8, "a", tokens=10), result(9, "a", tokens=10),
               result(10, "a2", tokens=10), user(11, 10), said(12, 10)]
    # a budget of 36 would cut between the call (8) and its result (9): the group is taken whole or
    # not at all.  The call entry costs 13 (its call's name and arguments count), so the tail is
    # 10 + 10 + 10 + (13 + 10) = 53 <= 1.5 × 36: the soft ceiling takes the group
    p = plan(entries, 1, 36)
    assert p is not None
    assert ids(p.tail) == [8, 9, 10, 11, 12]
    p = plan(entries, 1, 35)  # 53 > 52.5: the group is left to the middle
    assert p is not None
    assert ids(p.tail) == [10, 11, 12]


def test_a_group_beyond_the_soft_ceiling_is_left_to_the_middle() -> None:
    entries = [user(1), *[said(i) for i in range(2, 6)], calls(6, "a", tokens=100),
               result(7, "a", tokens=100), user(8, 10), said(9, 10)]
    p = plan(entries, 1, 30)
    assert p is not None
    assert ids(p.tail) == [8, 9]
    assert ids(p.middle) == [2, 3, 4, 5, 6, 7]


def test_the_latest_user_message_is_kept_however_large() -> None:
    entries = [user(1), *[said(i) for i in range(2, 6)], user(6, tokens=5000), calls(7, "a"), result(8, "a"),
               said(9)]
    p = plan(entries, 1, 40)
    assert p is not None
    assert ids(p.tail) == [6, 7, 8, 9]
    assert sum(entry_tokens(e) for e in p.tail) > TAIL_SOFT_CEILING * 40


def test_the_latest_user_message_brings_its_enclosing_group() -> None:
    # the user spoke while a call was outstanding: the result comes after the user message
    entries = [user(1), *[said(i) for i in range(2, 6)], calls(6, "a"), user(7), result(8, "a", tokens=1000),
               said(9)]
    p = plan(entries, 1, 10)
    assert p is not None
    assert ids(p.tail) == [6, 7, 8, 9]


def test_a_latest_user_message_in_the_head_stays_there() -> None:
    entries = [user(1), *[said(i) for i in range(2, 12)]]
    p = plan(entries, 1, 20)
    assert p is not None
    assert ids(p.head) == [1]
    assert ids(p.tail) == [10, 11]


def test_summaries_are_set_aside_and_the_newest_is_the_previous() -> None:
    old, new = Entry(20, "summary", "old"), Entry(21, "summary", "new")
    entries = [user(1), old, said(2), said(3), said(4), said(5), new, user(6), said(7)]
    p = plan(entries, 2, 20)
    assert p is not None
    assert p.previous_summary is new
    assert ids(p.head) == [1, 2]  # the head counts only non-summary entries
    assert ids(p.middle) == [3, 4, 5]
    assert ids(p.tail) == [6, 7]


def test_allowed_cuts() -> None:
    convo = [user(1), calls(2, "a", "b"), result(3, "a"), user(4), result(5, "b"), result(6, "orphan"),
             said(7)]
    assert allowed_cuts(convo) == [True, True, False, False, False, True, True, True]


# --- repair ------------------------------------------------------------------------------------


def test_repair_drops_orphans_and_duplicates() -> None:
    entries = [result(1, "x"), calls(2, "a"), result(3, "a"), result(4, "a"), said(5), result(6, "y")]
    assert ids(repair(entries)) == [2, 3, 5]


def test_repair_stubs_a_missing_result_right_after_its_group() -> None:
    entries = [user(1), calls(2, "a", "b", "c"), result(3, "b"), user(4), said(5)]
    out = repair(entries)
    assert ids(out) == [1, 2, 3, -1, -2, 4, 5]
    stubs = out[3:5]
    assert [(s.role, s.call_id, s.name, s.content) for s in stubs] == [
        ("tool", "a", "terminal", STUB_RESULT), ("tool", "c", "terminal", STUB_RESULT)
    ]
    assert all(s.meta == {"synthetic": True} for s in stubs)


def test_repair_stubs_at_the_very_end() -> None:
    out = repair([user(1), calls(2, "a")])
    assert ids(out) == [1, 2, -1]


def test_repair_keeps_a_late_result_instead_of_stubbing() -> None:
    entries = [calls(1, "a"), user(2), result(3, "a")]
    assert repair(entries) == entries


def test_repair_with_a_reused_call_id_answers_the_nearest_call() -> None:
    entries = [calls(1, "a"), calls(2, "a"), result(3, "a"), result(4, "a")]
    out = repair(entries)
    assert ids(out) == [1, -1, 2, 3]
    assert out[1].call_id == "a"


def test_assemble_puts_the_summary_between_head_and_tail() -> None:
    p = Plan((user(1), calls(2, "a")), (calls(3, "b"),), (result(4, "b"), user(5)))
    summary = Entry(99, "summary", "S")
    assert ids(assemble(p, summary)) == [1, 2, -1, 99, 5]  # a hand-made plan's split pairs are repaired
    assert ids(assemble(p, None)) == [1, 2, -1, 5]


# --- properties over random transcripts --------------------------------------------------------

STEPS = ("user", "text", "calls", "calls", "summary", "orphan", "late")
FATES = ("ok", "ok", "ok", "missing", "late", "duplicate")


@st.composite
def transcripts(draw: st.DrawFn) -> list[Entry]:
    """User, assistant and summary entries; calls whose results come at once, late, twice or never;
    results with no call.  Call ids are unique; ids are renumbered in transcript order."""
    rows: list[Entry] = []
    late: list[Entry] = []
    sizes = st.integers(0, 800)
    for n, step in enumerate(draw(st.lists(st.sampled_from(STEPS), max_size=50))):
        if step == "user":
            rows.append(Entry(0, "user", "u" * draw(sizes)))
        elif step == "text":
            rows.append(Entry(0, "assistant", "a" * draw(sizes)))
        elif step == "summary":
            rows.append(Entry(0, "summary", f"summary {n}"))
        elif step == "orphan":
            rows.append(Entry(0, "tool", "o" * draw(sizes), call_id=f"orphan{n}", name="terminal"))
        elif step == "late":
            rows.extend(late)
            late.clear()
        else:
            made = tuple(
                Call(f"c{n}.{k}", "write_file", json.dumps({"path": f"f{k}", "content": "w" * draw(sizes)}))
                for k in range(draw(st.integers(1, 3)))
            )
            rows.append(Entry(0, "assistant", "a" * draw(st.integers(0, 50)), calls=made))
            for call in made:
                answer = Entry(0, "tool", "r" * draw(sizes), call_id=call.call_id, name=call.name)
                fate = draw(st.sampled_from(FATES))
                if fate in ("ok", "duplicate"):
                    rows.append(answer)
                if fate == "duplicate":
                    rows.append(answer)
                if fate == "late":
                    late.append(answer)
    return [struct_replace(e, id=i + 1) for i, e in enumerate(rows)]


def pairs(convo: Sequence[Entry]) -> list[tuple[int, int]]:
    """(call index, result index) for every result with a call before it (by brute force)."""
    out = []
    for j, entry in enumerate(convo):
        if entry.role == "tool":
            callers = [i for i in range(j) if any(c.call_id == entry.call_id for c in convo[i].calls)]
            if callers:
                out.append((callers[-1], j))
    return out


def assert_paired(entries: Sequence[Entry]) -> None:
    """Every call has exactly one result after it; every result answers a call before it."""
    answers: dict[str, int] = {}
    for entry in entries:
        for call in entry.calls:
            assert call.call_id not in answers
            answers[call.call_id] = 0
        if entry.role == "tool":
            assert entry.call_id in answers, f"result without a call: {entry}"
            answers[entry.call_id] += 1
    assert all(n == 1 for n in answers.values()), answers


def tokens(entries: Sequence[Entry]) -> int:
    return sum(entry_tokens(e) for e in entries)


@given(transcripts(), st.integers(0, 6), st.integers(0, 1200))
@settings(max_examples=400, deadline=None)
def test_plan_properties(entries: list[Entry], first_n: int, budget: int) -> None:
    convo = [e for e in entries if e.role != "summary"]
    summaries = [e for e in entries if e.role == "summary"]
    linked = pairs(convo)

    def allowed(p: int) -> bool:
        return not any(a < p <= r for a, r in linked)

    head_end = next(p for p in range(min(first_n, len(convo)), len(convo) + 1) if allowed(p))
    users = [i for i, e in enumerate(convo) if e.role == "user"]
    p = plan(entries, first_n, budget)
    if p is None:
        return
    tail_start = len(p.head) + len(p.middle)
    # a partition of the non-summary entries, in order, the same objects
    assert all(a is b for a, b in zip([*p.head, *p.middle, *p.tail], convo, strict=True))
    assert p.middle
    assert p.previous_summary is (summaries[-1] if summaries else None)
    # the head: the first `first_n` entries, extended only as far as the first cut that splits no pair
    assert len(p.head) == head_end
    # no pair is split at either boundary
    assert allowed(tail_start)
    # the latest user message is kept (in the head or the tail)
    if users:
        assert users[-1] < head_end or users[-1] >= tail_start
    # the tail stays within the budget, except: its first unit is a call group that overran it,
    # within 1.5 × the budget; or it was extended back to the latest user message, and then it
    # starts exactly at the last allowed cut at or before that message (at any size)
    extended = bool(users) and users[-1] >= head_end and tail_start == max(
        q for q in range(users[-1] + 1) if allowed(q)
    )
    if tokens(p.tail) > budget and not extended:
        first_unit_end = next(q for q in range(tail_start + 1, len(convo) + 1) if allowed(q))
        assert first_unit_end - tail_start > 1
        assert tokens(p.tail) <= TAIL_SOFT_CEILING * budget
    # and it is not shorter than the budget allows: the unit before it would not have fit
    unit_start = max(q for q in range(tail_start) if allowed(q))
    assert tokens(p.tail) + tokens(convo[unit_start:tail_start]) > budget
    # after assembly and repair: every call answered once, every result with its call
    summary = Entry(0, "summary", "S")
    out = assemble(p, summary)
    assert_paired(out)
    assert out.count(summary) == 1
    # only results were dropped, and only those the input already had unpaired
    kept = {e.id for e in out}
    paired_results = {convo[r].id for _, r in linked}
    for e in [*p.head, *p.tail]:
        if e.role != "tool" or (e.id in paired_results and _first_answer(convo, e)):
            assert e.id in kept, e


def _first_answer(convo: Sequence[Entry], result_entry: Entry) -> bool:
    """Whether this result is the first for its call (a duplicate is dropped by design)."""
    first = next(e for e in convo if e.role == "tool" and e.call_id == result_entry.call_id)
    return first is result_entry


@given(transcripts())
@settings(max_examples=300, deadline=None)
def test_repair_properties(entries: list[Entry]) -> None:
    convo = [e for e in entries if e.role != "summary"]
    out = repair(entries)
    assert_paired(out)
    assert repair(out) == out  # idempotent
    real = [e for e in out if e.id > 0]
    originals = [e for e in entries if e in real]
    assert real == originals  # order kept, nothing invented but stubs
    assert all(e.role == "tool" for e in entries if e not in real)  # only results are dropped
    stubs = [i for i, e in enumerate(out) if e.id < 0]
    assert all(out[i].content == STUB_RESULT for i in stubs)
    for i in stubs:  # right after its call's group: only that assistant's results (or stubs) between
        j = i - 1
        while out[j].role == "tool":
            j -= 1
        group = {c.call_id for c in out[j].calls}
        assert all(e.call_id in group for e in out[j + 1 : i + 1])
    assert len(stubs) == sum(len(e.calls) for e in convo) - len({convo[r].call_id for _, r in pairs(convo)})
