"""The events table: every event's name bound to the struct of its data, assembled from the
rows each domain's module declares beside its structs (`TURN_EVENTS`, `TOOL_EVENTS`, ...).

As `METHODS` (shared/methods.py) is for methods, this is the one table for events: the
client decodes an event's data with `EVENTS[type]`, the backend emits an event by its struct
alone (`backend.wire.emit` names it with `event_name`), and the schema and PROTOCOL.md's
events table (`python -m shared.schema`) are generated from `EVENT_SPECS`.  Each struct
is bound to exactly one name: two events with the same fields get a subclass each
(`AdmissionQueued` and `AdmissionSettled` of `AdmissionEvent`).

Adding an event: its struct (a subclass of `EventData`) and an `EventSpec` row in its
domain's module, then `python -m shared.schema`.
"""

from __future__ import annotations

from shared.protocol.approvals import APPROVAL_EVENTS
from shared.protocol.base import EventData, EventSpec
from shared.protocol.clarify import CLARIFY_EVENTS
from shared.protocol.doors import DOOR_EVENTS
from shared.protocol.mcp import MCP_EVENTS
from shared.protocol.memory import MEMORY_EVENTS
from shared.protocol.review import REVIEW_EVENTS
from shared.protocol.schedules import SCHEDULE_EVENTS
from shared.protocol.sessions import SESSION_EVENTS
from shared.protocol.skills import SKILL_EVENTS
from shared.protocol.tools import TOOL_EVENTS
from shared.protocol.turns import TURN_EVENTS

# In PROTOCOL.md's order: a turn's events, its tools', approvals, questions, sessions', then the
# session-less broadcasts.
EVENT_SPECS: tuple[EventSpec, ...] = (
    *TURN_EVENTS, *TOOL_EVENTS, *APPROVAL_EVENTS, *CLARIFY_EVENTS, *SESSION_EVENTS,
    *REVIEW_EVENTS, *SCHEDULE_EVENTS, *MEMORY_EVENTS, *SKILL_EVENTS, *DOOR_EVENTS, *MCP_EVENTS,
)


def _names(specs: tuple[EventSpec, ...]) -> dict[type[EventData], str]:
    table = {s.data: s.name for s in specs}
    assert len(table) == len(specs), "a struct is bound to two events: give each a subclass"
    return table


EVENTS: dict[str, type[EventData]] = {s.name: s.data for s in EVENT_SPECS}
assert len(EVENTS) == len(EVENT_SPECS), "an event is listed twice"
EVENT_NAMES: dict[type[EventData], str] = _names(EVENT_SPECS)


def event_name(data: EventData) -> str:
    """The name the table binds `data`'s struct to.  A struct the table does not list (a
    base two events share, such as `AdmissionEvent`) raises TypeError: emit its subclass."""
    try:
        return EVENT_NAMES[type(data)]
    except KeyError:
        raise TypeError(f"{type(data).__name__} is no event's data in EVENTS "
                        "(shared/protocol/events.py)") from None
