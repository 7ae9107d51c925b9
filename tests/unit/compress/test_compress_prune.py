"""Pruning old tool traffic: placeholders, cut arguments that stay JSON, idempotence, the tail untouched."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.compress.model import Call, Entry
from backend.compress.plan import Plan
from backend.compress.prune import (
    ARG_LIMIT,
    OUTPUT_LIMIT,
    PRUNED_OUTPUT,
    TRUNCATED,
    prune,
    prune_arguments,
    prune_plan,
)


def call_entry(id_: int, arguments: str, name: str = "write_file") -> Entry:
    return Entry(id_, "assistant", "", calls=(Call(f"c{id_}", name, arguments),))


def test_long_old_tool_output_becomes_the_placeholder() -> None:
    entries = [Entry(1, "tool", "x" * (OUTPUT_LIMIT + 1), call_id="c", name="terminal", meta={"k": 1})]
    (pruned,) = prune(entries, 1)
    assert pruned.content == PRUNED_OUTPUT
    assert (pruned.id, pruned.call_id, pruned.name, pruned.meta) == (1, "c", "terminal", {"k": 1})
    assert entries[0].content == "x" * (OUTPUT_LIMIT + 1)  # the input is not changed


def test_short_tool_output_and_other_roles_are_kept() -> None:
    entries = [
        Entry(1, "tool", "x" * OUTPUT_LIMIT, call_id="c"),
        Entry(2, "user", "u" * 5000),
        Entry(3, "assistant", "a" * 5000),
        Entry(4, "summary", "s" * 5000),
    ]
    pruned = prune(entries, len(entries))
    assert pruned == entries
    assert all(p is e for p, e in zip(pruned, entries, strict=True))


def test_nothing_at_or_after_keep_from_is_touched() -> None:
    big = "x" * 1000
    entries = [Entry(i, "tool", big, call_id=f"c{i}") for i in range(6)]
    pruned = prune(entries, 3)
    assert [e.content for e in pruned] == [PRUNED_OUTPUT] * 3 + [big] * 3
    assert prune(entries, 0) == entries
    assert prune(entries, -5) == entries
    assert [e.content for e in prune(entries, 99)] == [PRUNED_OUTPUT] * 6


def test_long_argument_strings_are_cut_and_the_json_stays_valid() -> None:
    args = {"path": "src/app.py", "content": "é" * 1000, "n": 3, "flag": True, "none": None}
    (pruned,) = prune([call_entry(1, json.dumps(args))], 1)
    out = json.loads(pruned.calls[0].arguments)
    assert out == {**args, "content": "é" * ARG_LIMIT + TRUNCATED}
    assert pruned.calls[0].call_id == "c1"
    assert pruned.calls[0].name == "write_file"


def test_nested_strings_are_cut_and_keys_are_not() -> None:
    long_key = "k" * 300
    args = {"edits": [{"old": "o" * 250, "new": "short"}, ["n" * 201]], long_key: 1}
    out = json.loads(prune_arguments(json.dumps(args)))
    assert out == {
        "edits": [{"old": "o" * ARG_LIMIT + TRUNCATED, "new": "short"}, ["n" * ARG_LIMIT + TRUNCATED]],
        long_key: 1,
    }


def test_a_string_of_exactly_the_limit_is_kept() -> None:
    raw = json.dumps({"content": "x" * ARG_LIMIT})
    assert prune_arguments(raw) == raw


def test_arguments_with_nothing_to_cut_keep_their_exact_bytes() -> None:
    raw = '{ "path" :"a.py",\n  "lines": [' + ", ".join(str(i) for i in range(100)) + "]}"
    assert len(raw) > ARG_LIMIT
    assert prune_arguments(raw) == raw


def test_arguments_that_are_not_json_are_cut_as_text() -> None:
    raw = '{"content": "' + "x" * 500  # the model stopped mid-string
    cut = prune_arguments(raw)
    assert cut == raw[:ARG_LIMIT] + TRUNCATED
    assert prune_arguments(cut) == cut
    with pytest.raises(ValueError, match=r"."):
        json.loads(cut)


def test_nan_is_not_json() -> None:
    raw = '{"x": NaN, "content": "' + "x" * 300 + '"}'
    assert prune_arguments(raw) == raw[:ARG_LIMIT] + TRUNCATED


def test_json_that_python_cannot_write_back_is_kept_whole() -> None:
    raw = '{"x": 1e400, "content": "' + "x" * 300 + '"}'  # valid JSON; Python would write Infinity
    assert prune_arguments(raw) == raw


def test_top_level_json_string_and_array_are_cut_and_stay_json() -> None:
    assert json.loads(prune_arguments(json.dumps("s" * 300))) == "s" * ARG_LIMIT + TRUNCATED
    assert json.loads(prune_arguments(json.dumps(["s" * 300, 1]))) == ["s" * ARG_LIMIT + TRUNCATED, 1]


def test_calls_are_pruned_one_by_one() -> None:
    entry = Entry(1, "assistant", "text", calls=(
        Call("a", "read_file", '{"path": "x"}'),
        Call("b", "write_file", json.dumps({"path": "y", "content": "z" * 999})),
    ))
    (pruned,) = prune([entry], 1)
    assert pruned.calls[0] is entry.calls[0]
    assert pruned.calls[1].arguments != entry.calls[1].arguments
    assert pruned.content == "text"


def test_prune_plan_prunes_head_and_middle_only() -> None:
    big = "x" * 1000
    head = (Entry(1, "tool", big, call_id="a"),)
    middle = (Entry(2, "tool", big, call_id="b"), Entry(3, "user", big))
    tail = (Entry(4, "tool", big, call_id="c"),)
    summary = Entry(5, "summary", "s")
    p = prune_plan(Plan(head, middle, tail, summary))
    assert [e.content for e in p.head] == [PRUNED_OUTPUT]
    assert [e.content for e in p.middle] == [PRUNED_OUTPUT, big]
    assert p.tail == tail
    assert p.previous_summary is summary


# --- properties --------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=400),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=20), inner, max_size=4),
    max_leaves=12,
)
raw_arguments = st.one_of(
    st.dictionaries(st.text(max_size=20), json_values, max_size=5).map(json.dumps),
    json_values.map(lambda v: json.dumps(v, ensure_ascii=False)),
    st.text(max_size=600),  # anything, mostly not JSON
)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


def _no_constants(name: str) -> Any:
    raise ValueError(name)


def _is_json(text: str) -> bool:
    """Strict JSON: Python's own parser also takes NaN and Infinity."""
    try:
        json.loads(text, parse_constant=_no_constants)
    except ValueError:
        return False
    return True


