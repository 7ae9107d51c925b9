"""A hook's answer parsed and bounded, its config checked, and which hooks run in what order."""

from __future__ import annotations

import json

import pytest

from backend.tools.hooks import (
    MAX_CONTEXT_CHARS,
    MAX_OUTPUT,
    MAX_REASON_CHARS,
    BadAnswer,
    HookRun,
    configured,
    parse_answer,
)
from shared.codec import ParamsError
from shared.config import HookConfig, validate


def out(value: object) -> bytes:
    return json.dumps(value).encode()


def test_nothing_printed_is_no_opinion() -> None:
    assert parse_answer("pre_tool", b"") == {}
    assert parse_answer("pre_tool", b"  \n") == {}
    assert HookRun("h", "pre_tool", parse_answer("pre_tool", b"")).blocked is None


def test_a_block_carries_its_reason_bounded() -> None:
    answer = parse_answer("pre_tool", out({"decision": "block", "reason": "x" * 10_000}))
    run = HookRun("h", "pre_tool", answer)
    assert run.blocked is not None
    assert run.blocked.startswith("x" * MAX_REASON_CHARS)
    assert len(run.blocked) < MAX_REASON_CHARS + 50
    assert HookRun("h", "pre_tool", parse_answer(
        "pre_tool", out({"decision": "block"}))).blocked == "no reason given"
    assert HookRun("h", "pre_tool", parse_answer(
        "pre_tool", out({"decision": "allow"}))).blocked is None


def test_a_decision_counts_only_before_a_tool() -> None:
    assert parse_answer("post_tool", out({"decision": "block", "reason": "no"})) == {}
    assert parse_answer("prompt_submit", out({"decision": "block"})) == {}


def test_context_where_the_event_takes_one_bounded() -> None:
    for event in ("session_start", "prompt_submit", "post_tool"):
        answer = parse_answer(event, out({"context": "y" * 20_000, "other": 1}))
        assert set(answer) == {"context"}
        assert answer["context"].startswith("y" * MAX_CONTEXT_CHARS)
        assert len(answer["context"]) < MAX_CONTEXT_CHARS + 50
    assert parse_answer("turn_end", out({"context": "ignored"})) == {}
    assert parse_answer("pre_tool", out({"context": "ignored"})) == {}


@pytest.mark.parametrize(("event", "printed", "words"), [
    ("pre_tool", b"yes", "not JSON"),
    ("pre_tool", b"[1]", "not an object"),
    ("pre_tool", out({"decision": "deny"}), "it may be"),
    ("prompt_submit", out({"context": 5}), "not a string"),
    ("prompt_submit", b" " * (MAX_OUTPUT + 1), "more than 64 KiB"),
])
def test_bad_answers_say_why(event: str, printed: bytes, words: str) -> None:
    with pytest.raises(BadAnswer, match=words):
        parse_answer(event, printed)  # type: ignore[arg-type]


def test_hooks_run_in_name_order_enabled_and_for_their_tools() -> None:
    hooks = {
        "b": HookConfig(event="pre_tool", command=["b"]),
        "a": HookConfig(event="pre_tool", command=["a"], tools=["terminal"]),
        "c": HookConfig(event="pre_tool", command=["c"], enabled=False),
        "d": HookConfig(event="post_tool", command=["d"]),
    }
    assert [n for n, _ in configured(hooks, "pre_tool", "terminal")] == ["a", "b"]
    assert [n for n, _ in configured(hooks, "pre_tool", "write_file")] == ["b"]
    assert [n for n, _ in configured(hooks, "post_tool", "terminal")] == ["d"]
    assert configured({}, "turn_end") == []


@pytest.mark.parametrize(("table", "field"), [
    ({"event": "pre_tool", "command": []}, "hooks.h.command"),
    ({"event": "pre_tool", "command": [" "]}, "hooks.h.command"),
    ({"event": "on_save", "command": ["x"]}, "hooks.h.event"),
    ({"event": "turn_end", "command": ["x"], "tools": ["terminal"]}, "hooks.h.tools"),
    ({"event": "turn_end", "command": ["x"], "timeout_s": 0}, "hooks.h.timeout_s"),
    ({"event": "turn_end", "command": ["x"], "timeout_s": 601}, "hooks.h.timeout_s"),
    ({"event": "turn_end", "command": ["x"], "shell": True}, "hooks.h.shell"),
])
def test_bad_hook_tables_name_the_field(table: dict[str, object], field: str) -> None:
    with pytest.raises(ParamsError) as refused:
        validate({"hooks": {"h": table}})
    assert refused.value.field == field


def test_a_hooks_name_is_checked() -> None:
    with pytest.raises(ParamsError) as refused:
        validate({"hooks": {"no rm": {"event": "pre_tool", "command": ["x"]}}})
    assert refused.value.field == "hooks.no rm"
    assert validate({"hooks": {"no-rm": {"event": "pre_tool", "command": ["x"]}}}).hooks[
        "no-rm"].timeout_s == 10
