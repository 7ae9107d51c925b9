"""The desktop's one connection to the backend, as Qt signals over the shared async client.

All I/O is asyncio on the qasync loop; nothing here blocks the GUI thread
(starting the backend waits for its READY line in a worker thread).  Windows
open sessions through `open_session`/`close_session`, which count how many
windows follow each session so the same session in two windows is one
subscription, and events reach every window through the `event` signal.

If the connection drops, the shared client reconnects with backoff and
replays each followed session from its last seq.  If the backend process is
gone (not merely restarting), the link starts a new one after
`restart_after_s`, detached, so quitting the app never stops running turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import subprocess
import time
from pathlib import Path
from typing import TypeVar

from PySide6.QtCore import QObject, Signal
from websockets.exceptions import ConnectionClosed

from desktop.qt.compat import emit
from shared import protocol as p
from shared.client import (
    BACKOFF_S,
    RESYNC,
    STATE,
    BackendNotFound,
    Client,
    ClientState,
    Incoming,
    Resync,
    RpcError,
    refusal,
)
from shared.launcher import running, start_backend, wait_ready
from shared.methods import Request, SessionResume, SessionUnsubscribe
from shared.remote import RemoteTarget

log = logging.getLogger("desktop.link")

R = TypeVar("R")


class Link(QObject):
    received = Signal(object)  # every event (an Incoming), as the shared client delivers it
    state = Signal(str)  # connecting, connected, reconnecting, starting, failed
    failed = Signal(str)  # a message for the user when the backend cannot be reached
    refused = Signal(str)  # why the backend turns us away now ("" once it no longer does)

    def __init__(self, data_dir: Path, restart_after_s: float | None = 3.0,
                 remote: RemoteTarget | None = None, key: str = "local",
                 name: str = "") -> None:
        """`key` names the backend among the app's (desktop/pairings.py); `name` is what
        windows and notifications call a remote one ("" for this computer's)."""
        super().__init__()
        self.data_dir = data_dir
        self.key = key
        self.name = name
        self.refusal = ""  # why the backend refuses us now: "wrong certificate", …
        self.restart_after_s = restart_after_s
        self.client = Client(data_dir, name="turnkey-desktop", remote=remote)
        self.client.handlers.append(self._on_event)
        self.current = "connecting"
        self.follows: dict[str, int] = {}
        self.epoch: int | None = None  # of the backend process we are connected to
        self._watch: asyncio.Task[None] | None = None
        self._starting: asyncio.Task[None] | None = None
        self._dialing: asyncio.Task[None] | None = None
        # The backend the app's launch started before loading Qt (desktop/app.py): `start`
        # waits for its READY line instead of starting another.
        self.spawned: subprocess.Popen[bytes] | None = None

    @property
    def server(self) -> p.InitializeResult | None:
        return self.client.server

    def _epoch(self) -> int | None:
        return self.client.server.epoch if self.client.server is not None else None

    @property
    def remote_host(self) -> str:
        """The remote backend's host, "" for this computer's: windows say where they are."""
        return self.client.remote.host if self.client.remote is not None else ""

    @property
    def title(self) -> str:
        """The sidebar's name for it: "This computer", "build-box (10.0.0.5)"."""
        host = self.remote_host
        if not host:
            return "This computer"
        return host if self.name in ("", host) else f"{self.name} ({host})"

    @property
    def where(self) -> str:
        """What windows call this backend: its pairing's name, else its host, else ""."""
        return self.name or self.remote_host

    async def start(self) -> None:
        """Connects, starting the backend first (detached) when nothing answers (a remote
        backend is never started from here)."""
        self._set("connecting")
        if self.spawned is not None:
            proc, self.spawned = self.spawned, None
            self._set("starting")
            await asyncio.to_thread(wait_ready, proc, self.data_dir)  # or the race's winner
        try:
            await self.client.connect()
        except BackendNotFound:
            if self.client.remote is not None:
                self._set("failed")
                raise
            self._set("starting")
            await start_backend(self.data_dir)
            await self.client.connect()
        self.epoch = self._epoch()
        self._set("connected")

    def dial(self) -> None:
        """Starts `keep_connecting` in the background (a remote backend's section)."""
        self._dialing = asyncio.ensure_future(self.keep_connecting())

    async def keep_connecting(self) -> None:
        """A remote backend: connects, and until it answers keeps trying with the client's
        backoff, saying "reconnecting" (and why it is refused, when it is); from then on the
        client reconnects and replays by itself.  Never starts a backend."""
        self._set("connecting")
        for attempt in itertools.count():
            try:
                await self.connect_once()
            except (BackendNotFound, ConnectionClosed, OSError, RpcError) as exc:
                log.info("the backend %s does not take us yet: %s", self.key, exc)
                # (An RpcError: it answered `initialize` with an error, e.g. another protocol.)
                self.refuse(exc.message if isinstance(exc, RpcError) else refusal(exc))
                await asyncio.sleep(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
                continue
            break
        emit(self.received, Incoming(STATE, "", ClientState(state="connected")))

    async def connect_once(self) -> None:
        """One attempt, no backend started and no retry: raises what the client raised."""
        await self.client.connect()
        self.epoch = self._epoch()
        self._refused("")
        self._set("connected")

    def refuse(self, why: str) -> None:
        """Not connected: "reconnecting", and why the backend turns us away ("" when it merely
        does not answer)."""
        self._set("reconnecting")
        self._refused(why)

    async def close(self) -> None:
        for task in (self._watch, self._starting, self._dialing):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await self.client.close()

    async def call(self, request: Request[R], timeout: float | None = 60.0) -> R:
        return await self.client.call(request, timeout=timeout)

    # --- sessions ----------------------------------------------------------------

    async def open_session(self, session_id: str) -> p.ResumeResult:
        """`session.resume` for a window: the snapshot, and this connection follows the session."""
        result = await self.call(SessionResume(session_id=session_id))
        self.follows[session_id] = self.follows.get(session_id, 0) + 1
        marks = self.client.watermarks
        marks[session_id] = max(marks.get(session_id, 0), result.latest_seq)
        return result

    async def close_session(self, session_id: str) -> None:
        n = self.follows.get(session_id, 0) - 1
        if n > 0:
            self.follows[session_id] = n
            return
        self.follows.pop(session_id, None)
        self.client.watermarks.pop(session_id, None)
        with contextlib.suppress(Exception):
            await self.call(SessionUnsubscribe(session_id=session_id), timeout=5)

    # --- events ------------------------------------------------------------------

    def _on_event(self, event: Incoming) -> None:
        if event.type == STATE and isinstance(event.data, ClientState):
            state = event.data.state
            self._refused(event.data.refused if state != "connected" else "")
            self._set(state)
            epoch = self._epoch()
            if state == "connected" and epoch != self.epoch:
                # A new backend process: start-up recovery changed rows without events (calls
                # that were running are now `unknown`), so every open window reloads.
                self.epoch = epoch
                for sid in list(self.follows):
                    mark = self.client.watermarks.get(sid, 0)
                    emit(self.received, Incoming(RESYNC, sid, Resync(latest_seq=mark)))
            if state == "reconnecting" and self.restart_after_s is not None \
                    and self.client.remote is None and (self._watch is None or self._watch.done()):
                self._watch = asyncio.ensure_future(self._restart_if_gone())
        emit(self.received, event)

    def _refused(self, why: str) -> None:
        if why != self.refusal:
            self.refusal = why
            emit(self.refused, why)

    def _set(self, state: str) -> None:
        if state != self.current:
            self.current = state
            emit(self.state, state)

    async def _restart_if_gone(self) -> None:
        """Starts a backend when the one we knew is dead and none has replaced it."""
        assert self.restart_after_s is not None
        since = time.monotonic()
        while self.client.state == "reconnecting":
            await asyncio.sleep(0.5)
            if running(self.data_dir) is not None:
                since = time.monotonic()  # it is there; the client will get through
                continue
            if time.monotonic() - since < self.restart_after_s:
                continue
            self._set("starting")
            try:
                await start_backend(self.data_dir)
            except BackendNotFound as exc:
                log.warning("could not restart the backend: %s", exc)
                emit(self.failed, f"The Turnkey service could not be restarted: {exc}")
            since = time.monotonic()
