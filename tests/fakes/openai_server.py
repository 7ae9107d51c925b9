"""A scripted OpenAI Chat Completions server on loopback, speaking real SSE, for tests.

It runs in a background thread of the test process. Each request is answered by a
``Reply``: from ``responder(body)`` when one is set, else from the first of ``routes`` whose
key occurs in the last user message, else from a FIFO of scripted replies, else ``default``.
Every request is recorded (parsed body, headers, monotonic start and end times) so tests can check
what the backend sent, in which order, and with how much concurrency; bodies are kept
exactly as parsed, ``tools`` and tool-call messages included. A client that disconnects
mid-stream ends its handler quietly.

The same replies answer ``POST .../responses`` in the OpenAI Responses API's streaming
shape (what Codex's CLI speaks: ``response.created``, ``response.output_item.added``, one
``response.output_text.delta`` per delta, ``response.output_item.done`` with the whole
text, ``response.completed`` with usage); text only there, no tool calls.

A ``Reply`` with ``tool_calls`` (see ``Reply.calls``) streams them after its text the way
OpenAI does: per call, a first ``delta.tool_calls`` fragment with index, id and name, then
the arguments in about three pieces, and finish_reason ``"tool_calls"``.
"""

from __future__ import annotations

import base64
import itertools
import json
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fakes.loopback import ScriptedServer


