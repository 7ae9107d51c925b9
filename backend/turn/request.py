"""Assembling one model request: the frozen system prompt, the wire copy, and the tool schemas."""

from __future__ import annotations

from backend.providers.base import ChatRequest, ToolSpec, WireMessage
from backend.store import messages, sessions
from backend.store.db import Database, Tx
from backend.turn.context import build_system_prompt, wire_messages

SUMMARY_REQUEST = (
    "[Turnkey: this turn has reached its limit ({why}). Do not call any tools. In a few "
    "sentences, tell the user what you did, what is still left to do, and that you stopped "
    "because of this limit.]"
)


async def assemble(
    db: Database, session_id: str, default_model: str, tools: tuple[ToolSpec, ...],
    summary_for: str | None = None, model: str | None = None,
) -> ChatRequest:
    """Builds the request from the durable transcript (never from in-memory state).

    The system prompt is built and stored on the session row before the first
    call, and every later request replays those bytes.  `summary_for` makes the
    budget-exhausted request: tool-free, with a wire-only instruction appended.
    `model` overrides the session's model (a fallback provider answers as its own).
    """
    row, history = await db.read(
        lambda tx: (sessions.row(tx, session_id), messages.for_model(tx, session_id))
    )
    assert row is not None, "a running turn's session exists (deletion interrupts it first)"
    model = model or row.model or default_model
    prompt = row.system_prompt
    if prompt is None:
        built = build_system_prompt(row.cwd, model)

        def store(tx: Tx) -> str:
            return sessions.store_system_prompt(tx, session_id, built)

        prompt = await db.write(store)
    wire = wire_messages(prompt, history)
    if summary_for is not None:
        wire.append(WireMessage("user", SUMMARY_REQUEST.format(why=summary_for)))
        tools = ()
    return ChatRequest(model=model, messages=wire, tools=tools)
