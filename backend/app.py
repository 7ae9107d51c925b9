"""The backend process: wires store, authority, turns and server together, and its lifecycle.

Start-up order matters: lock the folder, migrate, bump the epoch, recover
what the previous process left, listen, publish backend.json (all before
READY).  Only after READY, in the background, the rest is built
(`backend/build.py`: its import is most of the start-up's cost, and runs in a
thread): orphaned tool processes are killed, then the runner, tools,
compressor, authority and services are made, queued work starts draining and
the scheduler starts; then, in a thread, the default provider's HTTP stack
loads (`Providers.warm`).  The client that started this process connects and
is answered `initialize` meanwhile; its other calls wait for the build
(`backend/server/gate.py`), so nothing is admitted before recovery and the
build are done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import ssl
import sys
import time
import types
from pathlib import Path
from typing import TYPE_CHECKING

from backend import wire
from backend.authority.recovery import recover
from backend.config import ConfigFile
from backend.errors import StoreUnavailable
from backend.host import undumpable
from backend.ids import now
from backend.providers.registry import Providers, summary
from backend.secrets import Secrets
from backend.server import discovery
from backend.server.auth import TOKEN_SIGNAL, Authenticator
from backend.server.dispatch import Dispatcher
from backend.server.fanout import Hub
from backend.server.gate import Gate
from backend.server.listener import Listener
from backend.server.loopwatch import GcWatch, LoopWatch
from backend.server.tls import TlsFiles, self_signed, server_context
from backend.server.tls import fingerprint as cert_fingerprint
from backend.store import admissions, peers, runtime, schedules
from backend.store.db import POSTGRESQL, Database, SqliteDatabase, Tx
from backend.store.signals import Signals
from backend.tools import sandbox
from shared import logs
from shared.methods import METHODS
from shared.protocol import (
    EVENTS,
    PROTOCOL_VERSION,
    Capabilities,
    DoorEvent,
    DoorStatus,
    McpServerEvent,
    McpServerStatus,
    MemoryChanged,
    MemoryFile,
    MemoryTarget,
    SkillsChanged,
    SkillScope,
)
from shared.remote import is_loopback

if TYPE_CHECKING:
    from backend.authority.attachments import Attachments
    from backend.authority.questions import Questions
    from backend.authority.queue import SessionAuthority
    from backend.authority.schedules import Scheduler
    from backend.authority.takeover import Takeover
    from backend.doors.manager import Doors
    from backend.mcp.pool import McpPool
    from backend.tools import memory

log = logging.getLogger("backend")

READY = "TURNKEY_BACKEND_READY"
EXIT_DECLARED_DEAD = 75  # EX_TEMPFAIL: peers took this backend for dead; start it again
SHUTDOWN_GRACE_S = 10.0
# A drain (SIGUSR1: a package upgrade or removal) waits this long at most for running turns
# before the ordinary stop, which interrupts what still runs.
DRAIN_LIMIT_S = 600.0
DRAIN_POLL_S = 0.25
IDLE_CHECK_S = 30.0
# Tests only (tests/integration/test_ready_first.py): the build after READY waits until this
# file exists, and fails if it says "fail".
BUILD_GATE_ENV = "TURNKEY_TEST_BUILD_GATE"
BUILD_GATE_POLL_S = 0.05


class Backend:
    def __init__(self, data_dir: Path, host: str = "127.0.0.1", port: int = 0,
                 tls: TlsFiles | None = None) -> None:
        self.data_dir = data_dir
        self.host = host
        self.port = port
        self.tls = tls
        self.config = ConfigFile(data_dir / "config.toml")
        self.db: Database = SqliteDatabase(data_dir / "state.db")  # or PostgreSQL: see start()
        self.secrets = Secrets(data_dir)
        self.providers = Providers(
            self.secrets, data_dir, lambda: self.config.config.local_model_idle_minutes
        )
        self.hub = Hub()
        self.epoch = 0
        self.started_at = time.time()  # epoch seconds (the SQLite store's backend.list row)
        self._stop = asyncio.Event()
        self._drain_task: asyncio.Task[None] | None = None
        self.exit_status = 0
        self._lock_fd: int | None = None
        self.listener: Listener | None = None
        self.authority: SessionAuthority | None = None
        self.loop_watch = LoopWatch(lambda: bool(self.authority and self.authority.busy()))
        self.gc_watch = GcWatch()
        self._building: asyncio.Task[None] | None = None
        self._queued: list[str] = []  # sessions recovery found queued: their drainers start
        self._box: sandbox.Sandbox | None = None
        self._auth: Authenticator | None = None
        self._signals: Signals | None = None  # on a PostgreSQL store
        self.gate: Gate | None = None
        self.mcp: McpPool | None = None
        self.scheduler: Scheduler | None = None
        self.takeover: Takeover | None = None  # peers on a shared PostgreSQL store
        self.doors: Doors | None = None
        self.attachments: Attachments | None = None
        self.questions: Questions | None = None

    async def start(self) -> int:
        """Everything before READY: the folder's lock, the store opened, migrated and recovered,
        the listener up and backend.json written.  What turns need is built after READY
        (`build_later`); until then only `initialize` is answered (`server/gate.py`)."""
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock_fd = discovery.acquire(self.data_dir)
        undumpable()
        config = self.config.load()
        if config.store:
            from backend.store.pg import PgDatabase  # psycopg is loaded only for this store
            self.db = PgDatabase(config.store)
        # One empty command in the full profile (~10 ms, a child process): it runs while the
        # store opens, and is waited for whatever the opening does, so it leaves no child.
        probing = asyncio.create_task(sandbox.probe(), name="sandbox-probe")
        try:
            self._queued = await self._open_store()
        finally:
            found = await probing
        self.db.publisher = wire.announcing(self.hub.publish)
        if not found.available:
            log.warning("commands run without a sandbox: %s", found.reason)
        self._box = sandbox.Sandbox(found, self.data_dir, self._sandbox_settings)
        token = secrets.token_urlsafe(32)
        self._auth = auth = Authenticator(self.db, token)
        if self.db.dialect == POSTGRESQL:
            # Other backends' signals, by kind: a token to read again (an interrupt too, once
            # the build has made the takeover: no turn runs here before it).
            self._signals = Signals()
            self._signals.on(TOKEN_SIGNAL, auth.on_signal)
            self.db.on_signal = self._signals
        self.gate = Gate(self.epoch, self._early_capabilities)
        self.listener = Listener(
            Dispatcher(self.gate, auth), self.hub, auth, lambda: self.config.config.allowed_origins,
            config.max_frame_bytes,
        )
        context, fingerprint = self._tls_context()
        self.port = await self.listener.start(self.host, self.port, context)
        discovery.publish(self.data_dir, {
            "pid": os.getpid(), "port": self.port, "token": token,
            "protocol": PROTOCOL_VERSION, "epoch": self.epoch, "started_at": now(),
            "host": self.host, **({"tls_fingerprint": fingerprint} if fingerprint else {}),
        })
        self.loop_watch.start()
        self.gc_watch.start()
        log.info("backend pid %d epoch %d listening on %s:%d", os.getpid(), self.epoch,
                 self.host, self.port)
        return self.port

    def build_later(self) -> None:
        """After READY: builds what turns need, then warms the provider's HTTP stack."""
        self._building = asyncio.create_task(self._build(), name="build")

    async def _build(self) -> None:
        gate, box, auth = self.gate, self._box, self._auth
        assert gate is not None
        assert box is not None
        assert auth is not None
        try:
            await _test_gate(os.environ.get(BUILD_GATE_ENV))
            # The import is most of the cost (~200 ms): in a thread, so the loop answers
            # connects and `initialize` meanwhile.
            built = await asyncio.to_thread(_import_build)
            methods = built.build(self, box, auth, self._signals)
            await self._start_built()
        except Exception as exc:
            log.error("building the backend's parts failed; stopping", exc_info=True)
            gate.fail(f"the backend could not start: {exc!r}; see the backend log")
            self.request_stop_soon()
            return
        gate.open(methods)
        log.info("built what turns need")
        await self._warm()

    async def _start_built(self) -> None:
        """Starts the built parts in order, as start-up did before READY."""
        assert self.authority is not None
        assert self.scheduler is not None
        assert self.doors is not None
        assert self.attachments is not None
        assert self.questions is not None
        self.authority.start(self._queued)
        # After recovery and the drainers: a firing missed while down is admitted now, behind
        # what was queued before the crash.
        self.scheduler.start()
        if self.takeover is not None:
            self.takeover.start()
        await self.doors.start(self.config.config)  # after the drainers: may start a turn at once
        self.attachments.start()  # removes what no prompt named within a day, hourly
        self.questions.start()  # expires questions whose turn a restart ended, hears lost answers

    def _early_capabilities(self) -> Capabilities:
        """`initialize`'s capabilities before the build: no MCP server has started yet."""
        assert self._box is not None
        return Capabilities(
            methods=sorted(METHODS), events=sorted(EVENTS),
            provider=summary(self.providers, self.config.config), sandbox=self._box.summary(),
            mcp=[McpServerStatus(name=name, transport=cfg.transport,
                                 state="stopped" if cfg.enabled else "disabled",
                                 enabled=cfg.enabled)
                 for name, cfg in sorted(self.config.config.mcp.servers.items())])

    def _tls_context(self) -> tuple[ssl.SSLContext | None, str]:
        """The listener's TLS context and its certificate's fingerprint (None, "" for plain
        ws on loopback).  Off loopback with no certificate given, the folder's self-signed
        one, made now (under the folder's lock, so two starts never make two halves of a
        pair).  The fingerprint is logged: a person pairing by hand reads it there."""
        if self.tls is None and not is_loopback(self.host):
            self.tls = self_signed(self.data_dir, self.host)
        if self.tls is None:
            return None, ""
        fingerprint = cert_fingerprint(self.tls.cert)
        context = server_context(self.tls)
        log.info("serving TLS with %s, SHA-256 fingerprint %s", self.tls.cert, fingerprint)
        print(f"turnkey-backend: TLS certificate SHA-256 fingerprint {fingerprint}",
              file=sys.stderr, flush=True)
        return context, fingerprint

    async def _open_store(self) -> list[str]:
        """Opens and migrates the store, bumps the epoch and recovers; returns what is queued."""
        await self.db.open()
        try:
            self.epoch = await self.db.write(runtime.bump_epoch)
            if self.db.dialect != POSTGRESQL:
                return await self.db.write(lambda tx: recover(tx, self.epoch))
            def join(tx: Tx) -> list[str]:  # other live backends keep their turns
                peers.join(tx, self.epoch)
                return recover(tx, self.epoch, peers.live_epochs(tx) - {self.epoch})

            return await self.db.write(join)
        except StoreUnavailable as exc:  # e.g. a damaged page the opening did not touch
            raise self.db.refusal(exc) from None

    async def _warm(self) -> None:
        try:
            await asyncio.to_thread(self.providers.warm, self.config.config)
        except Exception as exc:  # the first call loads it then, and reports what fails
            log.warning("loading the provider's HTTP stack ahead failed: %r", exc)
        if self.config.config.mcp.servers:
            # The MCP SDK takes ~0.3-0.5 s to import (pydantic, starlette, ...): loaded here,
            # the first turn that starts a server does not wait for it.
            from backend.mcp.connection import warm as mcp_sdk_warm

            try:
                await asyncio.to_thread(mcp_sdk_warm)
            except Exception as exc:
                log.warning("loading the MCP SDK ahead failed: %r", exc)

    def mcp_status(self, status: McpServerStatus) -> None:
        """An MCP server's `mcp.server` event, to every reader (it is no session's)."""
        self.hub.publish(wire.announcement(McpServerEvent(server=status)))

    def door_state(self, status: DoorStatus) -> None:
        """A door's `door.state` event, to every reader (it is no session's)."""
        self.hub.publish(wire.announcement(DoorEvent(door=status)))

    def memory_changed(self, target: MemoryTarget, usage: memory.Usage) -> None:
        """A notebook's `memory.changed` event, to every reader (it is no session's)."""
        file = MemoryFile(text=usage.text, used=usage.used, limit=usage.limit)
        self.hub.publish(wire.announcement(MemoryChanged(target=target, file=file)))

    def skills_changed(self, name: str, scope: SkillScope, folder: str) -> None:
        """A skill's `skills.changed` event, to every reader (it is no session's)."""
        self.hub.publish(wire.announcement(SkillsChanged(name=name, scope=scope, folder=folder)))

    def _sandbox_settings(self) -> tuple[bool, bool]:
        cfg = self.config.config.sandbox  # read per call: config.set applies at once
        return cfg.enabled, cfg.network

    def request_stop(self) -> None:
        self._stop.set()

    def request_drain(self) -> None:
        """SIGUSR1 (the package's prerm, before an upgrade replaces these files): no new turn
        starts here; once the running ones are done (one waiting on a person's approval or
        answer included: the person may answer), or after DRAIN_LIMIT_S, the backend stops.
        Input that arrives meanwhile is admitted and stays queued for the next start."""
        if self._drain_task is None and not self._stop.is_set():
            self._drain_task = asyncio.create_task(self._drain(), name="drain")

    async def _drain(self) -> None:
        log.info("draining: no new turn starts; stopping once the running turns are done")
        if self.authority is not None:
            self.authority.hold()
        deadline = time.monotonic() + DRAIN_LIMIT_S
        while time.monotonic() < deadline and self.authority is not None and self.authority.busy():
            await asyncio.sleep(DRAIN_POLL_S)
        self._stop.set()

    def declared_dead(self) -> None:
        """Peers on the shared store took this backend for dead and took over its sessions:
        it stops (a new start comes back with a new epoch); `serve` then exits with
        EXIT_DECLARED_DEAD so a supervisor or the app starts it again."""
        self.exit_status = EXIT_DECLARED_DEAD
        self._stop.set()

    def request_stop_soon(self) -> None:
        """For the shutdown method: lets its response leave before connections close."""
        asyncio.get_running_loop().call_later(0.1, self._stop.set)

    async def wait(self) -> None:
        idle = asyncio.create_task(self._idle_watch())
        try:
            await self._stop.wait()
        finally:
            idle.cancel()

    async def stop(self) -> None:
        """Finishes nothing new; settles running turns within the grace; closes cleanly.
        Also releases what a start that failed half-way took."""
        if self._building is not None and not self._building.done():
            self._building.cancel()  # what it made so far is stopped below
            with contextlib.suppress(asyncio.CancelledError):
                await self._building
        if self.gate is not None:
            self.gate.fail("the backend is stopping")
        if self.listener is not None:
            log.info("backend stopping")
            await self.listener.stop()
        if self.doors is not None:
            await self.doors.stop()  # no new prompts from a platform into a stopping queue
        if self.scheduler is not None:
            await self.scheduler.stop()  # before the authority: nothing fires into a stopping queue
        if self.takeover is not None:
            await self.takeover.stop()
        if self.authority is not None:
            await self.authority.stop(SHUTDOWN_GRACE_S)
        if self.mcp is not None:
            await self.mcp.close()  # after the turns: a call still running was stopped with them
        if self.attachments is not None:
            await self.attachments.stop()
        if self.questions is not None:
            await self.questions.stop()
        await self.loop_watch.stop()
        self.gc_watch.stop()
        await self.providers.aclose()
        await self.db.close()
        discovery.withdraw(self.data_dir, os.getpid())
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    async def _idle_watch(self) -> None:
        """Exits after idle_exit_minutes with no client, no queued admission and no turn."""
        idle_since = time.monotonic()
        while True:
            minutes = self.config.config.idle_exit_minutes
            await asyncio.sleep(min(IDLE_CHECK_S, minutes * 60 / 4) if minutes else IDLE_CHECK_S)
            minutes = self.config.config.idle_exit_minutes
            # A door's people write with no front-end connected: it keeps the backend up.
            busy = bool(self.listener and self.listener.connections) or bool(
                self.authority and self.authority.busy()
            ) or bool(self.doors and self.doors.active) or await self._has_queued()
            if busy or not minutes:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since >= minutes * 60:
                log.info("idle for %g minutes; exiting", minutes)
                self.request_stop()
                return

    async def _has_queued(self) -> bool:
        """Queued input, or a schedule still to fire: an exited backend fires nothing (it
        would fire late, as a missed firing, when a front-end next starts it)."""
        try:
            return await self.db.read(
                lambda tx: admissions.any_queued(tx) or schedules.earliest(tx) is not None)
        except StoreUnavailable:
            return True  # cannot tell: stay up rather than leave queued work behind


