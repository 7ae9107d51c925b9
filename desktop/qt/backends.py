"""Every backend the app talks to: this computer's (or the one `--remote` named) and each
remembered remote pairing, one `Link` apiece.

Each link connects, reconnects and replays on its own (shared/client.py), so one backend
going down leaves the others untouched.  A session lives on exactly one backend; its id
says nothing about which, so the app remembers where it saw each one (`home`).
Pairings are kept across runs by desktop/pairings.py (the token in the keyring).
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from desktop import pairings
from desktop.link import Link
from desktop.pairings import Pairing
from desktop.qt.compat import emit
from shared.client import Incoming
from shared.remote import RemoteTarget

log = logging.getLogger("desktop")

NO_TOKEN = "no token in the keyring"  # (the sidebar then says to pair again)


class Backends(QObject):
    added = Signal(object)  # a Link
    removed = Signal(object)  # a Link, closing
    received = Signal(object, object)  # the Link, an Incoming: every backend's events

    def __init__(self, data_dir: Path, local: Link) -> None:
        super().__init__()
        self.data_dir = data_dir
        self.local = local  # the first: this computer's, or the one `--remote` named
        self.links: list[Link] = [local]
        self.pairings: dict[str, Pairing] = {}
        self.kept: dict[str, bool] = {}  # key -> remembered across runs (False: this run only)
        self.homes: dict[str, str] = {}  # session_id -> the key of the backend it lives on
        local.received.connect(lambda event: self._received(local, event))

    def link(self, key: str) -> Link | None:
        return next((link for link in self.links if link.key == key), None)

    def home(self, session_id: str) -> Link:
        """The backend a session lives on (this computer's when it was never seen)."""
        return self.link(self.homes.get(session_id, "")) or self.local

    @property
    def remotes(self) -> list[Link]:
        return self.links[1:]

    def restore(self) -> None:
        """The pairings remembered from earlier runs: each gets its section and starts
        connecting (a backend that does not answer is retried, said "reconnecting")."""
        for pairing in pairings.load(self.data_dir):
            if self.link(pairing.key) is not None:
                continue
            token = pairings.token_of(pairing)
            link = self._make(pairing, token or "")
            self.kept[pairing.key] = True
            self._add(link)
            if token:
                link.dial()
            else:
                log.warning("the backend %s has no token in the keyring", pairing.key)
                link.refuse(NO_TOKEN)

    async def pair(self, target: RemoteTarget, label: str) -> Link:
        """A new pairing from a connection string: connects first (raising BackendNotFound,
        nothing kept, when that backend does not take it), then remembers it.  Pairing again
        with a backend already paired replaces that pairing (a new token, a new label)."""
        same = next((k for k, p in self.pairings.items()
                     if (p.host, p.port) == (target.host, target.port)), None)
        pairing = Pairing(same or pairings.new_key(), label.strip() or target.host,
                          target.host, target.port, target.fingerprint)
        link = self._make(pairing, target.token)
        try:
            await link.connect_once()
        except BaseException:
            await link.close()
            raise
        if same is not None:  # the old connection goes; the new one keeps its key
            await self.remove(same, forget=False)
            self.pairings[pairing.key] = pairing
        self.kept[pairing.key] = pairings.remember(self.data_dir, pairing, target.token)
        self._add(link)
        return link

    async def remove(self, key: str, forget: bool = True) -> None:
        """Closes that backend's connection and (`forget`) forgets its pairing: the settings
        entry and the keyring's token."""
        link = self.link(key)
        if link is None or link is self.local:
            return
        self.links.remove(link)
        self.pairings.pop(key, None)
        self.kept.pop(key, None)
        self.homes = {sid: k for sid, k in self.homes.items() if k != key}
        if forget:
            pairings.forget(self.data_dir, key)
        emit(self.removed, link)  # its section and windows go now, not after the close
        await link.close()

    async def close(self) -> None:
        for link in list(self.remotes):
            await link.close()

    # --- inside --------------------------------------------------------------------

    def _make(self, pairing: Pairing, token: str) -> Link:
        link = Link(self.data_dir, None, pairing.target(token), key=pairing.key, name=pairing.name)
        self.pairings[pairing.key] = pairing
        return link

    def _add(self, link: Link) -> None:
        self.links.append(link)
        link.received.connect(lambda event: self._received(link, event))
        emit(self.added, link)

    def _received(self, link: Link, event: Incoming) -> None:
        if event.session_id:
            self.homes[event.session_id] = link.key
        emit(self.received, link, event)
