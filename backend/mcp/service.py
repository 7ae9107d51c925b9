"""MCP servers as `mcp.list` and `mcp.test` see them: the configured servers' status, and a
server started once to see that it answers (a saved one, or a form's values not saved)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from backend.config import ConfigFile
from backend.errors import InvalidParams
from backend.mcp.connection import Connection
from backend.mcp.pool import McpPool, tool_infos
from shared import protocol as p
from shared.config import MCP_NAME_PATTERN


class McpService:
    def __init__(self, pool: McpPool, config: ConfigFile) -> None:
        self.pool = pool
        self.config = config

    def listing(self, name: str | None) -> list[p.McpServerStatus]:
        if name is not None:
            if name not in self.pool.servers:
                raise InvalidParams("name", self._unknown(name))
            return [self.pool.status(name)]
        return self.pool.statuses()

    async def test(self, name: str, server_config: dict[str, Any] | None) -> p.McpTestResult:
        saved = self.pool.servers.get(name)
        if server_config is None:
            if saved is None:
                raise InvalidParams("name", self._unknown(name))
            cfg = saved
        else:
            cfg = self.config.mcp_server_preview(name, server_config)
        if not re.fullmatch(MCP_NAME_PATTERN, name):
            raise InvalidParams("name", "a server's name is 1 to 32 letters, digits and '-', "
                                "starting with a letter or digit")
        # A server that acts on a session's folder is tested in the home folder.
        server, seconds = await self.pool.test(name, cfg, Path.home())
        ok, error = server.ready, server.error
        try:
            status = self.pool.status(name) if server.cfg is saved else _test_status(server)
        finally:
            if server.cfg is not saved:
                await server.close()
        return p.McpTestResult(ok=ok, server=status, latency_ms=int(seconds * 1000),
                               error=None if ok else (error or "it did not start"))

    def _unknown(self, name: str) -> str:
        known = ", ".join(sorted(self.pool.servers)) or "none"
        return f"no MCP server named {name!r} in config.toml [mcp.servers] (configured: {known})"


def _test_status(server: Connection) -> p.McpServerStatus:
    """A throwaway test connection's status (a form not saved yet)."""
    tools = None
    if server.ready and server.tools is not None:
        tools = tool_infos(server.name, server.cfg, server.tools)
    return p.McpServerStatus(name=server.name, transport=server.cfg.transport, state=server.state,
                             error=server.error, tools=tools, sandboxed=server.sandboxed)
