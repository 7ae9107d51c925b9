"""The `clarify` tool: the model asks the person one question and waits for the answer.

The tool checks the question and turns how it ended into what the model reads; the
question itself (its row and events, the wait, the timeout, an answer given after a
restart) belongs to an `Asker` set at start-up (`backend/authority/questions.py`), since
answering one may admit a prompt and tools sit below the authority.  Without an asker the
tool is not offered.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from backend.tools.base import Guard, ToolContext, ToolResult
from shared.config import ApprovalMode
from shared.protocol import MAX_CHOICE, MAX_CHOICES, MAX_QUESTION

SUMMARY_CHARS = 120

DESCRIPTION = (
    "Ask the user one question and wait for the answer. Use it only for a choice you should "
    "not make alone: which of two readings of the request, which file, whether to go on with "
    "something risky. Give `choices` when the answer is one of a few options (the user picks "
    "one, or writes their own unless `allow_other` is false). If nobody answers in time you "
    "are told so: then go on with your best judgement and say what you assumed."
)


@dataclass(frozen=True)
class Asked:
    """How a question ended: `answered` (the person's `answer`, and `choice`, the index of
    the choice they picked, or None for their own words), or `expired` after `timeout_s`."""

    status: Literal["answered", "expired"]
    answer: str = ""
    choice: int | None = None
    timeout_s: float = 0.0
    question_id: str = ""


class Asker(Protocol):
    """Asks the person and waits (implemented in the authority layer)."""

    async def ask(self, ctx: ToolContext, question: str, choices: list[str],
                  allow_other: bool) -> Asked:
        """Stores the question, waits for its answer or its timeout and says how it ended.
        Cancelled (the turn interrupted), it withdraws the question first, then re-raises."""
        ...


def check(args: dict[str, Any]) -> str | None:
    """What is wrong with validated arguments, in words the model can act on; None if fine."""
    question = args.get("question", "")
    if not question.strip():
        return "argument 'question' is empty; say what you want to know"
    if len(question) > MAX_QUESTION:
        return (f"argument 'question' is {len(question):,} characters, over the "
                f"{MAX_QUESTION:,} allowed; ask something shorter")
    choices = args.get("choices") or []
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        return "argument 'choices' must be a list of strings"
    if len(choices) > MAX_CHOICES:
        return f"argument 'choices' has {len(choices)} entries; give at most {MAX_CHOICES}"
    for i, choice in enumerate(choices):
        if not choice.strip() or len(choice) > MAX_CHOICE:
            return (f"choice {i + 1} must be 1 to {MAX_CHOICE} characters "
                    f"(it has {len(choice.strip())})")
    if not choices and args.get("allow_other") is False:
        return "argument 'allow_other' is false but there are no choices to pick from"
    return None


def to_result(asked: Asked, summary: str) -> ToolResult:
    """What the model reads: the answer, or that nobody answered and what to do then."""
    meta: dict[str, Any] = {"question_id": asked.question_id, "question_status": asked.status}
    if asked.status == "expired":
        seconds = f"{asked.timeout_s:g}"
        content = (f"Nobody answered within {seconds} s: go on with your best judgement and "
                   "say what you assumed.")
        return ToolResult("ok", content, f"{summary} (nobody answered)", meta)
    if asked.choice is not None:
        meta["choice"] = asked.choice
        content = f"The person answered with choice {asked.choice + 1}: {asked.answer}"
    else:
        content = f"The person answered: {asked.answer}"
    return ToolResult("ok", content, f"{summary} (answered)", meta)


class Clarify:
    name = "clarify"
    spill = False  # an answer is at most a few thousand characters
    changes_files = False
    PARAMETERS: dict[str, Any] = {  # noqa: RUF012 (read only)
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "The question, self-contained: the "
                         "user may read it away from this conversation."},
            "choices": {"type": "array", "items": {"type": "string"},
                        "description": f"Optional: up to {MAX_CHOICES} short answers to pick from."},
            "allow_other": {"type": "boolean", "default": True,
                            "description": "With choices: whether the user may answer in "
                            "their own words instead."},
        },
        "required": ["question"],
        "additionalProperties": False,
    }

    def __init__(self) -> None:
        self.parameters: dict[str, Any] = self.PARAMETERS
        self.asker: Asker | None = None  # set at start-up (registry.use_asker)

    @property
    def description(self) -> str:
        return DESCRIPTION

    def summary(self, args: dict[str, Any]) -> str:
        question = " ".join(str(args.get("question", "")).split())
        if len(question) > SUMMARY_CHARS:
            question = question[:SUMMARY_CHARS - 1].rstrip() + "…"
        return f"asks: {question}"

    def guard(self, args: dict[str, Any], cwd: Path, mode: ApprovalMode, data_dir: Path) -> Guard | None:
        return None  # asking is itself a question to the person: nothing to approve

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        problem = check(args)
        if problem is not None:
            return ToolResult("error", f"Not asked: {problem}.", self.summary(args))
        if self.asker is None:
            return ToolResult("error", "Not asked: questions are not available in this backend.",
                              self.summary(args))
        choices = [c.strip() for c in args.get("choices") or []]
        allow_other = bool(args.get("allow_other", True)) or not choices
        asked = await self.asker.ask(ctx, args["question"].strip(), choices, allow_other)
        return to_result(asked, self.summary(args))
