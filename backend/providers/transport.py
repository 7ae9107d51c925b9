"""The HTTP boundary every provider shares: one streamed POST, httpx failures translated, keys
redacted.

A provider supplies how to read a non-200 answer and how to parse its
stream; this module owns everything else that can go wrong on the wire, so
timeouts, refused connections and broken streams read the same whoever the
provider is, and no message leaves with a key in it.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from backend.errors import ProviderError
from backend.providers.base import Chunk

ErrorReader = Callable[[str, httpx.Response], ProviderError]
StreamParser = Callable[[httpx.Response], AsyncIterator[Chunk]]

_KEYLIKE = re.compile(r"\b(sk|pk|key|rk)-[A-Za-z0-9_\-]{8,}")


async def post_stream(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], *, name: str, key: str | None,
    http_error: ErrorReader, parse: StreamParser,
) -> AsyncIterator[Chunk]:
    """POSTs `body` and yields the parsed chunks; every failure is a ProviderError whose
    message names the provider and never carries the key."""
    try:
        async for chunk in _post(client, url, body, name, http_error, parse):
            yield chunk
    except ProviderError as exc:
        exc.message = redact(exc.message, key)
        exc.args = (exc.message,)
        raise


async def _post(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], name: str,
    http_error: ErrorReader, parse: StreamParser,
) -> AsyncIterator[Chunk]:
    try:
        async with client.stream("POST", url, json=body) as response:
            if response.status_code != 200:
                await response.aread()
                raise http_error(name, response)
            async for chunk in parse(response):
                yield chunk
    except httpx.TimeoutException:
        raise ProviderError("timeout", f"{name}: the provider did not answer in time")
    except httpx.ConnectError:
        raise ProviderError(
            "connection",
            f"{name}: could not connect to {origin(url)}; check that the server is running and "
            "base_url is right",
        )
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        raise ProviderError(
            "connection", f"{name}: the connection broke mid-answer ({type(exc).__name__})"
        )
    except httpx.HTTPError as exc:
        raise ProviderError("connection", f"{name}: {type(exc).__name__}")


def redact(message: str, key: str | None) -> str:
    """Removes the key, and anything shaped like one, from a message (providers echo them)."""
    if key:
        message = message.replace(key, "***")
    return _KEYLIKE.sub("***", message)


def origin(url: str) -> str:
    u = httpx.URL(url)
    return f"{u.scheme}://{u.host}:{u.port}" if u.port else f"{u.scheme}://{u.host}"
