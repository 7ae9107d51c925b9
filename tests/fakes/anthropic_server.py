"""A scripted Anthropic Messages server on loopback, speaking real SSE, for tests.

It runs in a background thread of the test process.  Each request is answered by a
``Reply``: from ``responder(body)`` when one is set, else from a FIFO of scripted replies,
else ``default``.  Every request is recorded (path, headers, parsed body, times).

Requests are checked the way the real API checks them (``validate``): the headers, a
``max_tokens``, user-first alternating messages, no blank text block, every ``tool_result``
answering a ``tool_use`` of the assistant message just before, and so on.  A violation is
appended to ``errors`` and answered with a 400 ``invalid_request_error``, as the API would;
tests assert ``errors`` stays empty.

A 200 reply streams the API's events: ``message_start`` (with the input and cache token
counts), a ``ping``, a text block of ``deltas``, one ``tool_use`` block per entry of
``tool_uses`` (its input JSON in several ``input_json_delta`` fragments), ``message_delta``
(stop reason, output tokens) and ``message_stop``.  ``stream_error`` sends an ``error``
event after the text instead of finishing; ``truncate`` drops the connection there.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import re
import socket
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from PIL import Image

from tests.fakes.loopback import ScriptedServer

API_VERSION = "2023-06-01"


@dataclass
class Reply:
    """How to answer one request.  ``tool_uses`` items are ``{"name": str, "input": dict | str,
    "id": str}`` (``id`` optional: a fresh ``toolu_fake_N``; a str ``input`` is sent verbatim
    as the JSON fragments, malformed or not)."""

    deltas: list[str] = field(default_factory=lambda: ["ok"])
    tool_uses: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int = 11
    output_tokens: int = 7
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0
    stop_reason: str | None = None  # None: "tool_use" when there are tool_uses, else "end_turn"
    delay: float = 0.0  # seconds before each text delta
    stream_error: dict[str, Any] | None = None  # an `error` event's `error` object, after the text
    truncate: bool = False  # drop the connection after the content blocks
    status: int = 200
    error: dict[str, Any] | None = None  # JSON body sent with a non-200 status
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None  # send these bytes as the whole body instead of the events
    content_type: str = "text/event-stream"

    @classmethod
    def tools(cls, *uses: dict[str, Any], text: str = "", **options: Any) -> Reply:
        """A reply that calls tools, after ``text`` if given: ``Reply.tools({"name": ...})``."""
        return cls(deltas=[text] if text else [], tool_uses=list(uses), **options)

    @classmethod
    def http_error(cls, status: int, kind: str, message: str = "boom", **headers: str) -> Reply:
        """A non-200 answer with the API's error body; ``retry_after="7"`` sends a header."""
        body = {"type": "error", "error": {"type": kind, "message": message},
                "request_id": "req_fake"}
        return cls(status=status, error=body, headers={k.replace("_", "-"): v for k, v in headers.items()})

    @classmethod
    def overloaded_mid_stream(cls, *deltas: str) -> Reply:
        """HTTP 200, some text, then ``overloaded_error`` as an event."""
        return cls(deltas=list(deltas), stream_error={"type": "overloaded_error", "message": "Overloaded"})


@dataclass
class Recorded:
    """One request the fake received."""

    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]
    started: float
    ended: float | None = None
    disconnected: bool = False


class FakeAnthropic(ScriptedServer[Reply, Recorded]):
    """The server.  ``base_url`` ends in ``/v1``; call ``close()`` when done."""

    def __init__(self, port: int = 0) -> None:
        super().__init__(Reply(), _make_handler, port)

    # --- called from handler threads -------------------------------------------------
    def _record(self, rec: Recorded, problems: list[str]) -> None:
        self._add(rec)
        with self._cond:
            self.errors.extend(problems)


