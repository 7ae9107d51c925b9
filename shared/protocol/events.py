"""The events table: each event type's name and the struct of its data."""

from __future__ import annotations

from shared.protocol.approvals import ApprovalEvent
from shared.protocol.base import Wire
from shared.protocol.doors import DoorEvent
from shared.protocol.mcp import McpServerEvent
from shared.protocol.memory import MemoryChanged
from shared.protocol.schedules import ScheduleChanged
from shared.protocol.sessions import (
    CompressionComplete,
    CompressionStart,
    SessionDeletedEvent,
    SessionEvent,
    UsageUpdate,
)
from shared.protocol.tools import ToolComplete, ToolProgress, ToolStart
from shared.protocol.turns import (
    AdmissionEvent,
    LeaseWaiting,
    MessageComplete,
    ProviderFallback,
    ProviderRetry,
    TextDelta,
    TurnStarted,
    TurnSteered,
)

EVENTS: dict[str, type[Wire]] = {
    "admission.queued": AdmissionEvent,
    "admission.settled": AdmissionEvent,
    "turn.started": TurnStarted,
    "turn.steered": TurnSteered,
    "message.delta": TextDelta,
    "message.complete": MessageComplete,
    "tool.start": ToolStart,
    "tool.progress": ToolProgress,
    "tool.complete": ToolComplete,
    "approval.request": ApprovalEvent,
    "approval.resolved": ApprovalEvent,
    "lease.waiting": LeaseWaiting,
    "provider.retry": ProviderRetry,
    "provider.fallback": ProviderFallback,
    "usage.update": UsageUpdate,
    "session.updated": SessionEvent,
    "session.created": SessionEvent,
    "session.deleted": SessionDeletedEvent,
    "compression.start": CompressionStart,
    "compression.complete": CompressionComplete,
    "mcp.server": McpServerEvent,
    "memory.changed": MemoryChanged,
    "schedule.changed": ScheduleChanged,
    "door.state": DoorEvent,
}
