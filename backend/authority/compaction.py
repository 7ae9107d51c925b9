"""`session.compress`: compaction on request, the same path as the automatic one (same lock
and summary), whatever the threshold, cooldown or anti-thrash state."""

from __future__ import annotations

from pathlib import Path

from backend.authority.sessions import SessionService
from backend.compress.compressor import Compressor
from backend.config import ConfigFile
from backend.errors import InvalidParams, ProviderError, SessionBusy
from backend.mcp.pool import McpPool
from backend.providers.base import ToolSpec
from backend.providers.registry import Providers
from backend.tools import registry
from shared import protocol as p


class Compaction:
    def __init__(self, sessions: SessionService, compressor: Compressor, providers: Providers,
                 config: ConfigFile, mcp: McpPool) -> None:
        self.sessions = sessions
        self.compressor = compressor
        self.providers = providers
        self.config = config
        self.mcp = mcp

    async def compress(self, params: p.SessionCompressParams) -> p.CompressResult:
        sid = params.session_id
        session = await self.sessions.get(sid)
        cfg = self.config.config
        if cfg.compression.rotate and self.sessions.authority.running(sid) is not None:
            raise SessionBusy("the session is running a turn, and compressing it now would move "
                              "the conversation to a new session under it; wait for the turn to "
                              "end or interrupt it first")
        try:
            link = self.providers.primary(cfg, self.config.path, session.provider)
        except ProviderError as exc:
            raise InvalidParams("session_id", f"no model to summarize with: {exc.message}") from exc
        tools = self._specs(session.cwd) if link.cfg.tools else ()
        focus = (params.focus or "").strip()[:2000] or None
        out = await self.compressor.compress(sid, link, "requested", tools, focus=focus, manual=True)
        return p.CompressResult(compressed=out.compressed, before_tokens=out.before_tokens,
                                after_tokens=out.after_tokens,
                                session_id=out.child_session_id or sid, reason=out.why_not)

    def _specs(self, cwd: str) -> tuple[ToolSpec, ...]:
        """The tools a request of a session in `cwd` offers, as far as known without starting
        an MCP server: the built-ins and the tools of servers already running for its folder."""
        known = self.mcp.known_tools(Path(cwd))
        return registry.specs() + tuple(ToolSpec(t.name, t.description, t.parameters)
                                        for t in known.values())
