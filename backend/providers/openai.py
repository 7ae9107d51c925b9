"""OpenAI-compatible Chat Completions over httpx with streaming SSE.

Speaks to OpenAI, OpenRouter, Ollama, LM Studio, vLLM and llama.cpp's server.
httpx's exceptions and the wire's oddities (HTML error pages, error objects
inside a 200 stream, a stream cut short) are translated here into
ProviderError with a message a person can act on; no key ever appears in it.

Tool calls go out as `tools` plus assistant `tool_calls` / `tool` rows, and come
back as `delta.tool_calls` fragments that are reassembled per index and yielded
as whole ToolCallChunks just before the DoneChunk.  Their arguments are passed
through as raw text: the turn, not the provider, judges whether they parse.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec

from backend.errors import ProviderError
from backend.providers.base import (
    ChatRequest,
    Chunk,
    DoneChunk,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
    UsageChunk,
    WireMessage,
)
from backend.providers.errors import error_page, from_http, looks_like_html
from backend.providers.transport import http_client, post_stream, sse_lines

FORMAT = "openai"  # this module's key in WireMessage.encoded


class OpenAIChat:
    def __init__(
        self, name: str, base_url: str, model: str, api_key: str | None, timeout_s: float = 600.0,
        max_tokens_field: str | None = None,
    ) -> None:
        self.name = name
        self.model = model
        # OpenAI's newer models refuse `max_tokens`; other servers know only it: sent only
        # under the name the configuration gives.
        self._max_tokens_field = max_tokens_field
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._key = api_key
        headers = {"Accept": "text/event-stream"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # Connect fast, then allow long gaps between chunks of a thinking model.
        timeout = httpx.Timeout(timeout_s, connect=10.0)
        self._client = http_client(self._url, headers, timeout)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        body: dict[str, Any] = {
            "model": request.model,
            # A kept message's JSON is looked up inline: this runs once per message of the
            # history, every turn, so it is kept to a dict lookup.
            "messages": [m.encoded.get(FORMAT) or _encoded(m)
                         for m in _leading_system_joined(request.messages)],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:  # no key at all without tools: some servers reject `"tools": []`
            body["tools"] = [_wire_tool(t) for t in request.tools]
        if request.max_tokens and self._max_tokens_field:
            body[self._max_tokens_field] = request.max_tokens
        body.update(request.extra)
        async for chunk in post_stream(self._client, self._url, body, name=self.name,
                                       key=self._key, http_error=_http_error, parse=_parse_stream):
            yield chunk


def _leading_system_joined(messages: list[WireMessage]) -> list[WireMessage]:
    """The leading system messages (the frozen prompt, then the memory block: turn/request.py)
    as one, joined by a blank line.  Some OpenAI-compatible servers' chat templates refuse a
    second system message; appended text keeps the frozen prompt a byte-for-byte prefix of
    the request, which is what prefix caching keys on."""
    n = 0
    while n < len(messages) and messages[n].role == "system" and not messages[n].tool_calls:
        n += 1
    if n <= 1:
        return messages
    joined = "\n\n".join(m.content for m in messages[:n] if m.content)
    return [WireMessage("system", joined), *messages[n:]]


def _encoded(m: WireMessage) -> msgspec.Raw:
    """`_wire_message(m)` as JSON, kept on the message: turn N's body joins N fragments made
    by earlier turns instead of serializing N messages again.  A message with images or
    documents is rendered afresh for each call (turn/attachments.py) and large: not kept."""
    if m.images or m.documents:
        return msgspec.Raw(msgspec.json.encode(_wire_message(m)))
    raw = m.encoded.get(FORMAT)
    if raw is None:
        raw = m.encoded[FORMAT] = msgspec.Raw(msgspec.json.encode(_wire_message(m)))
    return raw


def _wire_message(m: WireMessage) -> dict[str, Any]:
    """One message in Chat Completions shape; plain rows stay `{role, content}`."""
    if m.role == "assistant" and m.tool_calls:
        calls = [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ]
        return {"role": "assistant", "content": m.content or None, "tool_calls": calls}
    if m.role == "tool":
        # `name` is left out: OpenAI's schema has no such field on tool rows and strict
        # OpenAI-compatible servers reject unknown fields; the id alone pairs the result.
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content}
    if m.role == "user" and m.images:
        # A prompt's images: parts after its text, each a data URL (no fetch on their side).
        parts: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
        parts += [{"type": "image_url",
                   "image_url": {"url": f"data:{i.media_type};base64,{i.data}"}} for i in m.images]
        return {"role": "user", "content": parts}
    return {"role": m.role, "content": m.content}


def _wire_tool(tool: ToolSpec) -> dict[str, Any]:
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return {"type": "function", "function": function}


async def _parse_stream(response: httpx.Response) -> AsyncIterator[Chunk]:
    content_type = response.headers.get("content-type", "")
    if "text/html" in content_type:
        raise ProviderError("server_error", "the provider returned an HTML page instead of a stream",
                            words=error_page(None))
    calls = _ToolCallBuffer()
    finished = False
    async for line in sse_lines(response):
        if not line.startswith("data:"):
            continue  # comments (": keep-alive"), event names and blank separators
        data = line[5:].strip()
        if data == "[DONE]":
            if not finished:  # no finish_reason came: the calls so far are the answer's
                for call in calls.drain():
                    yield call
                yield DoneChunk(None)
            _check_nothing_late(calls)
            return
        for chunk in _chunks(_decode(data), calls):
            finished = finished or isinstance(chunk, DoneChunk)
            yield chunk
    if not finished:  # also when cut mid-tool-call: half a call must not run
        raise ProviderError("connection", "the provider's stream ended before the answer finished")
    _check_nothing_late(calls)


def _decode(data: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except json.JSONDecodeError:
        raise ProviderError("server_error", "the provider sent a malformed stream chunk")
    if not isinstance(obj, dict):
        raise ProviderError("server_error", "the provider sent a malformed stream chunk")
    if "error" in obj:
        raise _body_error(obj["error"])
    return obj


def _check_nothing_late(calls: _ToolCallBuffer) -> None:
    """Tool-call fragments after the finish_reason would be lost silently; say so instead."""
    if calls.pending:
        raise ProviderError("server_error", "the provider sent a tool call after the answer finished")


def _chunks(obj: dict[str, Any], calls: _ToolCallBuffer) -> list[Chunk]:
    out: list[Chunk] = []
    for choice in obj.get("choices") or []:
        delta = choice.get("delta") or {}
        text = delta.get("content")
        if isinstance(text, str) and text:
            out.append(TextChunk(text))
        fragments = delta.get("tool_calls")
        if isinstance(fragments, list):
            calls.add(fragments)
        if choice.get("finish_reason"):
            # The delta of this very chunk may hold the last fragment, so it is added first.
            out.extend(calls.drain())
            out.append(DoneChunk(choice["finish_reason"]))
    usage = obj.get("usage")
    if isinstance(usage, dict):
        details = usage.get("prompt_tokens_details") or {}
        out.append(
            UsageChunk(
                int(usage.get("prompt_tokens") or 0),
                int(usage.get("completion_tokens") or 0),
                int(details.get("cached_tokens") or 0),
            )
        )
    return out


@dataclass
class _PartialCall:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _ToolCallBuffer:
    """Reassembles streamed `delta.tool_calls` fragments into whole calls, keyed by index.

    Servers differ: most send `id` and `function.name` once and then argument pieces;
    some send a whole call in one fragment, repeat the id or name on every fragment, or
    leave out `index` (then the fragment's position in its list stands in for it).
    """

    def __init__(self) -> None:
        self._calls: dict[int, _PartialCall] = {}

    @property
    def pending(self) -> bool:
        return bool(self._calls)

    def add(self, fragments: list[Any]) -> None:
        for position, fragment in enumerate(fragments):
            if isinstance(fragment, dict):
                self._merge(self._slot(position, fragment), fragment)

    def drain(self) -> list[ToolCallChunk]:
        """The calls so far, in index order, and an empty buffer."""
        out = [
            ToolCallChunk(index, call.call_id, call.name, "".join(call.arguments))
            for index, call in sorted(self._calls.items())
        ]
        self._calls.clear()
        return out

    def _slot(self, position: int, fragment: dict[str, Any]) -> int:
        index = fragment.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            return index
        call_id = fragment.get("id")
        if isinstance(call_id, str) and call_id:
            for slot, call in self._calls.items():
                if call.call_id == call_id:
                    return slot
            taken = self._calls.get(position)
            if taken is not None and taken.call_id and taken.call_id != call_id:
                return max(self._calls) + 1  # a new call, not more of the one at this position
        return position

    def _merge(self, slot: int, fragment: dict[str, Any]) -> None:
        call = self._calls.setdefault(slot, _PartialCall())
        call_id = fragment.get("id")
        if isinstance(call_id, str) and call_id and not call.call_id:
            call.call_id = call_id  # the first id wins; repeats are ignored
        function = fragment.get("function")
        if not isinstance(function, dict):
            return
        name = function.get("name")
        if isinstance(name, str) and name:
            # A repeated (or growing) name replaces; anything else is a name sent in pieces.
            call.name = name if name.startswith(call.name) else call.name + name
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # a few servers send an object, not JSON text
            arguments = json.dumps(arguments)
        if isinstance(arguments, str) and arguments:
            call.arguments.append(arguments)


def _http_error(name: str, response: httpx.Response) -> ProviderError:
    status = response.status_code
    detail: Any = None
    try:
        detail = response.json().get("error")
    except (ValueError, AttributeError):
        pass
    headers = dict(response.headers)
    if detail is None:
        html = looks_like_html(response.headers.get("content-type", ""), response.content)
        what = "the provider returned an HTML page" if html else "no error details"
        return from_http(name, status, what, headers, html=html)
    message, code = _detail(detail)
    return from_http(name, status, message, headers, code)


def _body_error(detail: Any) -> ProviderError:
    """An error object inside a 200 stream: classified by its code and message."""
    message, code = _detail(detail)
    status = detail.get("code") if isinstance(detail, dict) else None
    return from_http("provider", status if isinstance(status, int) and status >= 400 else 200,
                     message, None, code)


def _detail(detail: Any) -> tuple[str, str | None]:
    if isinstance(detail, dict):
        code = detail.get("code") or detail.get("type")
        return str(detail.get("message") or "no message"), str(code) if code else None
    return str(detail), None
