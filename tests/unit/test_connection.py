"""A client that stops reading is dropped at once: its outbox freed and its TCP connection ended."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosedError

from backend.server import connection
from backend.server.connection import Connection, Principal


class StuckTransport:
    """A transport whose peer stopped reading: the write buffer never drains."""

    def __init__(self, buffered: int) -> None:
        self.buffered = buffered
        self.aborted = asyncio.Event()

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def abort(self) -> None:
        self.aborted.set()


class StuckWebSocket:
    """send and close wait for a drain that never comes, until the transport is aborted."""

    def __init__(self, buffered: int) -> None:
        self.transport = StuckTransport(buffered)
        self.sent: list[str] = []
        self.closes: list[int] = []

    async def send(self, text: str) -> None:
        self.sent.append(text)
        await self.transport.aborted.wait()
        raise ConnectionClosedError(None, None)

    async def close(self, code: int, reason: str) -> None:
        self.closes.append(code)
        await self.transport.aborted.wait()


def _conn(ws: StuckWebSocket) -> Connection:
    conn = Connection(cast(ServerConnection, ws), Principal("owner", frozenset({"read"})))
    conn.start()
    return conn


FRAME: dict[str, Any] = {"jsonrpc": "2.0", "method": "event", "params": {"text": "x" * 100}}


async def _until(check: Any) -> None:
    async with asyncio.timeout(10):
        while not check():
            await asyncio.sleep(0.001)


@pytest.mark.parametrize("buffered", [0, 65536], ids=["close-tried-first", "buffer-full"])
async def test_a_client_past_the_bound_is_dropped_freed_and_aborted(
    buffered: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection, "MAX_OUTBOX", 50)
    monkeypatch.setattr(connection, "CLOSE_GRACE_S", 0.05)
    ws = StuckWebSocket(buffered)
    conn = _conn(ws)
    for _ in range(60):
        conn.send(FRAME)
    assert conn.closed
    assert conn._outbox.qsize() <= 1, "the queued frames are let go at once"
    assert conn._queued_bytes == 0
    await asyncio.wait_for(ws.transport.aborted.wait(), 10)
    assert ws.closes == ([1013] if buffered == 0 else []), "no close frame into a full buffer"
    await asyncio.wait_for(conn.stop(), 10)
    conn.send(FRAME)
    assert len(ws.sent) <= 1, "nothing is sent after the drop"


async def test_the_byte_bound_drops_a_client_before_the_frame_bound(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection, "MAX_OUTBOX_BYTES", 10_000)
    ws = StuckWebSocket(65536)
    conn = _conn(ws)
    big = {"params": "y" * 20_000}
    conn.send(big)  # the sender takes it (and hangs): the outbox is empty again
    await _until(lambda: ws.sent)
    conn.send(big)  # one frame over the bound still goes out alone
    assert not conn.closed
    conn.send(FRAME)
    assert conn.closed, "a second frame behind it passes the byte bound"
    await asyncio.wait_for(ws.transport.aborted.wait(), 10)
    await asyncio.wait_for(conn.stop(), 10)
