"""One MCP server process (or HTTP endpoint) and the official SDK's client connected to it.

A connection has one supervisor task, which owns the SDK's `Client` for its
whole life: the SDK's transports are anyio context managers, entered and
left in one task.  Other tasks only call through it.

- It starts on first need (`ensure`), waits at most `startup_timeout_s` for
  the handshake and the first tool listing, then serves until it is closed
  or the server goes away.  While no call runs it pings the server every
  `PING_S`, so a server that died idle is noticed before the next turn.
- A server that went away after it was ready is started again after a
  backoff (1 s, doubling, at most `BACKOFF_MAX_S`); after `EAGER_RESTARTS`
  failures in a row it waits for the next need instead.  A call that comes
  while it is down or backing off fails at once with the reason.
- `notifications/tools/list_changed` (and, on 2026-07-28 servers, a
  `subscriptions/listen` stream) re-list its tools in the background; a
  turn takes the list as it is when it builds a request, so a listing never
  changes inside one.
- A call races the server's `timeout_s`; the SDK sends
  `notifications/cancelled` when a call is abandoned (timeout or interrupt).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend import __version__
from shared.config import McpServerConfig
from shared.protocol import McpState

log = logging.getLogger("mcp")

PING_S = 10.0
PING_TIMEOUT_S = 10.0
RELIST_TIMEOUT_S = 15.0
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 60.0
EAGER_RESTARTS = 5
WAIT_FOR_RESTART_S = 5.0  # a call waits for a restart due this soon instead of failing
CLOSE_TIMEOUT_S = 5.0
MAX_PAGES = 20
STDERR_TAIL_BYTES = 4096


class McpUnavailable(Exception):
    """The server cannot take a call now; the message says why, for the model and people."""


class McpCallFailed(Exception):
    """A call that was sent did not come back with a result."""


@dataclass(frozen=True)
class Launch:
    """How a stdio server is started: the whole argv (bubblewrap's, when sandboxed)."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    sandboxed: bool


class Connection:
    def __init__(
        self, name: str, cfg: McpServerConfig, folder: str, *,
        launch: Callable[[], Launch], headers: Callable[[], dict[str, str]],
        redact: Callable[[str], str], log_path: Path, on_change: Callable[[Connection], None],
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.folder = folder  # the folder a stdio server runs in ("" for HTTP)
        self._launch = launch
        self._headers = headers
        self._redact = redact
        self.log_path = log_path
        self._on_change = on_change
        self.state: McpState = "stopped"
        self.error: str | None = None
        self.tools: list[Any] | None = None  # the SDK's Tool objects, as last listed
        self.starts = 0
        self.sandboxed = False
        self.used = time.monotonic()
        self.inflight = 0
        self.client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._moved = asyncio.Event()  # set (and replaced) on every state change
        self._dead = asyncio.Event()
        self._dead_why = ""
        self._closing = False
        self.retired = False  # closed for good: a new Connection takes its place
        self._failures = 0
        self._retry_at = 0.0
        self._relisting: asyncio.Task[None] | None = None
        self._stale = False  # a list change was announced and not listed yet
        self._http_status = ""  # an HTTP server's latest error status

    # --- what the pool and the tools call ----------------------------------------------

    @property
    def label(self) -> str:
        return f"the MCP server {self.name!r}"

    async def ensure(self) -> None:
        """Returns once the server is ready; raises McpUnavailable saying why it is not.  A
        server that went away moments ago is waited for while it starts again (a call right
        after a crash finds it back); one backing off for longer fails the call at once."""
        self.used = time.monotonic()
        if self.ready:
            return
        if self.retired:
            raise McpUnavailable(f"{self.label} was stopped (its settings changed or it was "
                                 "removed); ask again")
        wait = max(0.0, self._retry_at - time.monotonic())
        if self._task is None or self._task.done():
            if self.state == "failed" and wait > 0:
                raise McpUnavailable(self._down_words())
            self._set("starting", None)
            self._task = asyncio.create_task(self._run(), name=f"mcp-{self.name}")
            wait = 0.0
        elif self.state == "failed" and wait > WAIT_FOR_RESTART_S:
            raise McpUnavailable(self._down_words())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait + self.cfg.startup_timeout_s + 1.0
        tried = False  # a start began while this call waited
        while not self.ready:
            tried = tried or self.state == "starting"
            if (self.state == "failed" and tried) or self._task.done():
                raise McpUnavailable(self._down_words())
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise McpUnavailable(f"{self.label} has not started after "
                                     f"{self.cfg.startup_timeout_s:g} s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._moved.wait(), remaining)

    @property
    def ready(self) -> bool:
        """Ready, and not known to be gone: a call that saw the connection close marks it
        at once, before the supervisor has noticed (so the next call waits for the restart
        instead of using the closed client)."""
        return self.state == "ready" and not self._dead.is_set()

    @property
    def restarting(self) -> bool:
        """It was ready, went away, and its supervisor is starting it again."""
        return not self.ready and self.starts > 0 and self._task is not None and not self._task.done()

    async def prepare(self) -> None:
        """For a turn about to build a request: starts a server that is not running and
        waits for it, but never holds the turn for one its supervisor is already retrying
        (after a crash, or after failed starts): that one offers what it listed before, if
        anything, and its calls wait for it or fail saying why."""
        if self.ready:
            return
        retrying = self._task is not None and not self._task.done() and (self.starts or self._failures)
        if retrying:
            return
        with contextlib.suppress(McpUnavailable):
            await self.ensure()

    async def call(self, tool: str, args: dict[str, Any],
                   progress: Callable[[str], None] = lambda text: None) -> Any:
        """The server's CallToolResult.  Raises McpUnavailable (never sent), TimeoutError
        (sent, no answer within `timeout_s`; cancelled) or McpCallFailed.  The server's
        `notifications/progress` for the call go to `progress`, one line each."""
        from mcp import MCPError

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress(progress_line(done, total, message))

        await self.ensure()
        client = self.client
        self.inflight += 1
        self.used = time.monotonic()
        try:
            return await asyncio.wait_for(
                client.call_tool(tool, args, progress_callback=on_progress), self.cfg.timeout_s)
        except MCPError as exc:
            if _closed(exc):
                self._gone("stopped while a call ran")
                raise McpCallFailed(f"{self.label} stopped while the call ran"
                                    f"{self._stderr_words()}; it is being started again") from None
            raise McpCallFailed(f"{self.label} answered with an error: {exc.error.message} "
                                f"(code {exc.error.code})") from None
        except (TimeoutError, asyncio.CancelledError):
            raise
        except Exception as exc:
            if _transport_error(exc):
                self._gone(f"its connection failed ({type(exc).__name__})")
                raise McpCallFailed(f"{self.label}'s connection failed while the call ran "
                                    f"({type(exc).__name__}: {exc})") from None
            raise McpCallFailed(f"{self.label} sent a result Turnkey cannot read "
                                f"({type(exc).__name__}: {str(exc)[:300]})") from None
        finally:
            self.inflight -= 1
            self.used = time.monotonic()

    async def relist(self) -> None:
        """Lists the tools again now (between turns); keeps the old list if that fails."""
        client = self.client
        if not self.ready or client is None:
            return
        try:
            tools = await asyncio.wait_for(_list_all(client), RELIST_TIMEOUT_S)
        except Exception as exc:
            log.warning("%s: listing its tools failed: %r", self.name, exc)
            return
        if _names(tools) != _names(self.tools or []) or _schemas(tools) != _schemas(self.tools or []):
            self.tools = tools
            self._on_change(self)
        else:
            self.tools = tools

    async def close(self) -> None:
        """Stops the server (and a start or backoff in progress), for good."""
        self._closing = True
        self.retired = True
        self._dead_why = "stopped by Turnkey"
        self._dead.set()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT_S)
            except (TimeoutError, Exception):
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self._relisting is not None:
            self._relisting.cancel()
        if self.state != "stopped":
            self._set("stopped", None)

    # --- the supervisor ------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._closing:
            was_ready = await self._life()
            if self._closing:
                break
            self._failures = 1 if was_ready else self._failures + 1
            delay = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (self._failures - 1))
            self._retry_at = time.monotonic() + delay
            if self._failures > EAGER_RESTARTS:
                log.warning("%s failed %d times in a row; it starts again when next needed",
                            self.name, self._failures)
                return
            log.info("%s: starting again in %g s", self.name, delay)
            self._dead.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._dead.wait(), delay)  # close() cuts the wait short
            if self._closing:
                break
            self._set("starting", None)
        if self.state != "stopped":
            self._set("stopped", None)

    async def _life(self) -> bool:
        """One start and the serving after it; True if it got to `ready`."""
        self._dead = asyncio.Event()
        self._dead_why = ""
        ready = False
        try:
            async with contextlib.AsyncExitStack() as stack:
                # Said when the time is up, not when the SDK has stopped what did not start
                # (it waits for the process to exit, in a shielded scope, seconds at worst).
                late = asyncio.get_running_loop().call_later(
                    self.cfg.startup_timeout_s, lambda: self._fail(self._late_words()))
                try:
                    async with asyncio.timeout(self.cfg.startup_timeout_s):
                        client = await self._connect(stack)
                        tools = await _list_all(client)
                except TimeoutError:
                    raise McpUnavailable(self._late_words()) from None
                finally:
                    late.cancel()
                self.client, self.tools = client, tools
                self.starts += 1
                ready = True
                self._set("ready", None)
                log.info("%s ready: %d tools (%s)", self.name, len(tools),
                         "sandboxed" if self.sandboxed else "not sandboxed")
                await self._serve(client)
        except McpUnavailable as exc:
            self._fail(str(exc))
        except Exception as exc:
            self._fail(self._failure_words(exc, ready))
        finally:
            self.client = None
        if not self._closing and self.state == "ready":
            self._fail(f"{self.label} {self._dead_why or 'stopped'}{self._stderr_words()}")
        return ready

    async def _connect(self, stack: contextlib.AsyncExitStack) -> Any:
        from mcp import Client, Implementation

        info = Implementation(name="turnkey", version=__version__)
        transport: Any
        if self.cfg.url:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            async def seen(response: httpx2.Response) -> None:
                if response.status_code >= 400:  # the SDK's error does not say which
                    self._http_status = f"HTTP {response.status_code} {response.reason_phrase}".strip()

            self._http_status = ""
            http = await stack.enter_async_context(httpx2.AsyncClient(
                headers=self._headers(), timeout=httpx2.Timeout(30.0, read=self.cfg.timeout_s + 30),
                event_hooks={"response": [seen]}))
            transport = streamable_http_client(self.cfg.url, http_client=http)
            self.sandboxed = False
        else:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            launch = self._launch()
            self.sandboxed = launch.sandboxed
            self.log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            # The server's stderr goes to its log (a small local file: opened on the loop).
            errlog = stack.enter_context(open(self.log_path, "a", encoding="utf-8"))  # noqa: SIM115, ASYNC230
            errlog.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {self.name}\n")
            errlog.flush()
            params = StdioServerParameters(command=launch.argv[0], args=launch.argv[1:],
                                           env=launch.env, cwd=launch.cwd)
            transport = stdio_client(params, errlog=errlog)
        client = Client(transport, client_info=info, message_handler=self._on_message, cache=None)
        await stack.enter_async_context(client)
        return client

    async def _serve(self, client: Any) -> None:
        listen = asyncio.create_task(self._listen(client), name=f"mcp-{self.name}-listen")
        try:
            while not self._dead.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._dead.wait(), PING_S)
                if self._dead.is_set() or self.inflight:
                    continue
                try:
                    await asyncio.wait_for(self._ping(client), PING_TIMEOUT_S)
                except TimeoutError:
                    self._gone(f"did not answer a ping within {PING_TIMEOUT_S:g} s")
                except Exception as exc:
                    self._gone("stopped" if _closed(exc) else f"failed a ping ({type(exc).__name__})")
        finally:
            listen.cancel()
            await asyncio.gather(listen, return_exceptions=True)

    async def _ping(self, client: Any) -> None:
        """Is it there?  `ping` on a handshake-era connection; 2026-07-28 removed it, so there
        the tool listing is asked for instead (and taken, if it changed)."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            tools = await _list_all(client)
            if _names(tools) != _names(self.tools or []) or _schemas(tools) != _schemas(self.tools or []):
                self.tools = tools
                self._on_change(self)
        else:
            await client.send_ping()

    async def _listen(self, client: Any) -> None:
        """2026-07-28 servers announce list changes on a `subscriptions/listen` stream; older
        ones send `notifications/tools/list_changed`, which `_on_message` takes."""
        from mcp.client.subscriptions import ListenNotSupportedError

        caps = client.server_capabilities.tools
        if caps is None or not caps.list_changed:
            return
        try:
            async with client.listen(tools_list_changed=True) as sub:
                async for _event in sub:
                    self._tools_changed()
        except ListenNotSupportedError:
            return
        except Exception as exc:
            log.debug("%s: its change stream ended: %r", self.name, exc)

    async def _on_message(self, message: Any) -> None:
        from mcp import types

        if isinstance(message, types.ToolListChangedNotification):
            self._tools_changed()
        elif isinstance(message, Exception):
            log.debug("%s: %r", self.name, message)

    def _tools_changed(self) -> None:
        self._stale = True
        if self._relisting is None or self._relisting.done():
            self._relisting = asyncio.create_task(self._relist_changed(), name=f"mcp-{self.name}-relist")

    async def _relist_changed(self) -> None:
        while self._stale:  # a change announced during a listing lists again
            self._stale = False
            await self.relist()

    async def settled(self) -> None:
        """Returns once a listing that a change announcement started has ended (at most
        RELIST_TIMEOUT_S): a request built after a call that changed the list offers the new
        one.  (The announcement reaches this process before the call's result does.)"""
        task = self._relisting
        if task is not None and not task.done():
            with contextlib.suppress(TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(task), RELIST_TIMEOUT_S)

    # --- state and words ---------------------------------------------------------------

    def _gone(self, why: str) -> None:
        if not self._dead.is_set():
            self._dead_why = why
            self._dead.set()

    def _fail(self, error: str) -> None:
        log.warning("%s", error)
        self._set("failed", error)

    def _set(self, state: McpState, error: str | None) -> None:
        if (state, error) == (self.state, self.error):
            return
        self.state, self.error = state, error
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()
        self._on_change(self)

    def _late_words(self) -> str:
        return (f"{self.label} did not finish starting within {self.cfg.startup_timeout_s:g} s"
                f"{self._stderr_words()}")

    def _down_words(self) -> str:
        error = self.error or f"{self.label} is not running"
        wait = self._retry_at - time.monotonic()
        if self._task is not None and not self._task.done() and wait > 0:
            return f"{error}; Turnkey starts it again in {wait:.0f} s"
        if wait > 0:
            return f"{error}; Turnkey tries it again in {wait:.0f} s"
        return error

    def _failure_words(self, exc: BaseException, was_ready: bool) -> str:
        exc = _innermost(exc)
        if isinstance(exc, McpUnavailable):
            return str(exc)
        what = "stopped" if was_ready else "could not start"
        if isinstance(exc, FileNotFoundError):
            return f"{self.label} could not start: {exc.strerror}: {exc.filename}"
        detail = str(exc) or type(exc).__name__
        if self.cfg.url:
            detail = f"{type(exc).__name__}: {detail}"
            if self._http_status:
                detail += f" ({self._http_status})"
        return self._redact(f"{self.label} {what}: {detail[:300]}{self._stderr_words()}")

    def _stderr_words(self) -> str:
        """The server's last lines on stderr, for the reason people read."""
        if self.cfg.url:
            return ""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, 2)
                size = f.tell()
                f.seek(max(0, size - STDERR_TAIL_BYTES))
                tail = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        lines = tail.split("\n--- ")[-1].splitlines()[1:]  # this start's lines only
        lines = [line.strip() for line in lines if line.strip()][-3:]
        return f" (its last words: {self._redact(' / '.join(lines))[:500]})" if lines else ""


