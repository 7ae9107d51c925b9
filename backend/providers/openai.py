"""OpenAI-compatible Chat Completions over httpx with streaming SSE.

Speaks to OpenAI, OpenRouter, Ollama, LM Studio, vLLM and llama.cpp's server.
httpx's exceptions and the wire's oddities (HTML error pages, error objects
inside a 200 stream, a stream cut short) are translated here into
ProviderError with a message a person can act on; no key ever appears in it.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx

from backend.errors import ProviderError
from backend.providers.base import ChatRequest, Chunk, DoneChunk, TextChunk, UsageChunk

_STATUS_KINDS = {
    400: "bad_request", 401: "auth", 403: "auth", 402: "billing", 404: "model_not_found",
    408: "timeout", 413: "payload_too_large", 429: "rate_limit", 529: "overloaded",
}


class OpenAIChat:
    def __init__(
        self, name: str, base_url: str, model: str, api_key: str | None, timeout_s: float = 600.0
    ) -> None:
        self.name = name
        self.model = model
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._key = api_key
        headers = {"Accept": "text/event-stream"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # Connect fast, then allow long gaps between chunks of a thinking model.
        timeout = httpx.Timeout(timeout_s, connect=10.0)
        self._client = httpx.AsyncClient(headers=headers, timeout=timeout, trust_env=False)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
            **request.extra,
        }
        try:
            async for chunk in self._stream(body):
                yield chunk
        except ProviderError as exc:
            raise ProviderError(exc.kind, redact(exc.message, self._key), status=exc.status)

    async def _stream(self, body: dict[str, Any]) -> AsyncIterator[Chunk]:
        try:
            async with self._client.stream("POST", self._url, json=body) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise _http_error(response)
                async for chunk in _parse_stream(response):
                    yield chunk
        except httpx.TimeoutException:
            raise ProviderError("timeout", f"{self.name}: the provider did not answer in time")
        except httpx.ConnectError:
            raise ProviderError(
                "connection",
                f"{self.name}: could not connect to {_origin(self._url)}; check that the server "
                "is running and base_url is right",
            )
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise ProviderError(
                "connection", f"{self.name}: the connection broke mid-answer ({type(exc).__name__})"
            )
        except httpx.HTTPError as exc:
            raise ProviderError("connection", f"{self.name}: {type(exc).__name__}")


async def _parse_stream(response: httpx.Response) -> AsyncIterator[Chunk]:
    content_type = response.headers.get("content-type", "")
    if "text/html" in content_type:
        raise ProviderError("bad_response", "the provider returned an HTML page instead of a stream")
    finished = False
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue  # comments (": keep-alive"), event names and blank separators
        data = line[5:].strip()
        if data == "[DONE]":
            if not finished:
                yield DoneChunk(None)
            return
        try:
            obj = json.loads(data)
        except json.JSONDecodeError:
            raise ProviderError("bad_response", "the provider sent a malformed stream chunk")
        if not isinstance(obj, dict):
            raise ProviderError("bad_response", "the provider sent a malformed stream chunk")
        if "error" in obj:
            raise _body_error(obj["error"], None)
        for chunk in _chunks(obj):
            finished = finished or isinstance(chunk, DoneChunk)
            yield chunk
    if not finished:
        raise ProviderError("truncated", "the provider's stream ended before the answer finished")


def _chunks(obj: dict[str, Any]) -> list[Chunk]:
    out: list[Chunk] = []
    for choice in obj.get("choices") or []:
        delta = choice.get("delta") or {}
        text = delta.get("content")
        if isinstance(text, str) and text:
            out.append(TextChunk(text))
        if choice.get("finish_reason"):
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


def _http_error(response: httpx.Response) -> ProviderError:
    status = response.status_code
    kind = _STATUS_KINDS.get(status, "server_error" if status >= 500 else "unknown")
    detail: Any = None
    try:
        detail = response.json().get("error")
    except (ValueError, AttributeError):
        pass
    if detail is None:
        if "text/html" in response.headers.get("content-type", ""):
            return ProviderError(kind, f"HTTP {status}: the provider returned an HTML page", status=status)
        return ProviderError(kind, f"HTTP {status} from the provider", status=status)
    return _body_error(detail, status, kind)


def _body_error(detail: Any, status: int | None, kind: str = "unknown") -> ProviderError:
    message = detail.get("message") if isinstance(detail, dict) else str(detail)
    prefix = f"HTTP {status}: " if status else "provider error: "
    return ProviderError(kind, prefix + str(message or "no message")[:500], status=status)


_KEYLIKE = re.compile(r"\b(sk|pk|key|rk)-[A-Za-z0-9_\-]{8,}")


def redact(message: str, key: str | None) -> str:
    """Removes the key, and anything shaped like one, from a message (providers echo them)."""
    if key:
        message = message.replace(key, "***")
    return _KEYLIKE.sub("***", message)


def _origin(url: str) -> str:
    u = httpx.URL(url)
    return f"{u.scheme}://{u.host}:{u.port}" if u.port else f"{u.scheme}://{u.host}"
