"""One backend's messaging doors, kept current for every widget that shows them.

A `DoorWatch` belongs to one link (a child of it, found with `DoorWatch.of(link)`, so the
sidebar, the conversations and the settings page share one listing and one call).  It asks
`door.list` whenever its link connects (the first time and after every reconnection, perhaps
to a new backend process), and applies each session-less `door.state` event as it comes.
A backend that predates doors answers METHOD_NOT_FOUND: it has none.  A `door.state` also
comes when a room is bound to a session (its first message, `/new`), so the sessions' marks
follow without asking again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import shiboken6
from PySide6.QtCore import QObject, Signal

from desktop.qt.aio import spawn
from desktop.qt.compat import emit
from desktop.state.doors import DoorBook
from shared import protocol as p
from shared.client import Incoming, RpcError
from shared.errors import ErrorCode
from shared.methods import DoorList

log = logging.getLogger("desktop")
NAME = "doorWatch"

if TYPE_CHECKING:
    from desktop.link import Link



class DoorWatch(QObject):
    changed = Signal()  # the doors, their states or their rooms changed

    def __init__(self, link: Link) -> None:
        super().__init__(link)
        self.setObjectName(NAME)
        self.link = link
        self.book = DoorBook()
        self.loaded = False  # door.list answered at least once
        self._since: list[p.DoorStatus] | None = None  # events while a listing is on its way
        self._more = False  # asked to list again while a listing was on its way
        link.received.connect(self._on_event)
        link.state.connect(self._on_state)
        if link.current == "connected":
            self.reload()

    @classmethod
    def of(cls, link: Link) -> DoorWatch:
        """The link's watch, made (and listing) the first time it is asked for."""
        found = link.findChild(DoorWatch, NAME)
        return found if isinstance(found, DoorWatch) else cls(link)

    @property
    def doors(self) -> list[p.DoorStatus]:
        return self.book.listed()

    def rooms_of(self, session_id: str) -> list[tuple[p.DoorStatus, p.DoorRoom]]:
        return self.book.rooms_of(session_id)

    def reload(self) -> None:
        """Lists the doors now, or (one listing at a time, so an older answer never lands
        over a newer one) once the listing under way is in."""
        if self._since is not None:
            self._more = True
            return
        self._since = []
        spawn(self._load(), lambda words: log.warning("could not list the doors: %s", words))

    async def _load(self) -> None:
        try:
            result = await self.link.call(DoorList())
        except RpcError as exc:
            if exc.code != ErrorCode.METHOD_NOT_FOUND:
                raise
            doors: list[p.DoorStatus] = []  # a backend from before doors
        else:
            doors = result.doors
        finally:
            since, self._since = self._since, None
            if self._more and shiboken6.isValid(self):
                self._more = False
                self.reload()
        if not shiboken6.isValid(self):
            return
        self.book.load(doors)
        for door in since or []:  # newer than (or the same as) the listing's
            self.book.update(door)
        self.loaded = True
        emit(self.changed)

    def saw(self, door: p.DoorStatus) -> None:
        """A door as a call answered it (door.set), shown at once; a `door.state` that already
        said something newer of it is kept."""
        known = self.book.doors.get(door.name)
        if known is not None and known.since > door.since:
            return
        if self._since is not None:
            self._since.append(door)
        self.book.update(door)
        emit(self.changed)

    def _on_event(self, event: Incoming) -> None:
        if not isinstance(event.data, p.DoorEvent):
            return
        door = event.data.door
        if self._since is not None:
            self._since.append(door)
        self.book.update(door)
        emit(self.changed)

    @property
    def away(self) -> bool:
        """The backend is not connected now: what the watch holds is as last seen."""
        return self.link.current != "connected"

    def _on_state(self, state: str) -> None:
        if state == "connected":
            self.reload()
        elif self.book.doors:
            emit(self.changed)  # shown as last seen until the backend answers again