def progress_line(done: float, total: float | None, message: str | None) -> str:
    """A progress notification as a line of the call's live output: `[3/10] message`."""
    def number(x: float) -> str:
        return f"{x:g}"

    where = f"[{number(done)}/{number(total)}]" if total else f"[{number(done)}]"
    words = " ".join((message or "").split())[:500]
    return f"{where} {words}\n" if words else f"{where}\n"


def warm() -> None:
    """Imports what a connection uses (blocking: for a thread at start-up)."""
    import httpx2  # noqa: F401
    import jsonschema  # noqa: F401
    import mcp
    import mcp.client.stdio
    import mcp.client.streamable_http
    import mcp.client.subscriptions  # noqa: F401


async def _list_all(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _names(tools: list[Any]) -> list[str]:
    return [t.name for t in tools]


def _schemas(tools: list[Any]) -> list[Any]:
    return [(t.description, t.input_schema) for t in tools]


def _closed(exc: BaseException) -> bool:
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED

    exc = _innermost(exc)
    if isinstance(exc, MCPError):
        return exc.error.code == CONNECTION_CLOSED and "closed" in exc.error.message.lower()
    return _transport_error(exc)


def _transport_error(exc: BaseException) -> bool:
    import anyio

    return isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | EOFError
                      | ConnectionError)


def _innermost(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio's task groups wrap what they raise)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
