"""The `delegate` tool: hands a task to a sub-agent (a child session) and returns its final answer.

The tool only frames the task and turns the child's outcome into a result; the
child session itself (its row, its admission through the same durable path as a
typed prompt, the concurrency bound, interrupts) is the job of a `Delegator`
set at start-up (`backend/authority/delegate.py`), since tools sit below the
authority and may not import it.  Without a delegator the tool is not offered.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from backend.tools.base import Guard, ToolContext, ToolResult
from shared.config import ApprovalMode

TASK_MAX_CHARS = 20_000
CONTEXT_MAX_CHARS = 100_000
SUMMARY_TASK_CHARS = 120

ChildOutcome = Literal["completed", "failed", "interrupted", "cancelled", "unknown", "deleted"]

DESCRIPTION = (
    "Hand a self-contained task to a sub-agent: a fresh agent with its own conversation, the "
    "same folder, tools and approval rules, that works on it alone and returns only its final "
    "answer. Use it for work that can be done independently (research a question, change one "
    "module, review a file), several at once by calling it several times in one reply; they "
    "run at the same time. The sub-agent knows nothing of this conversation: put everything "
    "it needs in `task` and `context`. Its tool calls are not shown to you, only its answer."
)


@dataclass(frozen=True)
class Delegation:
    """One delegate call, as the delegator needs it.  `call_id` with `parent_session_id`
    names the child: the same call never starts a second one."""

    parent_session_id: str
    parent_turn_id: str
    call_id: str
    prompt: str  # the framed task the child is admitted with
    title: str  # the child session's title


@dataclass(frozen=True)
class ChildEnd:
    """How a child ended: `final_text` when it completed, `reason` (for the model) otherwise."""

    child_session_id: str
    outcome: ChildOutcome
    final_text: str = ""
    reason: str = ""


class Delegator(Protocol):
    """Runs child sessions for the delegate tool (implemented in the authority layer)."""

    def offered(self, depth: int) -> bool:
        """Whether a session `depth` delegations below a person's may delegate further."""
        ...

    async def delegate(self, job: Delegation, ctx: ToolContext) -> ChildEnd:
        """Starts (or finds) the child of `job`, waits for its turn to end and says how it
        ended.  Cancelled, it interrupts the child (or cancels its admission) first."""
        ...


def check(args: dict[str, Any]) -> str | None:
    """What is wrong with validated arguments, in words the model can act on; None if fine."""
    task = args.get("task", "")
    context = args.get("context") or ""
    if not task.strip():
        return "argument 'task' is empty; say what the sub-agent should do"
    if len(task) > TASK_MAX_CHARS:
        return (f"argument 'task' is {len(task):,} characters, over the {TASK_MAX_CHARS:,} "
                "allowed; keep the task short and put material in 'context'")
    if len(context) > CONTEXT_MAX_CHARS:
        return (f"argument 'context' is {len(context):,} characters, over the "
                f"{CONTEXT_MAX_CHARS:,} allowed; pass file paths for the sub-agent to read "
                "instead of their contents")
    return None


def framed_prompt(task: str, context: str | None) -> str:
    """The child's prompt: who it works for, what to do, and that only its last answer counts.

    A sub-agent has nobody to ask (the person is not reading its session) and its answer is
    all the parent sees, so both are said plainly before the task."""
    parts = [
        "You are a sub-agent. Another agent, working for the user, handed you the task below "
        "through its `delegate` tool. Nobody will answer questions while you work: decide "
        "for yourself, using your tools. The other agent will read only your final message, "
        "not your tool calls or earlier messages, so end with a self-contained final answer: "
        "what you found or did, with the paths, names and values it needs, and anything "
        "you could not do.",
        "## Task\n" + task.strip(),
    ]
    if context and context.strip():
        parts.append("## Context from the other agent\n" + context.strip())
    return "\n\n".join(parts)


def title_for(task: str) -> str:
    """The child session's title: the task's first line, short."""
    first = next((line.strip() for line in task.splitlines() if line.strip()), "task")
    cut = first if len(first) <= 60 else first[:59].rstrip() + "…"
    return f"Sub-agent: {cut}"


def to_result(end: ChildEnd) -> ToolResult:
    """The call's result: the child's answer (ok), or an error saying how it ended and why."""
    meta = {"child_session_id": end.child_session_id, "child_outcome": end.outcome}
    where = f"sub-agent session {end.child_session_id}"
    if end.outcome == "completed":
        answer = end.final_text.strip() or "(The sub-agent ended without a final answer.)"
        return ToolResult("ok", answer, f"sub-agent answered ({where})", meta)
    why = f": {end.reason}" if end.reason else ""
    said = {
        "failed": "The sub-agent failed",
        "interrupted": "The sub-agent was interrupted",
        "cancelled": "The sub-agent's task was cancelled before it started",
        "unknown": "The sub-agent's outcome is unknown",
        "deleted": "The sub-agent's session was deleted",
    }[end.outcome]
    content = f"{said}{why}. It ran in {where}; it gave no final answer."
    return ToolResult("error", content, f"sub-agent {end.outcome} ({where})", meta)


class Delegate:
    name = "delegate"
    spill = True  # a long answer is spilled like any result
    changes_files = False  # the child's own tool calls checkpoint their changes
    PARAMETERS: dict[str, Any] = {  # noqa: RUF012 (read only)
        "type": "object",
        "properties": {
            "task": {"type": "string", "description": "What the sub-agent must do and what "
                     "its answer must contain. Self-contained: it cannot see this conversation."},
            "context": {"type": "string", "description": "Optional material it needs: "
                        "findings so far, constraints, relevant paths."},
        },
        "required": ["task"],
        "additionalProperties": False,
    }

    def __init__(self) -> None:
        self.parameters: dict[str, Any] = self.PARAMETERS
        self.delegator: Delegator | None = None  # set at start-up (registry.use_delegator)

    @property
    def description(self) -> str:
        return DESCRIPTION

    def summary(self, args: dict[str, Any]) -> str:
        task = " ".join(str(args.get("task", "")).split())
        if len(task) > SUMMARY_TASK_CHARS:
            task = task[:SUMMARY_TASK_CHARS - 1].rstrip() + "…"
        return f"sub-agent: {task}"

    def guard(self, args: dict[str, Any], cwd: Path, mode: ApprovalMode, data_dir: Path) -> Guard | None:
        # Handing off asks nobody: each call the child makes is judged (and asked) in the
        # child's own session, by the same rules as the parent's.
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        problem = check(args)
        if problem is not None:
            return ToolResult("error", f"Not run: {problem}.", self.summary(args))
        if self.delegator is None:
            return ToolResult("error", "Not run: sub-agents are not available in this backend.",
                              self.summary(args))
        job = Delegation(
            parent_session_id=ctx.session_id, parent_turn_id=ctx.turn_id, call_id=ctx.call_id,
            prompt=framed_prompt(args["task"], args.get("context")), title=title_for(args["task"]),
        )
        return to_result(await self.delegator.delegate(job, ctx))