SWITCH_INTERVAL_S = 0.001  # how often another thread may take the GIL (default 0.005)


def _import_build() -> types.ModuleType:
    """`backend.build`, imported by a plain statement (in a thread) so that PyInstaller's
    analysis, which follows import statements, puts it in the bundle."""
    import backend.build

    return backend.build


async def _test_gate(path: str | None) -> None:
    """Tests: waits for the file at `path` (see BUILD_GATE_ENV); nothing when unset."""
    if not path:
        return
    gate = Path(path)
    while not await asyncio.to_thread(gate.exists):
        await asyncio.sleep(BUILD_GATE_POLL_S)
    if (await asyncio.to_thread(gate.read_text)).strip() == "fail":
        raise RuntimeError("the test's build gate said fail")


async def serve(data_dir: Path, host: str, port: int, tls: TlsFiles | None = None) -> int:
    """Runs the backend until shutdown or SIGTERM/SIGINT; returns the exit status."""
    # The event loop shares the GIL with the store's threads and, while a long session is
    # compressed, a worker: at CPython's default 5 ms interval the loop waited a whole interval
    # for the GIL after each system call, and stalled 50-80 ms under a 100k-row compression;
    # at 1 ms it stalled 13-17 ms, with no cost measured per turn (tests/bench/README.md).
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    backend = Backend(data_dir, host, port, tls)
    try:
        bound = await backend.start()
    except discovery.AlreadyRunning as exc:
        print(f"turnkey-backend: {exc}", file=sys.stderr)
        return 3
    except BaseException:
        # Whatever stopped the start, release what it took (the store's threads, the
        # folder's lock) so the process exits and the next start is not told it runs.
        with contextlib.suppress(Exception):
            await backend.stop()
        raise
    loop = asyncio.get_running_loop()
    logs.asyncio_errors(loop)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, backend.request_stop)
    loop.add_signal_handler(signal.SIGUSR1, backend.request_drain)
    print(f"{READY} port={bound}", flush=True)
    backend.build_later()
    try:
        await backend.wait()
    finally:
        with contextlib.suppress(Exception):
            await backend.stop()
    return backend.exit_status
