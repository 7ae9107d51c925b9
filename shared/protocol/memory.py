"""Memory (addition): the agent's two notebooks, memory.get and memory.set, memory.changed."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from shared.protocol.base import EventData, EventSpec, Params, Wire

MemoryTarget = Literal["user", "environment"]


class MemoryFile(Wire):
    """One notebook: its text (entries, one per line), characters used and the limit."""

    text: str
    used: int
    limit: int


class MemoryResult(Wire):
    user: MemoryFile
    environment: MemoryFile


class MemorySetParams(Params):
    """Replaces a whole notebook (the app's editor, `turnkey memory set`); "" clears it.
    Checked as the tool's writes are: cleaned, no secrets, no role tags, within the limit."""

    target: MemoryTarget
    text: Annotated[str, msgspec.Meta(max_length=16_000)]


class MemoryChanged(EventData):
    """Addition: a notebook changed (by the memory tool or memory.set); session-less
    (`session_id` ""), sent to every reader."""

    target: MemoryTarget
    file: MemoryFile


MEMORY_EVENTS = (
    EventSpec("memory.changed", MemoryChanged,
              "addition, session-less (`session_id` `\"\"`, no `seq`, sent to every connection "
              "with `read`): `target` (`user` or `environment`), `file` (a MemoryFile, as "
              "`memory.get` gives), after the memory tool or `memory.set` changed a notebook"),
)
