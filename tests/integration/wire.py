"""A raw JSON-RPC 2.0 client over a real WebSocket, plus turn helpers, for tests of the wire.

Deliberately not the project's shared client: these tests check the bytes the backend
speaks, so every frame is built and parsed here with ``json``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend

Json = dict[str, Any]
Connect = Callable[..., Awaitable["Rpc"]]  # the `connect` fixture: open an initialized Rpc
DEFAULT_TIMEOUT = 30.0
TURN_TIMEOUT = 60.0


class RpcError(Exception):
    """An error response: ``code``, ``message`` and ``data`` as the backend sent them."""

    def __init__(self, method: str, error: Json) -> None:
        self.code: int = error.get("code", 0)
        self.message: str = error.get("message", "")
        self.data: Json = error.get("data") or {}
        super().__init__(f"{method} -> {self.code} {self.message} {self.data}")


async def open_ws(
    port: int,
    token: str | None,
    headers: dict[str, str] | None = None,
) -> ClientConnection:
    hdrs = dict(headers or {})
    if token is not None:
        hdrs["Authorization"] = f"Bearer {token}"
    return await connect(
        f"ws://127.0.0.1:{port}/rpc",
        additional_headers=hdrs,
        proxy=None,
        max_size=None,
        open_timeout=10,
    )


class Rpc:
    """One connection. Responses resolve ``call``; events collect in ``events`` (their params)."""

    def __init__(self, ws: ClientConnection, name: str = "rpc") -> None:
        self.ws = ws
        self.name = name
        self.events: list[Json] = []
        self.responses: list[Json] = []  # every response frame, matched or not
        self.init_result: Json = {}
        self.close_code: int | None = None
        self.closed = asyncio.Event()
        self._ids = itertools.count(1)
        self._pending: dict[Any, asyncio.Future[Json]] = {}
        self._cond = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(
        cls,
        port: int,
        token: str | None,
        *,
        initialize: bool = True,
        headers: dict[str, str] | None = None,
        name: str = "rpc",
    ) -> Rpc:
        rpc = cls(await open_ws(port, token, headers), name)
        if initialize:
            await rpc.initialize()
        return rpc

    async def initialize(self) -> Json:
        self.init_result = await self.call(
            "initialize", {"client": {"name": "turnkey-tests", "version": "0"}, "protocol": 1}
        )
        return self.init_result

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                msg = json.loads(frame)
                async with self._cond:
                    if isinstance(msg, dict) and msg.get("method") == "event":
                        self.events.append(msg["params"])
                    else:
                        self.responses.append(msg)
                        rid = msg.get("id") if isinstance(msg, dict) else None
                        fut = self._pending.pop(rid, None)
                        if fut is not None and not fut.done():
                            fut.set_result(msg)
                    self._cond.notify_all()
        except ConnectionClosed:
            pass
        finally:
            self.close_code = self.ws.close_code
            self.closed.set()
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError(f"{self.name}: closed {self.close_code}"))
            async with self._cond:
                self._cond.notify_all()

    async def request(
        self,
        method: str,
        params: Json | None = None,
        *,
        id: Any = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> Json:
        """Send one request and return the whole response frame, error or not."""
        rid = next(self._ids) if id is None else id
        fut: asyncio.Future[Json] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        frame: Json = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            frame["params"] = params
        await self.ws.send(json.dumps(frame))
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise AssertionError(f"{self.name}: no response to {method} within {timeout}s")

    async def call(
        self, method: str, params: Json | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> Json:
        """The result of ``method``; raises RpcError on an error response."""
        resp = await self.request(method, params if params is not None else {}, timeout=timeout)
        if "error" in resp:
            raise RpcError(method, resp["error"])
        assert "result" in resp, f"{method}: response has neither result nor error: {resp}"
        return dict(resp["result"])

    async def send_raw(self, frame: str | bytes) -> None:
        await self.ws.send(frame)

    async def wait_response(self, pred: Callable[[Json], bool], timeout: float = DEFAULT_TIMEOUT) -> Json:
        """The first response frame (in arrival order) matching ``pred``."""
        await self.wait_until(lambda: any(pred(r) for r in self.responses), timeout, "response")
        return next(r for r in self.responses if pred(r))

    async def wait_event(self, pred: Callable[[Json], bool], timeout: float = DEFAULT_TIMEOUT) -> Json:
        """The first event (received so far or later) whose params match ``pred``."""
        await self.wait_until(lambda: any(pred(e) for e in self.events), timeout, "event")
        return next(e for e in self.events if pred(e))

    async def wait_until(
        self, check: Callable[[], bool], timeout: float = DEFAULT_TIMEOUT, what: str = "state"
    ) -> None:
        """Wait until ``check()`` holds, re-checked after every frame received."""
        async with self._cond:
            try:
                await asyncio.wait_for(self._cond.wait_for(lambda: check() or self.closed.is_set()), timeout)
            except TimeoutError:
                pass
            if check():
                return
        tail = "\n  ".join(_brief(e) for e in self.events[-15:])
        raise AssertionError(
            f"{self.name}: no matching {what} within {timeout}s "
            f"(closed={self.closed.is_set()} code={self.close_code}); last events:\n  {tail}"
        )

    async def wait_closed(self, timeout: float = 10.0) -> int | None:
        await asyncio.wait_for(self.closed.wait(), timeout)
        return self.close_code

    def session_events(self, session_id: str) -> list[Json]:
        """This connection's events of one session that carry a seq, in arrival order."""
        return [e for e in self.events if e.get("session_id") == session_id and "seq" in e]

    async def close(self) -> None:
        await self.ws.close()
        await asyncio.wait_for(asyncio.shield(self._reader), 10)

    def abort(self) -> None:
        """Drop the TCP connection without a closing handshake, like a crashed client."""
        self.ws.transport.abort()