@given(raw_arguments)
@settings(max_examples=300)
def test_prune_arguments_properties(raw: str) -> None:
    once = prune_arguments(raw)
    assert prune_arguments(once) == once  # idempotent
    if _is_json(raw):
        assert _is_json(once)  # valid JSON stays valid
        assert all(len(s) <= ARG_LIMIT + len(TRUNCATED) for s in _strings(json.loads(once)))
    else:
        assert len(once) <= max(len(raw), ARG_LIMIT + len(TRUNCATED))
    if len(raw) <= ARG_LIMIT:
        assert once == raw


entries_strategy = st.lists(
    st.one_of(
        st.builds(lambda c: ("tool", c, None), st.text(max_size=500)),
        st.builds(lambda a: ("assistant", "", a), raw_arguments),
        st.builds(lambda c: ("user", c, None), st.text(max_size=300)),
    ),
    max_size=20,
).map(lambda rows: [
    Entry(i, role, content, calls=(Call(f"c{i}", "patch", args),) if args is not None else (),
          call_id=f"c{i - 1}" if role == "tool" else None)
    for i, (role, content, args) in enumerate(rows)
])


@given(entries_strategy, st.integers(-2, 25))
@settings(max_examples=300)
def test_prune_properties(entries: list[Entry], keep_from: int) -> None:
    once = prune(entries, keep_from)
    assert prune(once, keep_from) == once  # idempotent
    assert [e.id for e in once] == [e.id for e in entries]
    assert [e.role for e in once] == [e.role for e in entries]
    for i, (before, after) in enumerate(zip(entries, once, strict=True)):
        if i >= keep_from:
            assert after is before  # the tail is never touched
            continue
        if before.role == "tool":
            assert after.content == (PRUNED_OUTPUT if len(before.content) > OUTPUT_LIMIT else before.content)
        for b, a in zip(before.calls, after.calls, strict=True):
            assert (a.call_id, a.name) == (b.call_id, b.name)
            if _is_json(b.arguments):
                assert _is_json(a.arguments)