def _make_handler(fake: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                body = json.loads(raw.decode("utf-8"))
            except ValueError:
                body = {"_raw": raw.decode("utf-8", "replace")}
            rec = Recorded(self.path, headers, body, time.monotonic())
            problems = validate(self.path, headers, body)
            fake._record(rec, problems)
            try:
                if problems:
                    self._reply_json(400, _error_body("invalid_request_error", "; ".join(problems)), {})
                else:
                    self._answer(fake._next_reply(body), rec)
            except (ConnectionError, TimeoutError, OSError):
                rec.disconnected = True
                self.close_connection = True
            finally:
                rec.ended = rec.ended or time.monotonic()

        def _answer(self, reply: Reply, rec: Recorded) -> None:
            if reply.raw is not None:
                self._reply_bytes(reply.status, reply.raw, reply.content_type, reply.headers)
                return
            if reply.status != 200:
                self._reply_json(reply.status, reply.error or _error_body("api_error", "boom"), reply.headers)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for name, data in _events(reply, rec.body.get("model", "claude-fake")):
                if name == "_truncate":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)  # no message_stop: a broken stream
                    return
                if name == "_sleep":
                    time.sleep(reply.delay)
                    continue
                self._send(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self._send(b"")  # chunked terminator

        def _reply_json(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
            self._reply_bytes(status, json.dumps(body).encode(), "application/json", headers)

        def _reply_bytes(self, status: int, data: bytes, ctype: str, headers: dict[str, str]) -> None:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _send(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    return Handler


def _error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fake"}


# --- the answer, as the API streams it --------------------------------------------------

_ids = itertools.count(1)


def _events(reply: Reply, model: str) -> list[tuple[str, dict[str, Any]]]:
    """The events of one 200 answer, in order; ``_sleep`` and ``_truncate`` are cues."""
    usage = {
        "input_tokens": reply.input_tokens, "output_tokens": 1,
        "cache_creation_input_tokens": reply.cache_creation_tokens,
        "cache_read_input_tokens": reply.cache_read_tokens,
    }
    message: dict[str, Any] = {
        "id": f"msg_fake_{next(_ids)}", "type": "message", "role": "assistant", "content": [],
        "model": model, "stop_reason": None, "stop_sequence": None, "usage": usage,
    }
    out: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": message}),
        ("ping", {"type": "ping"}),
    ]
    index = 0
    if reply.deltas:
        out.append(_block_start(index, {"type": "text", "text": ""}))
        for text in reply.deltas:
            if reply.delay:
                out.append(("_sleep", {}))
            out.append(_block_delta(index, {"type": "text_delta", "text": text}))
        out.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    if reply.stream_error is not None:
        return [*out, ("error", {"type": "error", "error": reply.stream_error})]
    for use in reply.tool_uses:
        out += _tool_use_events(index, use)
        index += 1
    if reply.truncate:
        return [*out, ("_truncate", {})]
    stop = reply.stop_reason or ("tool_use" if reply.tool_uses else "end_turn")
    out.append(("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": stop, "stop_sequence": None},
                                  "usage": {"output_tokens": reply.output_tokens}}))
    out.append(("message_stop", {"type": "message_stop"}))
    return out


