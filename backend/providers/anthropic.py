"""Anthropic's Messages API over httpx with streaming SSE.

The request is translated from the one internal shape: system messages become
the top-level `system`, tool calls become `tool_use` blocks, tool results
become `tool_result` blocks in a user message, and consecutive messages of one
role are merged, because the API wants user and assistant strictly alternating,
starting with the user, and refuses empty text blocks.

The answer arrives as named SSE events (`message_start`, `content_block_*`,
`message_delta`, `message_stop`, `ping`, and `error`, which may follow an HTTP
200).  `_MessageStream` turns them into chunks without doing any I/O; tool
calls are held until `message_stop`, so a stream cut short never yields a call
that the model may not have finished.  Failures become ProviderError through
`from_http`, and no key ever appears in a message.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from backend.errors import ProviderError
from backend.providers.base import (
    ChatRequest,
    Chunk,
    DoneChunk,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
    UsageChunk,
    WireDocument,
    WireImage,
    WireMessage,
)
from backend.providers.errors import error_page, from_http, looks_like_html
from backend.providers.transport import MAX_LINE_BYTES, http_client, post_stream, sse_lines

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096  # the API requires a budget; used when the request sets none
CONTINUING = "(continuing)"  # the user turn put first when a history starts with the model

# The status the API gives each error type, for errors that arrive inside a 200 stream.
ERROR_STATUS: dict[str, int] = {
    "invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
    "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
    "rate_limit_error": 429, "api_error": 500, "timeout_error": 504, "overloaded_error": 529,
}
FINISH_REASONS = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


class AnthropicChat:
    def __init__(
        self, name: str, base_url: str, model: str, api_key: str | None, timeout_s: float = 600.0,
    ) -> None:
        self.name = name
        self.model = model
        self._url = messages_url(base_url)
        self._key = api_key
        headers = {"anthropic-version": API_VERSION, "accept": "text/event-stream"}
        if api_key:
            headers["x-api-key"] = api_key
        # Connect fast, then allow long gaps between events of a thinking model.
        timeout = httpx.Timeout(timeout_s, connect=10.0)
        self._client = http_client(self._url, headers, timeout)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        if httpx.URL(self._url).host == "api.openai.com":
            # The config's default base_url is OpenAI's: never send an Anthropic key there.
            raise ProviderError(
                "not_configured",
                f"{self.name}: base_url points at OpenAI; set base_url = \"https://api.anthropic.com/v1\"",
            )
        body = request_body(request)
        async for chunk in post_stream(self._client, self._url, body, name=self.name,
                                       key=self._key, http_error=_http_error,
                                       parse=lambda response: _parse_stream(self.name, response)):
            yield chunk


def messages_url(base_url: str) -> str:
    """`{base_url}/messages` when base_url is the API root (ends in /v1), else `/v1/messages`
    under it, as the official SDKs take a bare host."""
    root = base_url.rstrip("/")
    if not root.endswith("/v1"):
        root += "/v1"
    return root + "/messages"


# --- the request ---------------------------------------------------------------------


def request_body(request: ChatRequest) -> dict[str, Any]:
    system, messages = wire_messages(request.messages)
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
        "stream": True,
        "messages": messages,
    }
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = [_wire_tool(t) for t in request.tools]
    body.update(request.extra)
    return body


def wire_messages(
    messages: list[WireMessage],
) -> tuple[str | list[dict[str, Any]], list[dict[str, Any]]]:
    """(the system text, the messages in Messages API shape): alternating, user first,
    with no empty text block and tool results ahead of any text in their user message.

    One system message goes as a plain string.  Several (the frozen prompt, then the memory
    block, turn/request.py) go as text blocks, the first marked `cache_control`: the cached
    prefix then ends with the frozen prompt, so a change in the later blocks does not
    invalidate it."""
    system = [m.content for m in messages if m.role == "system" and m.content.strip()]
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks = _blocks(m)
        if not blocks:
            continue  # an empty message; its neighbours may now merge
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":  # the API wants results first; the sort is stable
            turn["content"].sort(key=lambda b: b["type"] != "tool_result")
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [_text(CONTINUING)]})
    _trim_prefill(turns)
    return _system(system), turns


def _system(texts: list[str]) -> str | list[dict[str, Any]]:
    if len(texts) <= 1:
        return "".join(texts)
    first = {**_text(texts[0]), "cache_control": {"type": "ephemeral"}}
    return [first, *(_text(t) for t in texts[1:])]


def _blocks(m: WireMessage) -> list[dict[str, Any]]:
    if m.role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": _tool_id(m.tool_call_id or "")}
        if m.images:  # text and images as blocks of the result
            result["content"] = ([_text(m.content)] if m.content.strip() else []) + [
                _image(i) for i in m.images]
        elif m.content.strip():  # empty content is left out: a blank text would be refused
            result["content"] = m.content
        return [result]
    # A prompt's documents and images go ahead of its words, as Anthropic advises.
    blocks = [*(_document(d) for d in m.documents), *(_image(i) for i in m.images)]
    blocks += [_text(m.content)] if m.content.strip() else []
    if m.role == "assistant":
        blocks += [
            {"type": "tool_use", "id": _tool_id(c.call_id), "name": c.name, "input": tool_input(c.arguments)}
            for c in m.tool_calls
        ]
    return blocks


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _image(image: WireImage) -> dict[str, Any]:
    return {"type": "image",
            "source": {"type": "base64", "media_type": image.media_type, "data": image.data}}


def _document(document: WireDocument) -> dict[str, Any]:
    return {"type": "document", "title": document.name,
            "source": {"type": "base64", "media_type": document.media_type, "data": document.data}}


def tool_input(arguments: str) -> dict[str, Any]:
    """The call's arguments as the object `tool_use.input` must be; `{}` when they are not a
    JSON object (the turn already answered such a call with an error result)."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def _tool_id(call_id: str) -> str:
    """The API accepts only [A-Za-z0-9_-] ids; the same rewrite applies to a call and its
    result, so they stay paired."""
    return _ID_UNSAFE.sub("_", call_id) or "toolu_unknown"


