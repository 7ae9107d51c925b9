"""The plumbing the scripted fake providers share: a threaded HTTP server on loopback, replies
from a responder, a FIFO script or a default, and a record of every request.

Each fake (``openai_server``, ``anthropic_server``) supplies its own ``Reply`` type, its
request record and its request handler; everything about choosing a reply, recording,
waiting and shutting down is here, once.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, TypeVar

R = TypeVar("R")  # the fake's Reply type
Rec = TypeVar("Rec")  # the fake's record of one request

HandlerFactory = Callable[[Any], type[BaseHTTPRequestHandler]]


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default backlog of 5 resets connections under a burst
    quiet: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError)
    owner: ScriptedServer[Any, Any]

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exception()
        if not isinstance(exc, self.quiet):
            self.owner.errors.append(f"handler failed: {exc!r}")  # a bug in the fake or its use


class ScriptedServer(Generic[R, Rec]):
    """A fake provider's server. ``base_url`` ends in ``/v1``; call ``close()`` when done."""

    def __init__(self, default: R, make_handler: HandlerFactory, port: int = 0,
                 quiet: tuple[type[BaseException], ...] = ()) -> None:
        self.responder: Callable[[dict[str, Any]], R] | None = None
        self.default = default
        self.requests: list[Rec] = []
        self.errors: list[str] = []  # bad requests and handler failures; tests assert it stays empty
        self._script: deque[R] = deque()
        self._cond = threading.Condition()
        self._closing = threading.Event()
        self._server = LoopbackServer(("127.0.0.1", port), make_handler(self))
        self._server.owner = self
        self._server.quiet = (*LoopbackServer.quiet, *quiet)
        self.port: int = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        # A short poll lets close() return at once instead of after the default half second.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def script(self, *replies: R) -> None:
        """Queue replies for the next requests, in order."""
        with self._cond:
            self._script.extend(replies)

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def snapshot(self) -> list[Rec]:
        with self._cond:
            return list(self.requests)

    def wait_requests(self, n: int, timeout: float = 30.0) -> list[Rec]:
        """Block until at least ``n`` requests have arrived; return them all."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requests) >= n, timeout):
                raise TimeoutError(f"fake provider got {len(self.requests)} requests, wanted {n}")
            return list(self.requests)

    async def async_wait_requests(self, n: int, timeout: float = 30.0) -> list[Rec]:
        """Like ``wait_requests`` without blocking the event loop."""
        deadline = time.monotonic() + timeout
        while len(self.snapshot()) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"fake provider got {len(self.snapshot())} requests, wanted {n}")
            await asyncio.sleep(0.01)
        return self.snapshot()

    # --- called from handler threads -------------------------------------------------
    def _next_reply(self, body: dict[str, Any]) -> R:
        if self.responder is not None:
            return self.responder(body)
        with self._cond:
            routed = self._route(body)
            if routed is not None:
                return routed
            return self._script.popleft() if self._script else self.default

    def _route(self, body: dict[str, Any]) -> R | None:
        """A reply chosen by the request's content (under the lock); None: the script decides."""
        return None

    def _add(self, rec: Rec) -> None:
        with self._cond:
            self.requests.append(rec)
            self._cond.notify_all()
