"""The configured MCP servers (`[mcp.servers.NAME]`): started on need, offered as tools.

A stdio server runs in the folder it acts on: its `cwd`, or else the
session's folder, so one server may run once per folder (each the same
command); an HTTP server is one connection.  Each runs:

- in the command sandbox when there is one (`tools/sandbox.py`): the whole
  filesystem read-only, its folder writable, Turnkey's data folder and the
  keyring's runtime folder invisible, its own pid namespace, dying with the
  backend; the network on unless `network = false`.  Without bubblewrap (or
  with `sandbox = false`) it still dies with the backend (`setpriv
  --pdeathsig`), so a kill -9 of the backend leaves no server behind.
- with the environment commands get (an allowlist, never a provider key or
  a TURNKEY_ variable), plus its `env` and its `env_secrets` read from the
  keyring.  HTTP headers come from `headers` and `header_secrets` the same way.

No MCP code is imported until a server is configured: a backend without one
starts as fast as before.  Every change of a server's state or tool list is
announced through `on_status` (the `mcp.server` event).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from backend.config import ConfigFile
from backend.mcp.connection import Connection, Launch, McpUnavailable
from backend.mcp.names import model_name
from backend.mcp.tool import McpTool
from backend.secrets import Secrets
from backend.tools.base import Tool
from backend.tools.sandbox import Sandbox, child_env, exec_argv, under_tmp
from shared.config import McpServerConfig
from shared.protocol import McpServerStatus, McpState, McpToolInfo

log = logging.getLogger("mcp")

IDLE_STOP_S = 15 * 60.0  # a server instance for a folder no turn used for this long stops
REAP_EVERY_S = 60.0
_RANK: dict[McpState, int] = {"ready": 4, "starting": 3, "failed": 2, "stopped": 1, "disabled": 0}


class McpPool:
    def __init__(self, config: ConfigFile, secrets: Secrets, sandbox: Sandbox, data_dir: Path,
                 on_status: Callable[[McpServerStatus], None]) -> None:
        self.config = config
        self.secrets = secrets
        self.sandbox = sandbox
        self.data_dir = data_dir
        self.spill_dir = data_dir / "spill"
        self.on_status = on_status
        self._conns: dict[tuple[str, str], Connection] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def servers(self) -> dict[str, McpServerConfig]:
        return self.config.config.mcp.servers

    # --- turns -------------------------------------------------------------------------

    async def tools_for(self, cwd: Path, *, refresh: bool = False) -> dict[str, Tool]:
        """The tools of every enabled server for a session in `cwd`, by model name, in a
        stable order.  Starts what is not running (servers start concurrently); a server
        that cannot start adds no tools and says why in its status.  `refresh`: list each
        running server's tools again first (a turn's first request does)."""
        wanted = [self._conn(name, cfg, cwd) for name, cfg in sorted(self.servers.items())
                  if cfg.enabled]
        if not wanted:
            return {}

        async def up(conn: Connection) -> None:
            if not conn.ready:
                await conn.prepare()
            elif refresh:
                await conn.relist()
            else:
                await conn.settled()  # a list change announced during the last call

        await asyncio.gather(*(up(c) for c in wanted))
        out: dict[str, Tool] = {}
        for conn in wanted:
            for tool in self._tools(conn):
                out.setdefault(tool.name, tool)
        return out

    def known_tools(self, cwd: Path) -> dict[str, Tool]:
        """The tools already listed for `cwd`, starting nothing (for estimates)."""
        out: dict[str, Tool] = {}
        for name, cfg in sorted(self.servers.items()):
            conn = self._conns.get((name, self._folder(cfg, cwd)))
            if cfg.enabled and conn is not None and conn.cfg == cfg:
                for tool in self._tools(conn):
                    out.setdefault(tool.name, tool)
        return out

    def _tools(self, conn: Connection) -> list[McpTool]:
        """Its tools as last listed: while it is ready, or being started again after a crash
        (the same server: a call waits a moment for it, or fails saying why)."""
        if not (conn.ready or conn.restarting) or not conn.tools:
            return []
        out = []
        for remote in conn.tools:
            override = conn.cfg.tools.get(remote.name)
            if override is not None and not override.enabled:
                continue
            out.append(McpTool(model_name(conn.name, remote.name), remote, conn,
                               conn.cfg.tool_approval(remote.name), self.spill_dir,
                               resolve=functools.partial(self._current, conn.name, conn.folder)))
        return sorted(out, key=lambda t: t.name)  # whatever order a server lists them in

    # --- connections -------------------------------------------------------------------

    def _folder(self, cfg: McpServerConfig, cwd: Path) -> str:
        if cfg.url:
            return ""
        return os.path.realpath(os.path.expanduser(cfg.cwd)) if cfg.cwd else os.path.realpath(cwd)

    def _conn(self, name: str, cfg: McpServerConfig, cwd: Path) -> Connection:
        key = (name, self._folder(cfg, cwd))
        conn = self._conns.get(key)
        if conn is not None and conn.cfg != cfg:  # changed since it started: start it anew
            self._retire(conn)
            conn = None
        if conn is None:
            conn = Connection(
                name, cfg, key[1], launch=lambda: self._launch(name, cfg, key[1]),
                headers=lambda: self._headers(name, cfg), redact=lambda text: self._redact(cfg, text),
                log_path=self._log_path(name, key[1]), on_change=self._changed)
            self._conns[key] = conn
            self._start_reaper()
        return conn

    def _current(self, name: str, folder: str) -> Connection:
        """The connection that serves `name` in `folder` now (for a call of a tool offered
        before a settings change or an idle stop); raises McpUnavailable if it is gone."""
        cfg = self.servers.get(name)
        if cfg is None:
            raise McpUnavailable(f"the MCP server {name!r} was removed from the settings")
        if not cfg.enabled:
            raise McpUnavailable(f"the MCP server {name!r} was switched off in the settings")
        return self._conn(name, cfg, Path(folder or "."))

    def _log_path(self, name: str, folder: str) -> Path:
        """Where a server's stderr goes: one file per server and folder it runs in, since
        instances in two folders run at once, and each start's failure quotes the last
        lines of its own file (`mcp.test` runs in the home folder while a session's instance
        may be restarting: one shared file made either quote the other's start)."""
        tag = hashlib.sha256(folder.encode(errors="surrogateescape")).hexdigest()[:8]
        base = "".join(c if c.isalnum() or c in "-_" else "_" for c in Path(folder).name)[:40]
        return self.data_dir / "logs" / f"mcp-{name}.{base or 'root'}-{tag}.log"

    def _forget(self, conn: Connection) -> None:
        key = (conn.name, conn.folder)
        if self._conns.get(key) is conn:
            del self._conns[key]

    def _retire(self, conn: Connection) -> None:
        self._forget(conn)
        task = asyncio.create_task(conn.close(), name=f"mcp-{conn.name}-close")
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def sync(self) -> None:
        """After a config change: servers removed, disabled or changed stop now."""
        servers = self.servers
        for conn in list(self._conns.values()):
            cfg = servers.get(conn.name)
            if cfg is None or not cfg.enabled or cfg != conn.cfg:
                self._retire(conn)
        for name in servers:
            self.on_status(self.status(name))

    async def test(self, name: str, cfg: McpServerConfig, cwd: Path) -> tuple[Connection, float]:
        """Starts `name` as `cfg` afresh and waits for its tools: the saved server's own
        connection when `cfg` is what is saved, else a throwaway one (closed by the caller)."""
        began = time.monotonic()
        if self.servers.get(name) == cfg:
            conn = self._conn(name, cfg, cwd)
            if conn.state == "failed":  # a person asked: start it anew now, no backoff
                # The old supervisor may be restarting it this very moment: it is stopped
                # before the new one starts, or the two would write one log at once and the
                # error people read could quote the other start's (empty) stderr.
                self._forget(conn)
                await conn.close()
                conn = self._conn(name, cfg, cwd)
            if conn.state == "ready":
                await conn.relist()
        else:
            conn = Connection(
                name, cfg, self._folder(cfg, cwd),
                launch=lambda: self._launch(name, cfg, self._folder(cfg, cwd)),
                headers=lambda: self._headers(name, cfg), redact=lambda text: self._redact(cfg, text),
                log_path=self.data_dir / "logs" / f"mcp-{name}-test.log", on_change=lambda c: None)
        with contextlib.suppress(McpUnavailable):
            await conn.ensure()
        return conn, time.monotonic() - began

    async def close(self) -> None:
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
        conns, self._conns = list(self._conns.values()), {}
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)

    def _start_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.create_task(self._reap(), name="mcp-reaper")

    async def _reap(self) -> None:
        """Stops a folder's instance nobody used for IDLE_STOP_S (a user who moves between
        many folders would otherwise gather one server per folder)."""
        while self._conns:
            await asyncio.sleep(REAP_EVERY_S)
            now = time.monotonic()
            for conn in list(self._conns.values()):
                if conn.inflight == 0 and now - conn.used > IDLE_STOP_S and conn.state != "stopped":
                    log.info("%s: unused for %.0f minutes in %s; stopping it", conn.name,
                             (now - conn.used) / 60, conn.folder or conn.cfg.url)
                    self._retire(conn)

    # --- how a server is started ---------------------------------------------------------

    def _launch(self, name: str, cfg: McpServerConfig, folder: str) -> Launch:
        label = f"the MCP server {name!r}"
        if not os.path.isdir(folder):
            raise McpUnavailable(f"{label} cannot start: its folder {folder} does not exist")
        top = self.config.config
        keys = {p.api_key_env for p in top.providers.values() if p.api_key_env}
        env = child_env(os.environ, top.sandbox.env, keys)
        env.update(cfg.env)
        env.update(self._stored(cfg.env_secrets, f"{label} cannot start", "env_secrets.{}"))
        program = shutil.which(cfg.command[0], path=env.get("PATH")) or cfg.command[0]
        if not os.path.isfile(program) or not os.access(program, os.X_OK):
            raise McpUnavailable(f"{label} cannot start: the program {cfg.command[0]!r} was not "
                                 "found (on the PATH commands get) or is not executable")
        argv = [program, *cfg.command[1:]]
        if cfg.sandbox and self.sandbox.active:
            assert self.sandbox.probe.bwrap is not None
            full = exec_argv(self.sandbox.probe.bwrap, argv, workdir=Path(folder),
                             session_dir=Path(folder), data_dir=self.data_dir, env=env,
                             network=cfg.network, readable=self._under_tmp(argv))
            return Launch(full, {}, folder, sandboxed=True)
        setpriv = shutil.which("setpriv")
        if setpriv is not None and os.uname().sysname == "Linux":
            argv = [setpriv, "--pdeathsig", "KILL", "--", *argv]  # dies with the backend
        return Launch(argv, env, folder, sandboxed=False)

    def _under_tmp(self, argv: list[str]) -> list[Path]:
        return under_tmp(argv, self.data_dir)

    def _headers(self, name: str, cfg: McpServerConfig) -> dict[str, str]:
        return {**cfg.headers, **self._stored(cfg.header_secrets, f"the MCP server {name!r} cannot "
                                              "connect", "the header {}")}

    def _stored(self, wanted: dict[str, str], failing: str, what: str) -> dict[str, str]:
        """{variable or header: its stored secret's value}; raises McpUnavailable naming the
        first secret that is not stored and how to store it."""
        out = {}
        for key, secret in wanted.items():
            value = self.secrets.get(secret)
            if value is None:
                raise McpUnavailable(f"{failing}: the secret {secret!r} (for {what.format(key)}) "
                                     f"is not stored; store it with `turnkey secret set {secret}`")
            out[key] = value
        return out

    def _redact(self, cfg: McpServerConfig, text: str) -> str:
        """`text` without the server's stored keys (its stderr may print them)."""
        for secret in (*cfg.env_secrets.values(), *cfg.header_secrets.values()):
            value = self.secrets.get(secret)
            if value and len(value) >= 4:
                text = text.replace(value, "[redacted]")
        return text

    # --- status --------------------------------------------------------------------------

    def _changed(self, conn: Connection) -> None:
        if not self._closed or conn.state == "stopped":
            self.on_status(self.status(conn.name))

    def status(self, name: str, *, tools: bool = True) -> McpServerStatus:
        """The server as people see it: its best instance's state (ready over starting over
        failed), its tools as last listed."""
        cfg = self.servers.get(name)
        conns = [c for c in self._conns.values() if c.name == name and (cfg is None or c.cfg == cfg)]
        transport = cfg.transport if cfg is not None else "stdio"
        if cfg is not None and not cfg.enabled:
            return McpServerStatus(name=name, transport=transport, state="disabled", enabled=False)
        best = max(conns, key=lambda c: (_RANK[c.state], c.used), default=None)
        state: McpState = best.state if best is not None else "stopped"
        listed: list[McpToolInfo] | None = None
        if tools and best is not None and best.tools is not None and best.ready:
            listed = tool_infos(best.name, best.cfg, best.tools)
        return McpServerStatus(
            name=name, transport=transport, state=state, enabled=True,
            error=best.error if best is not None and state == "failed" else None,
            tools=listed, restarts=sum(max(0, c.starts - 1) for c in conns),
            sandboxed=bool(best and best.sandboxed),
        )

    def statuses(self, *, tools: bool = True) -> list[McpServerStatus]:
        return [self.status(name, tools=tools) for name in sorted(self.servers)]


def tool_infos(server: str, cfg: McpServerConfig, remote: list[Any]) -> list[McpToolInfo]:
    """A server's tools as listed, for people: switched-off ones too (`enabled` false), by
    model name, with the approval each call gets."""
    out = []
    for t in remote:
        override = cfg.tools.get(t.name)
        schema = t.input_schema if isinstance(t.input_schema, dict) else None
        out.append(McpToolInfo(
            name=t.name, model_name=model_name(server, t.name),
            description=(t.description or getattr(t, "title", None) or "").strip(),
            approval=cfg.tool_approval(t.name), input_schema=schema,
            enabled=override is None or override.enabled))
    return sorted(out, key=lambda i: i.model_name)
