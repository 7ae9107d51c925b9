"""Clients that stop reading, over real sockets: dropped at once, their sockets and memory freed."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import struct
import sys
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend
from .wire import Connect, assert_backend_healthy, create_session, submit, wait_complete

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

CLIENTS = 4
DEADLINE_S = 60.0  # generous: what fails the test is the condition never holding
# From the drop to the socket's end: an abort takes milliseconds, a close handshake at most
# CLOSE_GRACE_S (2 s).  Without the abort, a socket whose peer does not read stays open
# until websockets' keepalive gives up on it, 20 s or more after the connection began.
AFTER_DROP_S = 10.0
# initialize is answered without the database, in ~1 KB: the backlog of a client that
# does not read grows fast.  Well past the 20,000 frames a client may fall behind.
REQUESTS = 30_000
MIB = 1024 * 1024


def _masked_text_frame(text: str) -> bytes:
    """One client-to-server text frame (clients must mask, RFC 6455 §5.3)."""
    payload = text.encode()
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = bytes([0x81, 0x80 | n])
    elif n < 1 << 16:
        head = bytes([0x81, 0x80 | 126]) + struct.pack("!H", n)
    else:
        head = bytes([0x81, 0x80 | 127]) + struct.pack("!Q", n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def _request(rid: int, method: str, params: dict[str, object]) -> bytes:
    return _masked_text_frame(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                          "params": params}))


INITIALIZE = {"client": {"name": "never-reads", "version": "0"}, "protocol": 1}


class DeafClient:
    """A raw TCP client that completes the WebSocket handshake, then never reads again."""

    def __init__(self, port: int, token: str) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect
        self.sock.settimeout(30)
        self.sock.connect(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET /rpc HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Authorization: Bearer {token}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:  # byte by byte: nothing after the handshake is read
            head += self.sock.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head
        self.port = self.sock.getsockname()[1]
        self.sent = 0

    def send(self, frames: bytes) -> bool:
        """False once the backend has ended the connection."""
        try:
            self.sock.sendall(frames)
        except OSError:
            return False
        return True

    def flood(self, requests: int, batch: int = 1000) -> None:
        frame = _request(1, "initialize", INITIALIZE)
        while self.sent < requests and self.send(frame * batch):
            self.sent += batch

    def close(self) -> None:
        self.sock.close()


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _server_sockets(pid: int, server_port: int, client_ports: set[int]) -> set[int]:
    """Client ports whose server-side socket the backend still has open (an fd on it)."""
    inodes: dict[str, int] = {}
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        for row in path.read_text().splitlines()[1:] if path.exists() else []:
            cols = row.split()
            local, remote, inode = cols[1], cols[2], cols[9]
            if int(local.rsplit(":", 1)[1], 16) == server_port:
                port = int(remote.rsplit(":", 1)[1], 16)
                if port in client_ports:
                    inodes[f"socket:[{inode}]"] = port
    open_fds = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            open_fds.add(os.readlink(fd))
        except OSError:
            continue  # closed while we looked
    return {port for link, port in inodes.items() if link in open_fds}


async def _poll(check: object, what: str, deadline_s: float = DEADLINE_S) -> None:
    assert callable(check)
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not check():
        if loop.time() > end:
            raise AssertionError(f"{what} did not happen within {deadline_s:.0f} s")
        await asyncio.sleep(0.1)


async def test_clients_that_stop_reading_are_dropped_and_their_sockets_and_memory_freed(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI,
) -> None:
    rpc = await connect()
    sid = await create_session(rpc)
    fake_provider.routes["busy"] = Reply(deltas=["tick "] * 2000, delay=0.002)
    receipt = await submit(rpc, sid, "warm up")
    await wait_complete(rpc, receipt["admission_id"])
    baseline = _rss_mib(backend.pid)

    busy = await submit(rpc, sid, "stay busy")  # streams to every subscriber meanwhile
    deaf = [DeafClient(backend.port, backend.token) for _ in range(CLIENTS)]
    try:
        for client in deaf:
            client.send(_request(0, "initialize", INITIALIZE)
                        + _request(1, "session.subscribe", {"session_id": sid}))
        await asyncio.gather(*(asyncio.to_thread(c.flood, REQUESTS) for c in deaf))
        ports = {c.port for c in deaf}

        log = backend.data_dir / "logs" / "backend.log"
        await _poll(lambda: log.read_text().count("dropping a client that stopped reading")
                    == CLIENTS, "dropping every client that stopped reading")
        await _poll(lambda: not _server_sockets(backend.pid, backend.port, ports),
                    "closing the server side of every dropped client", AFTER_DROP_S)
        # Each had ~20 MB queued; once dropped, the backend gives it back.
        held = CLIENTS * 20
        await _poll(lambda: _rss_mib(backend.pid) < baseline + held / 2,
                    f"RSS back near {baseline:.0f} MiB (it is {_rss_mib(backend.pid):.0f} MiB)")
    finally:
        for client in deaf:
            client.close()

    complete = await wait_complete(rpc, busy["admission_id"], timeout=120)
    assert complete["data"]["status"] == "completed", "a dropped client never stops a turn"
    await assert_backend_healthy(backend, fake_provider)


async def test_shutdown_does_not_wait_for_a_client_that_stopped_reading(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI,
) -> None:
    client = DeafClient(backend.port, backend.token)
    try:
        client.send(_request(0, "initialize", INITIALIZE))
        await asyncio.to_thread(client.flood, 5_000)  # behind, not yet past the bound
        rpc = await connect()
        await create_session(rpc)  # the backend still answers others
        # The contract: on SIGTERM the backend settles what it can within 10 s, then exits.
        assert backend.terminate(timeout=15) == 0, "SIGTERM ends the backend, deaf client or not"
    finally:
        client.close()