def _tool_use_events(index: int, use: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A tool_use block: its start with an empty input, an empty fragment (the API sends one),
    then the input JSON in about three fragments."""
    arguments = use.get("input", {})
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    block = {"type": "tool_use", "id": use.get("id") or f"toolu_fake_{next(_ids)}",
             "name": use["name"], "input": {}}
    step = max(1, -(-len(text) // 3))
    pieces = ["", *(text[i : i + step] for i in range(0, len(text), step))]
    return [
        _block_start(index, block),
        *(_block_delta(index, {"type": "input_json_delta", "partial_json": p}) for p in pieces),
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]


def _block_start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}


def _block_delta(index: int, delta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}


# --- what the real API refuses -----------------------------------------------------------

_TOP_LEVEL = {
    "model", "messages", "max_tokens", "system", "stream", "tools", "tool_choice", "temperature",
    "top_p", "top_k", "stop_sequences", "metadata", "thinking", "service_tier",
}
_TOOL_ID = re.compile(r"^[A-Za-z0-9_-]+$")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def validate(path: str, headers: dict[str, str], body: dict[str, Any]) -> list[str]:
    """What the API would refuse in this request (headers lower-cased), as messages."""
    problems: list[str] = []
    if not path.endswith("/v1/messages"):
        problems.append(f"no route {path}")
    if not headers.get("x-api-key"):
        problems.append("x-api-key header is required")
    if headers.get("anthropic-version") != API_VERSION:
        problems.append(f"anthropic-version header must be {API_VERSION}")
    if "application/json" not in headers.get("content-type", ""):
        problems.append("content-type must be application/json")
    if "_raw" in body:
        return [*problems, "the body is not JSON"]
    problems += [f"{key}: Extra inputs are not permitted" for key in sorted(set(body) - _TOP_LEVEL)]
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model: Field required")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        problems.append("max_tokens: Field required")
    if body.get("stream") is not True:
        problems.append("stream: this fake answers only streaming requests")
    system = body.get("system")
    if system is not None and not isinstance(system, str | list):
        problems.append("system: must be a string or a list of text blocks")
    problems += _check_tools(body.get("tools"))
    problems += _check_messages(body.get("messages"))
    return problems


def _check_tools(tools: Any) -> list[str]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        return ["tools: must be a list"]
    problems = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not _TOOL_NAME.match(str(tool.get("name", ""))):
            problems.append(f"tools.{i}.name: must match {_TOOL_NAME.pattern}")
        elif not isinstance(tool.get("input_schema"), dict) or tool["input_schema"].get("type") != "object":
            problems.append(f"tools.{i}.input_schema: must be an object schema")
    return problems


def _check_messages(messages: Any) -> list[str]:
    if not isinstance(messages, list) or not messages:
        return ["messages: at least one message is required"]
    problems: list[str] = []
    previous_uses: set[str] = set()
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, dict) else None
        if role not in ("user", "assistant"):
            problems.append(f"messages.{i}.role: must be user or assistant, not {role!r}")
            continue
        if i == 0 and role != "user":
            problems.append("messages: the first message must use the user role")
        if i > 0 and isinstance(messages[i - 1], dict) and messages[i - 1].get("role") == role:
            problems.append(f"messages.{i}: roles must alternate between user and assistant")
        blocks = _content_blocks(msg.get("content"))
        if not blocks:
            problems.append(f"messages.{i}: all messages must have non-empty content")
        problems += [f"messages.{i}.content.{j}: {p}"
                     for j, b in enumerate(blocks) for p in _check_block(role, b)]
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        uses = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
        if role == "user":
            problems += _check_results(i, blocks, results, previous_uses)
        if previous_uses and role == "user":
            missing = previous_uses - set(results)
            if missing:
                problems.append(f"messages.{i}: tool_use ids were found without tool_result blocks "
                                f"immediately after: {sorted(missing)}")
        previous_uses = {u for u in uses if isinstance(u, str)} if role == "assistant" else set()
    if previous_uses:
        problems.append("messages: the last assistant message has tool_use blocks with no results")
    return problems


def _content_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _check_block(role: str, block: dict[str, Any]) -> list[str]:
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        if isinstance(text, str) and text.strip():
            return []
        return ["text content blocks must contain non-whitespace text"]
    if kind == "tool_use":
        if role != "assistant":
            return ["tool_use blocks are only allowed in assistant messages"]
        named = _TOOL_ID.match(str(block.get("id", ""))) and block.get("name")
        if named and isinstance(block.get("input"), dict):
            return []
        return ["tool_use needs an id matching [A-Za-z0-9_-]+, a name and an input object"]
    if kind in ("image", "document"):  # a prompt's attachments
        if role != "user":
            return [f"{kind} blocks are only allowed in user messages"]
        return _check_image(block) if kind == "image" else _check_document(block)
    if kind == "tool_result":
        if role != "user":
            return ["tool_result blocks are only allowed in user messages"]
        content = block.get("content")
        if content is None or (isinstance(content, str) and content.strip()):
            return []
        if isinstance(content, list) and content:  # text and image blocks
            return [p for part in content for p in _check_result_part(part)]
        return ["tool_result content must be non-blank text, or a list of text and image blocks"]
    return [f"unknown content block type {kind!r}"]


_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


MAX_IMAGE_BASE64 = 5 * 1024 * 1024  # the API refuses an image over 5 MB (as base64)
MAX_IMAGE_EDGE = 8000  # ... or over 8000 px on a side


def _check_result_part(part: Any) -> list[str]:
    if not isinstance(part, dict):
        return ["tool_result content blocks must be objects"]
    if part.get("type") == "text":
        return _check_block("user", part)
    if part.get("type") != "image":
        return [f"tool_result content cannot hold a {part.get('type')!r} block"]
    return _check_image(part)


def _check_image(part: dict[str, Any]) -> list[str]:
    source = part.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        return ["image.source must be {type: base64, media_type, data}"]
    if source.get("media_type") not in _IMAGE_TYPES:
        return [f"image.source.media_type must be one of {', '.join(_IMAGE_TYPES)}"]
    try:
        base64.b64decode(str(source.get("data")), validate=True)
    except ValueError:
        return ["image.source.data is not base64"]
    if len(str(source.get("data"))) > MAX_IMAGE_BASE64:
        return ["image exceeds 5 MB maximum"]
    size = _image_size(str(source.get("data")))
    if size is None:
        return ["image.source.data is not an image"]
    if max(size) > MAX_IMAGE_EDGE:
        return [f"image dimensions exceed max allowed size: {MAX_IMAGE_EDGE} pixels"]
    return [] if source.get("data") else ["image.source.data is empty"]


def _image_size(data: str) -> tuple[int, int] | None:
    try:
        with Image.open(io.BytesIO(base64.b64decode(data))) as image:
            return image.size
    except (OSError, ValueError):
        return None


def _check_document(part: dict[str, Any]) -> list[str]:
    source = part.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        return ["document.source must be {type: base64, media_type, data}"]
    if source.get("media_type") != "application/pdf":
        return ["document.source.media_type must be application/pdf"]
    try:
        data = base64.b64decode(str(source.get("data")), validate=True)
    except ValueError:
        return ["document.source.data is not base64"]
    if not data.startswith(b"%PDF-"):
        return ["document.source.data is not a PDF"]
    title = part.get("title")
    return [] if title is None or isinstance(title, str) else ["document.title must be a string"]


def _check_results(i: int, blocks: list[dict[str, Any]], results: list[Any], uses: set[str]) -> list[str]:
    problems = [f"messages.{i}: unexpected tool_use_id {r!r} in tool_result blocks: each tool_result "
                "must have a corresponding tool_use block in the previous message"
                for r in results if r not in uses]
    kinds = [b.get("type") for b in blocks]
    last_result = max((j for j, k in enumerate(kinds) if k == "tool_result"), default=0)
    if "text" in kinds[:last_result]:
        problems.append(f"messages.{i}: tool_result blocks must come before any text")
    if len(results) != len(set(results)):
        problems.append(f"messages.{i}: each tool_use_id may be answered only once")
    return problems
