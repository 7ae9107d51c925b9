"""The backend's doors: built from `[doors.*]`, rebuilt when that config or a door's secret
changes, stopped with the backend.

A platform is one entry in PLATFORMS: how to make its transport from its config table
and its secret.  A door's secret (its access token) is read from the keyring here and
handed to its transport; it never reaches the store, events or logs.  A door that cannot
start (no secret stored, its library missing) is listed as `failing`, saying what to do,
and the backend runs on.  While a door is enabled the backend does not exit when idle:
messages from the platform arrive with no front-end connected.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from backend.authority.attachments import Attachments
from backend.authority.questions import Questions
from backend.authority.queue import SessionAuthority
from backend.doors.base import Transport
from backend.doors.door import Door, Settings, home_cwd
from backend.secrets import Secrets
from backend.store import doors as store
from backend.store.db import Database
from backend.tools.approvals import Approvals
from shared.config import Config, MatrixDoorConfig
from shared.protocol import DoorStatus

log = logging.getLogger("doors")

DoorConfig = MatrixDoorConfig  # the union of the platforms' config tables, as they are added


def _matrix(cfg: DoorConfig, token: str) -> Transport:
    from backend.doors.matrix import MatrixTransport  # matrix-nio loads only for this door

    return MatrixTransport(cfg.homeserver, cfg.user_id, token, cfg.device_id)


# name (its [doors.NAME] table) -> how to make its transport
PLATFORMS: dict[str, Callable[[DoorConfig, str], Transport]] = {"matrix": _matrix}


class Doors:
    def __init__(self, db: Database, authority: SessionAuthority, approvals: Approvals,
                 questions: Questions, secrets: Secrets, default_model: Callable[[], str],
                 interrupt: Callable[[str], Any], on_state: Callable[[DoorStatus], None],
                 attachments: Attachments | None = None) -> None:
        self.db = db
        self.attachments = attachments  # files sent in rooms are kept as uploads are
        self.authority = authority
        self.approvals = approvals
        self.questions = questions
        self.secrets = secrets
        self.default_model = default_model
        self.interrupt = interrupt
        self.on_state = on_state
        self.doors: dict[str, Door] = {}
        self.refused: dict[str, DoorStatus] = {}  # configured but unable to start, and why
        self._configs: dict[str, DoorConfig] = {}  # what each running or refused door was made of
        self._lock = asyncio.Lock()  # one rebuild at a time

    @property
    def active(self) -> bool:
        return bool(self.doors)

    async def start(self, config: Config) -> None:
        await self.apply(config)

    async def apply(self, config: Config, secret: str | None = None) -> None:
        """Brings the doors in line with `config`: a door whose table changed (or whose
        secret `secret` was just stored) is stopped and made again; one removed or disabled
        stops."""
        async with self._lock:
            wanted = {name: cfg for name in PLATFORMS
                      if (cfg := getattr(config.doors, name, None)) is not None and cfg.enabled}
            for name in sorted(set(self._configs) | set(wanted)):
                cfg = wanted.get(name)
                same = cfg is not None and self._configs.get(name) == cfg \
                    and (secret is None or cfg.access_token_secret != secret)
                if same:
                    continue
                await self._drop(name)
                if cfg is not None:
                    await self._start(name, cfg)

    async def _drop(self, name: str) -> None:
        self._configs.pop(name, None)
        self.refused.pop(name, None)
        door = self.doors.pop(name, None)
        if door is not None:
            await door.stop()

    async def _start(self, name: str, cfg: DoorConfig) -> None:
        self._configs[name] = cfg
        token = await asyncio.to_thread(self.secrets.get, cfg.access_token_secret)
        if not token:
            self._refuse(name, cfg, (
                f"no access token is stored under {cfg.access_token_secret!r}: store the agent "
                f"account's token with `turnkey secret set {cfg.access_token_secret}`"))
            return
        try:
            transport = PLATFORMS[name](cfg, token)
        except ImportError as exc:  # the platform's library is missing from this install
            self._refuse(name, cfg, f"the {name} client library is not installed ({exc})")
            return
        settings = Settings(name=name, allowed_users=frozenset(cfg.allowed_users),
                            rooms=dict(cfg.rooms), cwd=home_cwd(cfg.cwd),
                            edit_interval_s=cfg.edit_interval_s,
                            token_secret=cfg.access_token_secret)
        door = Door(settings, transport, self.db, self.authority, self.approvals, self.questions,
                    self.default_model, self.interrupt, self.on_state, self.attachments)
        self.doors[name] = door
        door.start()
        log.info("door %s: serving as %s for %d allowed user(s)", name, transport.account,
                 len(cfg.allowed_users))

    def _refuse(self, name: str, cfg: DoorConfig, why: str) -> None:
        status = DoorStatus(name=name, platform=name, state="failing", account=cfg.user_id,
                            since=time.time(), detail=why, allowed_users=sorted(cfg.allowed_users),
                            token_secret=cfg.access_token_secret)
        self.refused[name] = status
        log.warning("door %s: %s", name, why)
        self.on_state(status)

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
        async with self._lock:
            for name in list(self.doors):
                await self._drop(name)
