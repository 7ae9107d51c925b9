"""A lean JSON-RPC client for benchmarks: pipelined calls and arrival-timestamped events.

Every frame is stamped with ``time.perf_counter()`` the moment the reader gets it, so a
benchmark can measure from "sent" to "arrived" without the bookkeeping of a test client
(no condition variables, no scans of the whole event list per frame).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
from collections.abc import Sequence
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

Json = dict[str, Any]
Stamped = tuple[float, Json]  # (perf_counter at arrival, frame or event params)


class BenchClient:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.events: list[Stamped] = []  # every event, stamped, in arrival order
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Stamped]] = {}
        self._seen: dict[tuple[str, str], Stamped] = {}  # (type, admission_id) -> first such event
        self._waiters: dict[tuple[str, str], asyncio.Future[Stamped]] = {}
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, port: int, token: str) -> BenchClient:
        ws = await connect(
            f"ws://127.0.0.1:{port}/rpc",
            additional_headers={"Authorization": f"Bearer {token}"},
            proxy=None,
            max_size=None,
            open_timeout=10,
        )
        client = cls(ws)
        await client.call("initialize", {"client": {"name": "turnkey-bench", "version": "0"}, "protocol": 1})
        return client

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                t = time.perf_counter()
                msg = json.loads(frame)
                if msg.get("method") == "event":
                    params = msg["params"]
                    self.events.append((t, params))
                    adm = params.get("admission_id")
                    if adm is not None:
                        key = (params.get("type"), adm)
                        self._seen.setdefault(key, (t, params))
                        fut = self._waiters.pop(key, None)
                        if fut is not None and not fut.done():
                            fut.set_result((t, params))
                else:
                    fut = self._pending.pop(msg.get("id"), None)
                    if fut is not None and not fut.done():
                        fut.set_result((t, msg))
        except ConnectionClosed:
            pass
        finally:
            for fut in [*self._pending.values(), *self._waiters.values()]:
                if not fut.done():
                    fut.set_exception(ConnectionError(f"connection closed ({self.ws.close_code})"))

    def _frame(self, method: str, params: Json) -> tuple[str, asyncio.Future[Stamped]]:
        rid = next(self._ids)
        fut: asyncio.Future[Stamped] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}), fut

    async def send(self, method: str, params: Json) -> asyncio.Future[Stamped]:
        """Sends one request without waiting; the future gives (arrival time, response frame)."""
        text, fut = self._frame(method, params)
        await self.ws.send(text)
        return fut

    async def call(self, method: str, params: Json, timeout: float = 30.0) -> Json:
        fut = await self.send(method, params)
        _, resp = await asyncio.wait_for(fut, timeout)
        if "error" in resp:
            raise AssertionError(f"{method} -> {resp['error']}")
        return dict(resp["result"])

    async def wait_event(self, type_: str, admission_id: str, timeout: float = 30.0) -> Stamped:
        """The first event of ``type_`` for ``admission_id``, received already or later."""
        key = (type_, admission_id)
        if key in self._seen:
            return self._seen[key]
        fut = self._waiters.get(key)
        if fut is None:
            fut = self._waiters[key] = asyncio.get_running_loop().create_future()
        return await asyncio.wait_for(asyncio.shield(fut), timeout)

    async def close(self) -> None:
        await self.ws.close()
        await asyncio.wait_for(self._reader, 10)


def pct(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), nearest rank."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"
