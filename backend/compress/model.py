"""What the compression algorithms work on: the model-visible transcript as plain entries."""

from __future__ import annotations

from typing import Any

import msgspec

# Structs, not dataclasses: a long session's compression builds one Entry per row (100,000
# of them), and a frozen dataclass's __init__ took seven times as long.  `replace` is
# msgspec.structs.replace.  Untracked by the cyclic collector (gc=False): they hold only
# strings, tuples of calls and a stub's small dict, never a cycle, and 100,000 tracked ones
# made the first collection after building them stall the event loop.


class Call(msgspec.Struct, frozen=True, gc=False):
    """One tool call of an assistant entry, as the model sent it."""

    call_id: str
    name: str
    arguments: str  # the raw JSON text the model produced (possibly not valid JSON)


class Entry(msgspec.Struct, frozen=True, gc=False):
    """One row the model would see, in transcript order.

    `id` is the row's integer id (monotonic in transcript order).  `role` is
    user, assistant, tool or summary (a `system_note` with note_kind summary).
    `content` is what the model is sent for this row (api_content when the
    row has one).  Assistant entries may carry `calls`; tool entries carry the
    `call_id` they answer.
    """

    id: int
    role: str
    content: str
    calls: tuple[Call, ...] = ()
    call_id: str | None = None
    name: str | None = None  # a tool entry's tool name
    meta: dict[str, Any] | None = None  # a repair's stub says so here (plan.repair)
    # A user's prompt's files as the summarizer reads of them ("[image a.png, 800×600]",
    # "[file notes.pdf]"): their bytes never go to it, and once summarized they leave the
    # model's view with the rest of the middle.
    files: tuple[str, ...] = ()
    file_chars: int = 0  # what they cost, as characters (compress/tokens.py's estimate)