def _trim_prefill(turns: list[dict[str, Any]]) -> None:
    """A final assistant turn is a prefill, and the API refuses one ending in whitespace."""
    last = turns[-1]
    if last["role"] != "assistant" or last["content"][-1]["type"] != "text":
        return
    last["content"][-1] = _text(last["content"][-1]["text"].rstrip())  # not blank: checked above


def _wire_tool(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


# --- the answer ------------------------------------------------------------------------


async def _parse_stream(name: str, response: httpx.Response) -> AsyncIterator[Chunk]:
    content_type = response.headers.get("content-type", "")
    if "text/html" in content_type:
        raise ProviderError("server_error", f"{name}: the provider returned an HTML page instead "
                            "of a stream", words=error_page(None))
    if "application/json" in content_type:  # not a stream: an error object, or a proxy's oddity
        await response.aread()
        raise _json_instead_of_stream(name, response)
    events = _MessageStream(name)
    async for event_name, data in _sse_events(sse_lines(response)):
        for chunk in events.feed(_decode(name, data, event_name)):
            yield chunk
        if events.finished:
            return
    raise ProviderError("connection", f"{name}: the provider's stream ended before the answer finished")


async def _sse_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, str]]:
    """(event name, data) per SSE event; data lines are joined, comments and ids ignored.
    An event's data is bounded like one line (MAX_LINE_BYTES), however many lines carry it."""
    event, data, size = "", list[str](), 0
    async for line in lines:
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data, size = "", [], 0
        elif line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
            size += len(data[-1])
            if size > MAX_LINE_BYTES:
                raise ProviderError("server_error", "the provider sent a stream event longer "
                                    f"than {MAX_LINE_BYTES // 1024} KiB; it was refused unread")
        elif line.startswith("event:"):
            event = line[6:].strip()
    if data:  # a last event without its blank line
        yield event, "\n".join(data)


