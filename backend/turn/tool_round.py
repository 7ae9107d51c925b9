"""The tool round: validate the model's calls, store them, then run them.

Order is the point of this module.  Every call the model asked for — valid
or not — is written in the assistant row *before any tool runs*: after a
crash the transcript must show what the model asked to do, or a restarted
turn could do it twice.  If that write fails, nothing runs and the turn
ends.  Calls that cannot be dispatched (unknown tool, arguments that are not
a JSON object or do not fit the schema, duplicates, the batch over its cap)
still get an error result, so every call has exactly one result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from backend.errors import StoreUnavailable
from backend.providers.base import ToolCallChunk
from backend.store import messages
from backend.store.db import Database, Tx
from backend.tools.base import Tool
from backend.tools.executor import BatchContext, BatchResult, Executor, PreparedCall
from backend.tools.registry import ToolArgsError, validate

MAX_CALLS_PER_BATCH = 32
_CALL_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass
class RoundResult:
    batch: BatchResult | None  # None: the calls could not be stored, so none ran
    failure: str | None = None


def prepare(
    chunks: list[ToolCallChunk], tools: dict[str, Tool], used_ids: set[str], turn_id: str
) -> list[PreparedCall]:
    """Turns raw streamed calls into validated ones with ids unique in the turn."""
    out: list[PreparedCall] = []
    seen: dict[str, str] = {}
    for n, chunk in enumerate(chunks):
        call_id = _call_id(chunk.call_id, used_ids, turn_id, n)
        used_ids.add(call_id)
        name = chunk.name.strip()
        args, raw, error = _arguments(chunk.arguments)
        sent = args
        tool = tools.get(name)
        if error is None and tool is None:
            known = ", ".join(sorted(tools))
            error = f"Unknown tool {name!r}. Available tools: {known}."
        if error is None and tool is not None:
            try:
                args = validate(tool, args)
            except ToolArgsError as exc:
                error = f"Invalid arguments for {name}: {exc}"
        if error is None:
            signature = name + "\0" + json.dumps(args, sort_keys=True)
            if signature in seen:
                error = (f"Duplicate of call {seen[signature]} in the same batch; it ran once and "
                         "its result applies.")
            else:
                seen[signature] = call_id
        if error is None and n >= MAX_CALLS_PER_BATCH:
            error = (f"Not run: at most {MAX_CALLS_PER_BATCH} tool calls run per batch; "
                     "ask again for the rest.")
        out.append(PreparedCall(call_id, name or "unnamed", args, raw, tool, error,
                                sent=sent if sent != args else None))
    return out


def _call_id(given: str, used: set[str], turn_id: str, n: int) -> str:
    """The model's id when it is usable and new in this turn; otherwise one of ours."""
    if _CALL_ID.match(given) and given not in used:
        return given
    base = f"call_{turn_id[-8:]}_{n}"
    candidate, k = base, 0
    while candidate in used:
        k += 1
        candidate = f"{base}_{k}"
    return candidate


def _arguments(raw: str) -> tuple[dict[str, Any], str | None, str | None]:
    """(parsed arguments, raw text when it was not a JSON object, error)."""
    text = raw.strip() or "{}"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return {}, raw, (f"The arguments are not valid JSON ({exc.msg} at position {exc.pos}); "
                         "send a JSON object.")
    if not isinstance(value, dict):
        return {}, raw, "The arguments must be a JSON object."
    return value, None, None


def stored_calls(prepared: list[PreparedCall]) -> list[dict[str, Any]]:
    """The calls as the assistant row stores them (and the wire replays them)."""
    out = []
    for p in prepared:
        call: dict[str, Any] = {"call_id": p.call_id, "name": p.name, "arguments": p.shown}
        if p.arguments_raw is not None:
            call["arguments_raw"] = p.arguments_raw
        out.append(call)
    return out


def signature(prepared: list[PreparedCall]) -> str:
    """What makes two batches the same request (for loop detection)."""
    return json.dumps([[p.name, p.shown, p.arguments_raw] for p in prepared], sort_keys=True)


async def run_round(
    db: Database, executor: Executor, scope: BatchContext, text: str, prepared: list[PreparedCall],
    also: Callable[[Tx], None] = lambda tx: None,
) -> RoundResult:
    """Stores the calls (with `also`, in the same transaction), then runs them."""
    calls = stored_calls(prepared)

    def persist(tx: Tx) -> None:
        messages.insert(tx, scope.session_id, "assistant", text, turn_id=scope.turn_id,
                        tool_calls=calls)
        also(tx)

    try:
        # Durable before any tool runs: after a crash the call must be visible.
        await scope.fence.write(persist)
    except StoreUnavailable as exc:
        return RoundResult(None, f"session_persistence_failed: {exc.message}; no tool was run")
    return RoundResult(await executor.run(scope, prepared))
