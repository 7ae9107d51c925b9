"""The methods as connections see them from READY on, before the backend has built them.

`backend/app.py` answers READY once the store is open and recovered and the listener is up;
the runner, tools, compressor, authority and services are built after it, in the background
(`backend/build.py`).  Meanwhile `initialize` is answered at once, from what start-up already
has (`hello`), and every other call waits here until the build is done, then runs as usual.  A
build that failed makes those calls fail with its reason (`BuildFailed`), never hang.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from backend import __version__
from backend.errors import EnvironmentFault, InvalidParams
from backend.server.connection import Connection
from shared import protocol as p
from shared.methods import METHODS

if TYPE_CHECKING:
    from backend.server.methods import Methods

Handler = Callable[[Connection, Any], Awaitable[Any]]


class BuildFailed(EnvironmentFault):
    """What a turn needs could not be built after READY; the backend stops (a new start
    tries again), and the calls that waited get this."""


def hello(conn: Connection, params: p.InitializeParams, epoch: int,
          capabilities: p.Capabilities) -> p.InitializeResult:
    """`initialize`, whether the backend's build is done or not."""
    if params.protocol != p.PROTOCOL_VERSION:
        raise InvalidParams(
            "protocol", f"this backend speaks protocol {p.PROTOCOL_VERSION}; upgrade the client"
        )
    conn.initialized = True
    return p.InitializeResult(
        server=p.ServerInfo(name="turnkey-backend", version=__version__),
        protocol=p.PROTOCOL_VERSION,
        epoch=epoch,
        principal=p.Principal(
            token_id=conn.principal.token_id,
            scopes=[s for s in p.ALL_SCOPES if s in conn.principal.scopes],
            expires_at=conn.principal.expires_at,
        ),
        capabilities=capabilities,
    )


class Gate:
    """`handlers` as the dispatcher reads them: each waits for the built `Methods`."""

    def __init__(self, epoch: int, early: Callable[[], p.Capabilities]) -> None:
        self.epoch = epoch
        self._early = early  # initialize's capabilities before the build is done
        self._built: asyncio.Future[Methods] = asyncio.get_running_loop().create_future()
        self.handlers: dict[str, Handler] = {name: self._waiting(name) for name in METHODS}
        self.handlers["initialize"] = self._initialize

    def open(self, methods: Methods) -> None:
        self._built.set_result(methods)

    def fail(self, reason: str) -> None:
        """The build failed: every waiting and later call gets `reason`."""
        if not self._built.done():
            self._built.set_exception(BuildFailed(reason))
            self._built.exception()  # read here: asyncio logs an exception nobody read

    @property
    def ready(self) -> bool:
        return self._built.done() and self._built.exception() is None

    async def methods(self) -> Methods:
        return await asyncio.shield(self._built)

    def _waiting(self, name: str) -> Handler:
        async def call(conn: Connection, params: Any) -> Any:
            methods = self._built.result() if self.ready else await self.methods()
            return await methods.handlers[name](conn, params)
        return call

    async def _initialize(self, conn: Connection, params: p.InitializeParams) -> Any:
        if self.ready:
            return await self._built.result().initialize(conn, params)
        return hello(conn, params, self.epoch, self._early())
