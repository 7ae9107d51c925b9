"""MCP servers (addition): their status, mcp.list and mcp.test, and the mcp.server event."""

from __future__ import annotations

from typing import Any, Literal

from shared.protocol.base import EventData, EventSpec, Params, Wire

McpState = Literal["stopped", "starting", "ready", "failed", "disabled"]
McpApproval = Literal["ask", "trusted"]


class McpToolInfo(Wire):
    """Addition: one tool of an MCP server.  `name` is the server's own; `model_name` is
    what the model calls (`mcp__SERVER__TOOL`); `approval` is the effective one; `enabled`
    false: switched off in config (`tools.NAME.enabled`), not offered to the model."""

    name: str
    model_name: str
    description: str = ""
    approval: McpApproval = "ask"
    input_schema: dict[str, Any] | None = None
    enabled: bool = True


class McpServerStatus(Wire):
    """Addition: a configured MCP server (`[mcp.servers.NAME]`) and where it is.  `error`
    says why it is `failed` (its last words on stderr included); `tools` is absent until it
    has listed them once."""

    name: str
    transport: Literal["stdio", "http"]
    state: McpState
    enabled: bool = True
    error: str | None = None
    tools: list[McpToolInfo] | None = None
    restarts: int = 0  # starts after the first, since the backend started
    sandboxed: bool = False


class McpListParams(Params):
    """Addition.  `name`: one server only (an unknown name is invalid params)."""

    name: str | None = None


class McpListResult(Wire):
    servers: list[McpServerStatus]


class McpTestParams(Params):
    """Addition: (re)start the server `name` now and list its tools.  `server_config`, a
    table as in `config.set {patch: {mcp: {servers: {NAME: ...}}}}` (merged over the saved
    one, null deleting a key; errors name `server_config.FIELD`), tests a form before it is
    saved, in a throwaway process that is stopped afterwards.  Nothing is saved."""

    name: str
    server_config: dict[str, Any] | None = None


class McpTestResult(Wire):
    ok: bool
    server: McpServerStatus
    latency_ms: int
    error: str | None = None


class McpServerEvent(EventData):
    """Addition: an MCP server changed state (starting, ready, failed, stopped) or its
    tool list changed; session-less (`session_id` ""), sent to every reader."""

    server: McpServerStatus


MCP_EVENTS = (
    EventSpec("mcp.server", McpServerEvent,
              "addition, session-less (`session_id` `\"\"`, no `seq`, sent to every connection "
              "with `read`): `server`, an McpServerStatus, when an MCP server is `starting`, "
              "`ready`, `failed` or `stopped`, or its tool list changed"),
)
