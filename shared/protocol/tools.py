"""Tool calls on the wire: a call as the model made it, and its tool.* events."""

from __future__ import annotations

from typing import Any, Literal

from shared.protocol.base import EventData, EventSpec, Wire


class ToolCall(Wire):
    call_id: str
    name: str
    arguments: dict[str, Any]
    arguments_raw: str | None = None


ToolStatus = Literal["ok", "error", "denied", "skipped", "interrupted", "unknown"]


class ToolStart(EventData):
    call_id: str
    name: str
    arguments: dict[str, Any]
    summary: str
    arguments_raw: str | None = None


class ToolProgress(EventData):
    """The next chunk of what a running call printed: append `text` in order (see PROTOCOL.md)."""

    call_id: str
    text: str  # raw output, `\r` and escape sequences included; "" for a heartbeat
    elided_bytes: int | None = None  # addition: output skipped before `text`, whose first line says so
    elapsed_s: int | None = None  # addition: on a heartbeat, seconds the call has been running
    # Addition: what the running call announces, e.g. a delegate call's child_session_id.
    meta: dict[str, Any] | None = None


class ToolComplete(EventData):
    call_id: str
    name: str
    status: ToolStatus
    summary: str
    duration_ms: int
    spilled_path: str | None = None
    meta: dict[str, Any] | None = None
    output: str | None = None  # the start of the stored result (at most OUTPUT_PREVIEW_CHARS)
    output_truncated: bool = False


OUTPUT_PREVIEW_CHARS = 4000


TOOL_EVENTS = (
    EventSpec("tool.start", ToolStart, "`call_id`, `name`, `arguments`, `arguments_raw?`, `summary`"),
    EventSpec("tool.progress", ToolProgress,
              "`call_id`, `text` (the next chunk of what the call printed: append it; see "
              "below), `elided_bytes?`, `elapsed_s?`, `meta?` (addition: what the running call "
              "announces, e.g. a delegate call's `child_session_id`; kept in the result's `meta`)"),
    EventSpec("tool.complete", ToolComplete,
              "`call_id`, `name`, `status`, `summary`, `duration_ms`, `spilled_path?`, `meta?`, "
              "`output?`, `output_truncated`"),
)