def _brief(event: Json) -> str:
    data = json.dumps(event.get("data"))[:120]
    return f"seq={event.get('seq')} {event.get('type')} adm={event.get('admission_id')} {data}"


# --- turn helpers --------------------------------------------------------------------------


async def create_session(rpc: Rpc, **params: Any) -> str:
    result = await rpc.call("session.create", params)
    return str(result["session"]["session_id"])


async def submit(rpc: Rpc, session_id: str, text: str, request_id: str | None = None) -> Json:
    """prompt.submit; returns the receipt."""
    rid = request_id or f"req-{uuid.uuid4().hex}"
    result = await rpc.call("prompt.submit", {"session_id": session_id, "request_id": rid, "text": text})
    return dict(result["receipt"])


def is_event(type_: str, admission_id: str | None = None) -> Callable[[Json], bool]:
    def pred(e: Json) -> bool:
        adm = e.get("admission_id") or (e.get("data") or {}).get("admission_id")
        adm = adm or ((e.get("data") or {}).get("receipt") or {}).get("admission_id")
        return e.get("type") == type_ and (admission_id is None or adm == admission_id)

    return pred


async def wait_complete(rpc: Rpc, admission_id: str, timeout: float = TURN_TIMEOUT) -> Json:
    """The ``message.complete`` event of an admission's turn."""
    return await rpc.wait_event(is_event("message.complete", admission_id), timeout)


async def wait_settled(rpc: Rpc, admission_id: str, timeout: float = TURN_TIMEOUT) -> Json:
    return await rpc.wait_event(is_event("admission.settled", admission_id), timeout)


async def run_turn(rpc: Rpc, session_id: str, text: str, timeout: float = TURN_TIMEOUT) -> tuple[Json, Json]:
    """Submit ``text`` and wait for its turn to settle; returns (receipt, message.complete)."""
    receipt = await submit(rpc, session_id, text)
    complete = await wait_complete(rpc, receipt["admission_id"], timeout)
    await wait_settled(rpc, receipt["admission_id"], timeout)
    return receipt, complete


def deltas_text(events: list[Json], turn_id: str) -> str:
    deltas = [e for e in events if e["type"] == "message.delta" and e.get("turn_id") == turn_id]
    return "".join(e["data"]["text"] for e in deltas)


async def get_receipt(rpc: Rpc, admission_id: str) -> Json:
    return dict((await rpc.call("admission.get", {"admission_id": admission_id}))["receipt"])


async def assert_backend_healthy(backend: Backend, fake: FakeOpenAI) -> None:
    """A fresh connection can still create a session and complete a streamed turn."""
    text = f"health check {uuid.uuid4().hex}"
    fake.routes[text] = Reply(deltas=["still ", "alive"])
    rpc = await Rpc.open(backend.port, backend.token, name="health")
    try:
        sid = await create_session(rpc)
        receipt, complete = await run_turn(rpc, sid, text)
        data = complete["data"]
        assert data["status"] == "completed", f"health turn did not complete: {data}"
        assert data["text"] == "still alive", f"health turn text: {data['text']!r}"
        assert deltas_text(rpc.events, complete["turn_id"]) == "still alive"
        final = await get_receipt(rpc, receipt["admission_id"])
        assert (final["status"], final.get("outcome")) == ("terminal", "completed"), final
    finally:
        await rpc.close()


async def wait_receipt_status(
    rpc: Rpc, admission_id: str, status: str, timeout: float = TURN_TIMEOUT
) -> Json:
    """Poll admission.get until the receipt has ``status``; returns it."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        receipt = await get_receipt(rpc, admission_id)
        if receipt["status"] == status:
            return receipt
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"admission {admission_id} still {receipt['status']}, wanted {status}")
        await asyncio.sleep(0.05)


def terminal(command: str, **extra: Any) -> Json:
    """A scripted `terminal` tool call for ``Reply.calls``."""
    return {"name": "terminal", "arguments": {"command": command, **extra}}


def tool_messages(body: Json) -> list[Json]:
    """The tool results a recorded model request carried, in order."""
    return [m for m in body["messages"] if m.get("role") == "tool"]


async def transcript(rpc: Rpc, sid: str) -> list[Json]:
    """The session's messages (up to 1000), as people read them."""
    result = await rpc.call("session.messages", {"session_id": sid, "limit": 1000})
    messages: list[Json] = result["messages"]
    return messages
