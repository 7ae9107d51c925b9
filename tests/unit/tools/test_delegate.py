"""The delegate tool without a backend: argument checks, the child's prompt, results."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.tools import registry
from backend.tools.base import ToolContext
from backend.tools.delegate import (
    CONTEXT_MAX_CHARS,
    TASK_MAX_CHARS,
    ChildEnd,
    Delegate,
    Delegation,
    check,
    framed_prompt,
    title_for,
    to_result,
)
from backend.tools.registry import ToolArgsError, validate

DELEGATE = registry.BUILTINS["delegate"]


class Recording:
    """A Delegator that answers at once and keeps what it was asked (the tool's only seam)."""

    def __init__(self, end: ChildEnd, max_depth: int = 1) -> None:
        self.end = end
        self.max_depth = max_depth
        self.jobs: list[Delegation] = []

    def offered(self, depth: int) -> bool:
        return depth < self.max_depth

    async def delegate(self, job: Delegation, ctx: ToolContext) -> ChildEnd:
        self.jobs.append(job)
        return self.end


def ctx() -> ToolContext:
    return ToolContext(Path("/tmp"), "ses_parent", "turn_1", "call_7", {})


def test_arguments_are_checked_against_the_schema() -> None:
    assert validate(DELEGATE, {"task": "do it"}) == {"task": "do it"}
    assert validate(DELEGATE, {"task": "do it", "context": "c"}) == {"task": "do it", "context": "c"}
    with pytest.raises(ToolArgsError, match="'task' is required"):
        validate(DELEGATE, {"context": "c"})
    with pytest.raises(ToolArgsError, match="'task' must be a string, got an integer"):
        validate(DELEGATE, {"task": 3})
    with pytest.raises(ToolArgsError, match="unknown argument 'depth'"):
        validate(DELEGATE, {"task": "x", "depth": 2})


def test_checks_say_what_to_fix() -> None:
    assert check({"task": "fine", "context": None}) is None
    assert "empty" in (check({"task": "  \n"}) or "")
    long_task = check({"task": "x" * (TASK_MAX_CHARS + 1)}) or ""
    assert "put material in 'context'" in long_task
    long_context = check({"task": "t", "context": "y" * (CONTEXT_MAX_CHARS + 1)}) or ""
    assert "file paths" in long_context
    assert check({"task": "x" * TASK_MAX_CHARS, "context": "y" * CONTEXT_MAX_CHARS}) is None


def test_the_prompt_says_it_is_a_sub_agent_and_must_end_with_a_self_contained_answer() -> None:
    prompt = framed_prompt("  Count the TODOs in src/  ", "Skip vendored code.\n")
    assert prompt.startswith("You are a sub-agent.")
    assert "self-contained final answer" in prompt
    assert "Nobody will answer questions" in prompt
    assert prompt.index("## Task\nCount the TODOs in src/") < prompt.index(
        "## Context from the other agent\nSkip vendored code.")
    assert prompt.endswith("Skip vendored code.")
    bare = framed_prompt("Only a task", None)
    assert "## Context" not in bare
    assert "## Context" not in framed_prompt("Only a task", "   ")


def test_titles_and_summaries_are_one_short_line() -> None:
    assert title_for("\n  Fix the parser\nthen more") == "Sub-agent: Fix the parser"
    assert title_for("w" * 100).endswith("…")
    assert len(title_for("w" * 100)) == len("Sub-agent: ") + 60
    assert Delegate().summary({"task": "a\nb   c"}) == "sub-agent: a b c"
    assert Delegate().summary({"task": "z" * 500}).endswith("…")


def test_results_carry_the_answer_or_say_how_the_child_ended() -> None:
    ok = to_result(ChildEnd("ses_c", "completed", final_text="42 files\n"))
    assert (ok.status, ok.content) == ("ok", "42 files")
    assert ok.meta == {"child_session_id": "ses_c", "child_outcome": "completed"}
    empty = to_result(ChildEnd("ses_c", "completed", final_text=" "))
    assert empty.status == "ok"
    assert "without a final answer" in empty.content
    failed = to_result(ChildEnd("ses_c", "failed", reason="the provider refused the key"))
    assert failed.status == "error"
    assert failed.content.startswith("The sub-agent failed: the provider refused the key.")
    assert "ses_c" in failed.content
    assert failed.meta["child_outcome"] == "failed"
    for outcome in ("interrupted", "cancelled", "unknown", "deleted"):
        end = to_result(ChildEnd("ses_c", outcome, reason="why"))
        assert end.status == "error"
        assert "why" in end.content


async def test_run_frames_the_task_and_names_the_call() -> None:
    tool = Delegate()
    delegator = Recording(ChildEnd("ses_c", "completed", final_text="done"))
    tool.delegator = delegator
    result = await tool.run({"task": "Look around", "context": "in /srv"}, ctx())
    assert (result.status, result.content) == ("ok", "done")
    (job,) = delegator.jobs
    assert (job.parent_session_id, job.parent_turn_id, job.call_id) == ("ses_parent", "turn_1", "call_7")
    assert job.prompt == framed_prompt("Look around", "in /srv")
    assert job.title == "Sub-agent: Look around"


async def test_bad_or_unserved_calls_start_nothing() -> None:
    tool = Delegate()
    unserved = await tool.run({"task": "x"}, ctx())
    assert unserved.status == "error"
    assert "not available" in unserved.content
    delegator = Recording(ChildEnd("ses_c", "completed"))
    tool.delegator = delegator
    empty = await tool.run({"task": " "}, ctx())
    assert empty.status == "error"
    assert empty.content.startswith("Not run: argument 'task' is empty")
    assert delegator.jobs == []


def test_delegate_is_offered_only_above_the_depth_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry.DELEGATE, "delegator", None)
    assert "delegate" not in registry.offered(0), "no delegator: not offered"
    monkeypatch.setattr(registry.DELEGATE, "delegator", Recording(ChildEnd("c", "completed"), 1))
    # (`clarify` needs an asker, which only a running backend sets.)
    assert list(registry.offered(0)) == [n for n in registry.BUILTINS if n != "clarify"]
    assert list(registry.offered(1)) == [n for n in registry.BUILTINS
                                         if n not in ("delegate", "clarify")]
    assert [s.name for s in registry.specs(registry.offered(1))] == list(registry.offered(1))
    monkeypatch.setattr(registry.DELEGATE, "delegator", Recording(ChildEnd("c", "completed"), 0))
    assert "delegate" not in registry.offered(0), "delegate_depth = 0 turns it off"
