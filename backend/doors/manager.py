"""The backend's doors: built from `[doors.*]` at start, stopped with the backend.

A door's secret (its access token) is read from the keyring here and handed to its
platform module; it never reaches the store, events or logs.  A door whose secret is
missing is listed as `failing`, saying what to store, and the backend runs on.
While a door is enabled the backend does not exit when idle: messages from the
platform arrive with no front-end connected.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from backend.authority.queue import SessionAuthority
from backend.doors.door import Door, Settings, home_cwd
from backend.secrets import Secrets
from backend.store import doors as store
from backend.store.db import Database
from backend.tools.approvals import Approvals
from shared.config import Config, MatrixDoorConfig
from shared.protocol import DoorStatus

log = logging.getLogger("doors")


class Doors:
    def __init__(self, db: Database, authority: SessionAuthority, approvals: Approvals,
                 secrets: Secrets, default_model: Callable[[], str],
                 interrupt: Callable[[str], Any], on_state: Callable[[DoorStatus], None]) -> None:
        self.db = db
        self.authority = authority
        self.approvals = approvals
        self.secrets = secrets
        self.default_model = default_model
        self.interrupt = interrupt
        self.on_state = on_state
        self.doors: dict[str, Door] = {}
        self.refused: dict[str, DoorStatus] = {}  # configured but unable to start, and why

    @property
    def active(self) -> bool:
        return bool(self.doors)

    async def start(self, config: Config) -> None:
        matrix = config.doors.matrix
        if matrix is not None and matrix.enabled:
            await self._start_matrix(matrix)

    async def _start_matrix(self, cfg: MatrixDoorConfig) -> None:
        token = await asyncio.to_thread(self.secrets.get, cfg.access_token_secret)
        if not token:
            self.refused["matrix"] = DoorStatus(
                name="matrix", platform="matrix", state="failing", account=cfg.user_id,
                since=time.time(), allowed_users=sorted(cfg.allowed_users),
                detail=(f"no access token stored under {cfg.access_token_secret!r}: store the "
                        f"agent account's token with `turnkey secret set {cfg.access_token_secret}` "
                        "and restart the backend"))
            log.warning("door matrix: %s", self.refused["matrix"].detail)
            return
        try:
            from backend.doors.matrix import MatrixTransport
        except ImportError as exc:  # matrix-nio missing from a hand-made install
            self.refused["matrix"] = DoorStatus(
                name="matrix", platform="matrix", state="failing", account=cfg.user_id,
                since=time.time(), detail=f"the Matrix client library is not installed ({exc})")
            return
        transport = MatrixTransport(cfg.homeserver, cfg.user_id, token, cfg.device_id)
        settings = Settings(name="matrix", allowed_users=frozenset(cfg.allowed_users),
                            rooms=dict(cfg.rooms), cwd=home_cwd(cfg.cwd),
                            edit_interval_s=cfg.edit_interval_s)
        door = Door(settings, transport, self.db, self.authority, self.approvals,
                    self.default_model, self.interrupt, self.on_state)
        self.doors["matrix"] = door
        door.start()
        log.info("door matrix: serving %s as %s for %d allowed user(s)", cfg.homeserver,
                 cfg.user_id, len(cfg.allowed_users))

    def observe(self, item: Any) -> None:
        for door in self.doors.values():
            door.observe(item)

    async def statuses(self) -> list[DoorStatus]:
        found = list(self.refused.values())
        for name, door in self.doors.items():
            bound = await self.db.read(functools.partial(store.bindings, door=name))
            found.append(door.status(bound))
        return sorted(found, key=lambda s: s.name)

    async def stop(self) -> None:
        for door in self.doors.values():
            await door.stop()
        self.doors.clear()

