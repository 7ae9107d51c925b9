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
import logging
import time
from pathlib import Path
from typing import TypeVar

from PySide6.QtCore import QObject, Signal

from desktop.qt.compat import emit
from shared import protocol as p
from shared.client import RESYNC, STATE, BackendNotFound, Client, ClientState, Incoming, Resync
from shared.launcher import running, start_backend
from shared.methods import Request, SessionResume, SessionUnsubscribe
from shared.remote import RemoteTarget

log = logging.getLogger("desktop.link")

R = TypeVar("R")


class Link(QObject):
    received = Signal(object)  # every event (an Incoming), as the shared client delivers it
    state = Signal(str)  # connecting, connected, reconnecting, starting, failed
    failed = Signal(str)  # a message for the user when the backend cannot be reached

    def __init__(self, data_dir: Path, restart_after_s: float | None = 3.0,
                 remote: RemoteTarget | None = None) -> None:
        super().__init__()
        self.data_dir = data_dir
        self.restart_after_s = restart_after_s
        self.client = Client(data_dir, name="turnkey-desktop", remote=remote)
        self.client.handlers.append(self._on_event)
        self.current = "connecting"
        self.follows: dict[str, int] = {}
        self.epoch: int | None = None  # of the backend process we are connected to
        self._watch: asyncio.Task[None] | None = None
        self._starting: asyncio.Task[None] | None = None

    @property
    def server(self) -> p.InitializeResult | None:
        return self.client.server

    def _epoch(self) -> int | None:
        return self.client.server.epoch if self.client.server is not None else None

    @property
    def remote_host(self) -> str:
        """The remote backend's host, "" for this computer's: windows say where they are."""
        return self.client.remote.host if self.client.remote is not None else ""

    async def start(self) -> None:
        """Connects, starting the backend first (detached) when nothing answers (a remote
        backend is never started from here)."""
        self._set("connecting")
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

    async def switch(self, remote: RemoteTarget) -> None:
        """Moves this link to a remote backend: connects there first (raising, with nothing
        changed, when that fails), then drops the old connection.  The caller has closed the
        windows that followed sessions of the old backend."""
        client = Client(self.data_dir, name="turnkey-desktop", remote=remote)
        await client.connect()
        old, self.client = self.client, client
        if self._watch is not None:
            self._watch.cancel()
        old.handlers.clear()
        client.handlers.append(self._on_event)
        self.follows.clear()
        self.epoch = self._epoch()
        self._set("connected")
        await old.close()

    async def close(self) -> None:
        for task in (self._watch, self._starting):
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