@dataclass
class Reply:
    """How to answer one request. The default streams ``deltas`` and then usage.

    ``tool_calls`` items are ``{"name": str, "arguments": str | dict, "id": str}`` (``id``
    optional: a fresh ``call_fake_N`` per request; a dict ``arguments`` is sent as JSON text,
    a string verbatim, malformed or not). ``delay`` and ``hang_after`` apply to the text
    deltas; ``truncate`` drops the connection where the finish chunk would come, that is
    after the text and any tool-call fragments.
    """

    deltas: list[str] = field(default_factory=lambda: ["ok"])
    delay: float = 0.0  # seconds before each delta
    usage: dict[str, Any] | None = field(
        default_factory=lambda: {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    )
    status: int = 200
    error: dict[str, Any] | None = None  # JSON body sent with a non-200 status
    headers: dict[str, str] = field(default_factory=dict)
    hang_after: int | None = None  # after this many deltas, wait for `release` or disconnect
    release: threading.Event | None = None  # None with hang_after: hang until disconnect
    raw: bytes | None = None  # send these bytes as the whole body instead of SSE
    content_type: str = "text/event-stream"
    truncate: bool = False  # after the deltas (and calls), drop the connection: no usage, no [DONE]
    tool_calls: list[dict[str, Any]] | None = None  # streamed after the deltas

    @classmethod
    def calls(cls, *calls: dict[str, Any], text: str = "", **options: Any) -> Reply:
        """A reply that calls tools, after ``text`` if given: ``Reply.calls({"name": ...})``."""
        return cls(deltas=[text] if text else [], tool_calls=list(calls), **options)

    @classmethod
    def http_error(cls, status: int, message: str = "boom", **headers: str) -> Reply:
        body = {"error": {"message": message, "type": "server_error", "code": status}}
        return cls(status=status, error=body, headers=headers)


@dataclass
class Recorded:
    """One request the fake received."""

    body: dict[str, Any]
    started: float
    ended: float | None = None  # set just before the last byte is written
    disconnected: bool = False  # the client went away before the reply was finished
    headers: dict[str, str] = field(default_factory=dict)  # as received, names lower-cased

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")

    @property
    def last_user_text(self) -> str:
        for msg in reversed(self.body.get("messages", [])):
            if msg.get("role") == "user":
                return content_text(msg)
        return ""


    @property
    def user_images(self) -> list[tuple[str, bytes]]:
        """The images the user's messages carry (image_url parts with data URLs), in order:
        (media type, bytes)."""
        out: list[tuple[str, bytes]] = []
        for msg in self.body.get("messages", []):
            content = msg.get("content") if msg.get("role") == "user" else None
            for part in content if isinstance(content, list) else []:
                if isinstance(part, dict) and part.get("type") == "image_url":
                    url = str((part.get("image_url") or {}).get("url") or "")
                    head, _, data = url.partition(";base64,")
                    out.append((head.removeprefix("data:"), base64.b64decode(data)))
        return out


def content_text(msg: dict[str, Any]) -> str:
    """A message's text, whether ``content`` is a string or a list of text parts."""
    content = msg.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


class _ClientGone(Exception):
    pass


class FakeOpenAI(ScriptedServer[Reply, Recorded]):
    """The server. ``base_url`` ends in ``/v1``; call ``close()`` when done."""

    def __init__(self, port: int = 0) -> None:
        self.routes: dict[str, Reply] = {}  # substring of the last user text -> reply, every time
        self.active = 0
        self.max_active = 0
        super().__init__(Reply(), _make_handler, port, quiet=(_ClientGone,))

    # --- called from handler threads -------------------------------------------------
    def _route(self, body: dict[str, Any]) -> Reply | None:
        text = Recorded(body=body, started=0.0).last_user_text
        for key, reply in list(self.routes.items()):  # tests add routes meanwhile
            if key in text:
                return reply
        return None

    def _begin(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Recorded:
        rec = Recorded(body=body, started=time.monotonic(), headers=dict(headers or {}))
        self._add(rec)
        with self._cond:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        return rec

    def _end(self, rec: Recorded) -> None:
        with self._cond:
            if rec.ended is None:
                rec.ended = time.monotonic()
                self.active -= 1


def _make_handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                body = json.loads(raw.decode("utf-8"))
            except ValueError as exc:
                fake.errors.append(f"request body is not UTF-8 JSON: {exc}")
                body = {"_raw": raw.decode("utf-8", "replace")}
            rec = fake._begin(body, {k.lower(): v for k, v in self.headers.items()})
            try:
                self._answer(fake._next_reply(body), rec)
            except (_ClientGone, ConnectionError, TimeoutError, OSError):
                rec.disconnected = True
                self.close_connection = True
            finally:
                fake._end(rec)

        def _answer(self, reply: Reply, rec: Recorded) -> None:
            if self.path.endswith("/responses") and reply.status == 200 and reply.raw is None:
                self._responses(reply, rec)
                return
            if not self.path.endswith("/chat/completions"):
                reply = Reply.http_error(404, f"no route {self.path}")
            if reply.status != 200 or reply.raw is not None:
                data = reply.raw if reply.raw is not None else json.dumps(reply.error).encode()
                ctype = reply.content_type if reply.raw is not None else "application/json"
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                fake._end(rec)
                self.wfile.write(data)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            model = rec.body.get("model", "fake-model")
            self._event(_chunk(model, {"role": "assistant", "content": ""}))
            for i, text in enumerate(reply.deltas):
                if reply.hang_after is not None and i == reply.hang_after:
                    self._hang(reply.release)
                if reply.delay:
                    time.sleep(reply.delay)
                self._event(_chunk(model, {"content": text}))
            if reply.hang_after is not None and reply.hang_after >= len(reply.deltas):
                self._hang(reply.release)
            for index, call in enumerate(reply.tool_calls or []):
                for delta in _call_deltas(index, call):
                    self._event(_chunk(model, delta))
            if reply.truncate:
                fake._end(rec)
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)  # no final chunk: a broken stream
                return
            self._event(_chunk(model, {}, finish="tool_calls" if reply.tool_calls else "stop"))
            if reply.usage is not None:
                self._event(_chunk(model, None, usage=reply.usage))
            fake._end(rec)
            self._send(b"data: [DONE]\n\n")
            self._send(b"")  # chunked terminator

        def _responses(self, reply: Reply, rec: Recorded) -> None:
            """The reply's text as the Responses API streams it (see the module's docstring)."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            item: dict[str, Any] = {"type": "message", "role": "assistant", "id": "msg_fake",
                                    "status": "in_progress", "content": []}
            self._typed("response.created", response={"id": "resp_fake", "status": "in_progress"})
            self._typed("response.output_item.added", output_index=0, item=item)
            for text in reply.deltas:
                if reply.delay:
                    time.sleep(reply.delay)
                self._typed("response.output_text.delta", item_id="msg_fake", output_index=0,
                            content_index=0, delta=text)
            done = {**item, "status": "completed",
                    "content": [{"type": "output_text", "text": "".join(reply.deltas),
                                 "annotations": []}]}
            self._typed("response.output_item.done", output_index=0, item=done)
            usage = reply.usage or {}
            self._typed("response.completed", response={
                "id": "resp_fake", "status": "completed", "output": [done],
                "usage": {"input_tokens": usage.get("prompt_tokens", 0),
                          "input_tokens_details": None,
                          "output_tokens": usage.get("completion_tokens", 0),
                          "output_tokens_details": None,
                          "total_tokens": usage.get("total_tokens", 0)}})
            fake._end(rec)
            self._send(b"")  # chunked terminator

        def _typed(self, kind: str, **fields: Any) -> None:
            """One Responses-API event: its type named on the `event:` line and in the data."""
            data = json.dumps({"type": kind, **fields}).encode()
            self._send(b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n")

        def _event(self, chunk: dict[str, Any]) -> None:
            self._send(b"data: " + json.dumps(chunk).encode() + b"\n\n")

        def _send(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def _hang(self, release: threading.Event | None) -> None:
            while not (release is not None and release.is_set()):
                if fake._closing.is_set():
                    raise _ClientGone
                readable, _, _ = select.select([self.connection], [], [], 0.05)
                if readable and not self.connection.recv(1, socket.MSG_PEEK):
                    raise _ClientGone  # EOF: the client closed the stream

    return Handler


_call_ids = itertools.count(1)


def _call_deltas(index: int, call: dict[str, Any]) -> list[dict[str, Any]]:
    """One tool call as OpenAI streams it: id and name first, then argument pieces."""
    arguments = call.get("arguments", "")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    call_id = call.get("id") or f"call_fake_{next(_call_ids)}"
    function = {"name": call["name"], "arguments": ""}
    first = {"index": index, "id": call_id, "type": "function", "function": function}
    step = max(1, -(-len(arguments) // 3))  # ceil: at most three pieces
    pieces = [arguments[i : i + step] for i in range(0, len(arguments), step)]
    rest = [{"index": index, "function": {"arguments": piece}} for piece in pieces]
    return [{"tool_calls": [fragment]} for fragment in [first, *rest]]


def _chunk(
    model: str,
    delta: dict[str, Any] | None,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage,
    }
