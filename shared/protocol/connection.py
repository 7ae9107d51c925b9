"""The connection's start: initialize's params and result (who the caller is, what the backend offers)."""

from __future__ import annotations

import msgspec

from shared.literals import Scope
from shared.protocol.base import Params, Wire
from shared.protocol.mcp import McpServerStatus


class ClientInfo(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    version: str


class ServerInfo(Wire):
    name: str
    version: str


class Principal(Wire):
    """`expires_at` (an addition): when the token stops working; absent when it never
    expires (the owner's token never does)."""

    token_id: str
    scopes: list[Scope]
    expires_at: str | None = None


class InitializeParams(Params):
    client: ClientInfo
    protocol: int


class ProviderSummary(Wire):
    """What turns will use.  `offline_default`: nothing is configured and the small bundled
    model answers, so a front-end should say so."""

    configured: bool
    name: str | None = None
    model: str | None = None
    kind: str | None = None
    offline_default: bool = False


class SandboxSummary(Wire):
    """How terminal commands run.  `active` false says why in `reason`."""

    active: bool
    kind: str  # "bubblewrap", or "none"
    network: bool
    reason: str | None = None


class Capabilities(Wire):
    methods: list[str]
    events: list[str]
    provider: ProviderSummary
    sandbox: SandboxSummary
    mcp: list[McpServerStatus] = []  # addition: the configured MCP servers, without their tools


class InitializeResult(Wire):
    server: ServerInfo
    protocol: int
    epoch: int
    principal: Principal
    capabilities: Capabilities