def _decode(name: str, data: str, event_name: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        raise ProviderError("server_error", f"{name}: the provider sent a malformed stream event")
    obj.setdefault("type", event_name)
    return obj


@dataclass
class _ToolBlock:
    call_id: str
    name: str
    start_input: Any
    json_parts: list[str] = field(default_factory=list)

    def arguments(self) -> str:
        text = "".join(self.json_parts)
        if not text.strip() and isinstance(self.start_input, dict) and self.start_input:
            text = json.dumps(self.start_input)  # a whole input sent with the block's start
        return text if text.strip() else "{}"


class _MessageStream:
    """Stream events in, chunks out: text as it comes; tool calls, usage and the finish
    reason at `message_stop`, after which `finished` is set."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.finished = False
        self._usage: dict[str, int] = {}
        self._stop_reason: str | None = None
        self._open: dict[int, _ToolBlock] = {}  # tool_use blocks still streaming, by block index
        self._calls: list[ToolCallChunk] = []

    def feed(self, event: dict[str, Any]) -> list[Chunk]:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            self._add_usage(message.get("usage") if isinstance(message, dict) else None)
        elif kind == "content_block_start":
            return self._start(_index(event), event.get("content_block"))
        elif kind == "content_block_delta":
            return self._delta(_index(event), event.get("delta"))
        elif kind == "content_block_stop":
            self._stop(_index(event))
        elif kind == "message_delta":
            delta = event.get("delta")
            reason = delta.get("stop_reason") if isinstance(delta, dict) else None
            self._stop_reason = reason if isinstance(reason, str) else self._stop_reason
            self._add_usage(event.get("usage"))
        elif kind == "message_stop":
            return self._finish()
        elif kind == "error":
            raise _stream_error(self.name, event.get("error"))
        # `ping` and event types added later are ignored, as the API's versioning asks.
        return []

    def _start(self, index: int, block: Any) -> list[Chunk]:
        if not isinstance(block, dict):
            return []
        if block.get("type") == "tool_use":
            self._open[index] = _ToolBlock(
                str(block.get("id") or ""), str(block.get("name") or ""), block.get("input")
            )
        elif block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"]:
            return [TextChunk(block["text"])]
        return []  # thinking and server-tool blocks are not part of the answer's text

    def _delta(self, index: int, delta: Any) -> list[Chunk]:
        if not isinstance(delta, dict):
            return []
        if delta.get("type") == "text_delta":
            text = delta.get("text")
            return [TextChunk(text)] if isinstance(text, str) and text else []
        if delta.get("type") == "input_json_delta":
            block = self._open.get(index)
            if block is None:  # a fragment of a call never started: the call cannot be rebuilt
                raise ProviderError("server_error", f"{self.name}: the provider sent a tool call "
                                    "fragment for a block it never started")
            part = delta.get("partial_json")
            if isinstance(part, str):
                block.json_parts.append(part)
        return []

    def _stop(self, index: int) -> None:
        block = self._open.pop(index, None)
        if block is not None:
            self._calls.append(ToolCallChunk(len(self._calls), block.call_id, block.name, block.arguments()))

    def _finish(self) -> list[Chunk]:
        if self._open:  # a call whose block never stopped may be cut short: it must not run
            raise ProviderError("server_error", f"{self.name}: the provider finished the answer "
                                "inside a tool call")
        self.finished = True
        u = self._usage
        cache_read = u.get("cache_read_input_tokens", 0)
        prompt = u.get("input_tokens", 0) + u.get("cache_creation_input_tokens", 0) + cache_read
        reason = FINISH_REASONS.get(self._stop_reason or "", self._stop_reason)
        return [*self._calls, UsageChunk(prompt, u.get("output_tokens", 0), cache_read), DoneChunk(reason)]

    def _add_usage(self, usage: Any) -> None:
        """Counts are cumulative: a later event's value replaces an earlier one."""
        if isinstance(usage, dict):
            for key, value in usage.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    self._usage[key] = value


def _index(event: dict[str, Any]) -> int:
    index = event.get("index")
    return index if isinstance(index, int) else -1


# --- errors ----------------------------------------------------------------------------


def _http_error(name: str, response: httpx.Response) -> ProviderError:
    """A non-200 answer; the API's body is `{"type": "error", "error": {type, message}}`."""
    headers = dict(response.headers)
    detail = _error_detail(response)
    if detail is None:
        html = looks_like_html(response.headers.get("content-type", ""), response.content)
        what = "the provider returned an HTML page" if html else "no error details"
        return from_http(name, response.status_code, what, headers, html=html)
    message, code = detail
    return from_http(name, response.status_code, message, headers, code)


def _json_instead_of_stream(name: str, response: httpx.Response) -> ProviderError:
    detail = _error_detail(response)
    if detail is None:
        return ProviderError("server_error", f"{name}: the provider answered without streaming")
    message, code = detail
    return from_http(name, ERROR_STATUS.get(code or "", 200), message, dict(response.headers), code)


def _stream_error(name: str, detail: Any) -> ProviderError:
    """An `error` event after HTTP 200: classified by the status its type stands for."""
    message, code = _message_and_type(detail)
    return from_http(name, ERROR_STATUS.get(code or "", 200), message, None, code)


def _error_detail(response: httpx.Response) -> tuple[str, str | None] | None:
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict) or "error" not in body:
        return None
    return _message_and_type(body["error"])


def _message_and_type(detail: Any) -> tuple[str, str | None]:
    if isinstance(detail, dict):
        code = detail.get("type")
        return str(detail.get("message") or "no message"), str(code) if code else None
    return str(detail), None
