"""Assembling one model request: the frozen system prompt, the wire copy, and the tool schemas."""

from __future__ import annotations

from backend.compress.tokens import tools_chars
from backend.providers.base import ChatRequest, ToolSpec, WireMessage
from backend.store import messages, sessions
from backend.store.db import Database, Tx
from backend.store.fenced import TurnFence
from backend.store.sessions import SessionRecord
from backend.turn.context import build_system_prompt
from backend.turn.transcript import Transcripts

SUMMARY_REQUEST = (
    "[Turnkey: this turn has reached its limit ({why}). Do not call any tools. In a few "
    "sentences, tell the user what you did, what is still left to do, and that you stopped "
    "because of this limit.]"
)


async def assemble(
    db: Database, transcripts: Transcripts, session_id: str, default_model: str,
    tools: tuple[ToolSpec, ...], fence: TurnFence, summary_for: str | None = None,
    model: str | None = None, volatile: str = "", turn_id: str | None = None,
) -> ChatRequest:
    """Builds the request from the durable transcript (never from in-memory state): the
    rows the model sees, as kept since the last request and extended by those stored after
    it, in the same read as the session row (turn/transcript.py).

    The system prompt is built and stored on the session row before the first
    call, and every later request replays those bytes.  `summary_for` makes the
    budget-exhausted request: tool-free, with a wire-only instruction appended.
    `model` overrides the session's model (a fallback provider answers as its own).
    `volatile` is the memory block (tools/memory.block) and the skills index
    (tools/skills.block), read once per turn by the runner: a second system message right
    after the frozen prompt, so the prompt's bytes and the provider's cache of them stay as
    they were; "" sends none.  `turn_id` and `fence` (the
    turn's writes): the prompt and its notices are written only by the lease's holder,
    the notices as rows of that turn (a front-end shows them with the turn's stored rows).
    """
    def read(tx: Tx) -> tuple[SessionRecord | None, list[WireMessage], int, bool]:
        view = transcripts.read(tx, session_id)
        return sessions.row(tx, session_id), list(view.wire), view.chars(), view.has_files()

    row, history, chars, files = await db.read(read)
    assert row is not None, "a running turn's session exists (deletion interrupts it first)"
    model = model or row.model or default_model
    prompt = row.system_prompt
    if prompt is None:
        built = build_system_prompt(row.cwd, model)

        def store(tx: Tx) -> str:
            current = sessions.row(tx, session_id)
            if current is not None and current.system_prompt is None:
                # Stored by this request (not one that raced it): people are told once.
                for notice in built.notices:
                    messages.insert(tx, session_id, "system_note", notice, turn_id=turn_id,
                                    note_kind="notice")
            return sessions.store_system_prompt(tx, session_id, built.text)

        prompt = await fence.write(store)
    wire = [WireMessage("system", prompt), *history]
    chars += len(prompt)
    if volatile:
        wire.insert(1, WireMessage("system", volatile))
        chars += len(volatile)
    if summary_for is not None:
        ask = SUMMARY_REQUEST.format(why=summary_for)
        wire.append(WireMessage("user", ask))
        chars += len(ask)
        tools = ()
    return ChatRequest(model=model, messages=wire, tools=tools,
                       chars=chars + tools_chars(tools), files=files)
