"""Other backends' signals (a shared PostgreSQL store's `signal`), routed by their "kind".

A signal is a small JSON object one backend sends every other on the same database: an
interrupt for a turn that runs elsewhere (authority/takeover.py), a token whose
connections must close (server/auth.py).  Each part registers the kind it handles; the
router is the store's `on_signal`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("store")

Handler = Callable[[dict[str, Any]], None]


class Signals:
    """Hands each signal to the handler registered for its "kind"; a kind nobody here
    handles (a newer backend's) is logged and dropped."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def on(self, kind: str, handler: Handler) -> None:
        assert kind not in self._handlers, f"two handlers of the {kind!r} signal"
        self._handlers[kind] = handler

    def __call__(self, data: dict[str, Any]) -> None:
        kind = data.get("kind")
        handler = self._handlers.get(kind) if isinstance(kind, str) else None
        if handler is None:
            log.info("ignored another backend's signal of kind %r", str(kind)[:40])
            return
        handler(data)
