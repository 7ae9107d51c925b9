"""The HTTP boundary every provider shares: one streamed POST, httpx failures translated, keys
redacted.

A provider supplies how to read a non-200 answer and how to parse its
stream; this module owns everything else that can go wrong on the wire, so
timeouts, refused connections and broken streams read the same whoever the
provider is, and no message leaves with a key in it.  Stream lines come from
`sse_lines`, which never holds more than `MAX_LINE_BYTES` of one line: a
provider that sends more in one line (a broken proxy, a runaway answer) fails
the call before the line is read whole.

A client for an https:// provider verifies TLS with one shared context
(`tls_context`): building one reads certifi's roots, ~20 ms, which each client
would otherwise pay.  A client for a plain http:// provider (a local server)
gets a context with no roots at all: its URL is fixed and redirects are not
followed, so it never opens TLS, and if it did it would trust nothing.
`warm` builds the context a provider needs and loads what its first request
would load on the way, ahead of that request.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import re
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import msgspec

from backend.errors import ProviderError
from backend.providers.base import Chunk
from backend.providers.errors import SETTINGS

ErrorReader = Callable[[str, httpx.Response], ProviderError]
StreamParser = Callable[[httpx.Response], AsyncIterator[Chunk]]

_KEYLIKE = re.compile(r"\b(sk|pk|key|rk)-[A-Za-z0-9_\-]{8,}")

JSON_HEADERS = {"Content-Type": "application/json"}
MAX_LINE_BYTES = 1024 * 1024  # one SSE line (or one event's data); real ones are a few KB
_EOL = re.compile(rb"\r\n|\r|\n")

# What httpx loads only at the first client (httpcore, h11) and its first request (anyio's
# asyncio backend), by name, so `warm` can load them earlier; a name a later version drops
# is skipped, and that request then loads what it needs itself.
_FIRST_CALL_MODULES = ("httpcore", "anyio._backends._asyncio")


@functools.cache
def tls_context() -> ssl.SSLContext:
    """What httpx builds for `verify=True` without the environment (certifi's roots), once."""
    return httpx.create_ssl_context(trust_env=False)


@functools.cache
def _no_roots() -> ssl.SSLContext:
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies (the default), trusting nobody


def _tls_for(url: str) -> ssl.SSLContext:
    return _no_roots() if url.lower().startswith("http://") else tls_context()


def http_client(url: str, headers: dict[str, str], timeout: httpx.Timeout) -> httpx.AsyncClient:
    """A provider's HTTP client for requests to `url`: no proxy or certificate settings from
    the environment, TLS as the module's docstring says."""
    return httpx.AsyncClient(headers=headers, timeout=timeout, trust_env=False,
                             verify=_tls_for(url))


def warm(url: str) -> None:
    """Builds the TLS context for `url` and loads what a first request would; blocking (for a
    thread)."""
    _tls_for(url)
    for name in _FIRST_CALL_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


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
        # msgspec, not httpx's json.dumps: a request carrying a 10 MB image is 13 MB of JSON,
        # ~50 ms of the event loop with the standard library and ~4 ms with msgspec.
        async with client.stream("POST", url, content=msgspec.json.encode(body),
                                 headers=JSON_HEADERS) as response:
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
            words=f"Turnkey could not reach {origin(url)}. Check that the server is running and "
                  f"that the base URL in {SETTINGS} is right.",
        )
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        raise ProviderError(
            "connection", f"{name}: the connection broke mid-answer ({type(exc).__name__})"
        )
    except httpx.HTTPError as exc:
        raise ProviderError("connection", f"{name}: {type(exc).__name__}")


async def sse_lines(
    response: httpx.Response, limit: int = MAX_LINE_BYTES
) -> AsyncIterator[str]:
    """The body's lines, split at CRLF, LF or CR as SSE splits them (not at the other
    Unicode line breaks `aiter_lines` also splits at, which may sit inside a JSON string),
    decoded as UTF-8.  Raises ProviderError once a line passes `limit` bytes, so no more
    than that of it is ever held."""
    line = bytearray()
    after_cr = False  # a chunk ended in CR: an LF opening the next one belongs to it
    async for chunk in response.aiter_bytes():
        if not chunk:
            continue
        start = 1 if after_cr and chunk[:1] == b"\n" else 0
        after_cr = False
        for eol in _EOL.finditer(chunk, start):
            line += chunk[start:eol.start()]
            _check(line, limit)
            yield line.decode("utf-8", "replace")
            line.clear()
            start = eol.end()
            after_cr = eol.group() == b"\r" and start == len(chunk)
        line += chunk[start:]
        _check(line, limit)
    if line:
        yield line.decode("utf-8", "replace")


def _check(line: bytearray, limit: int) -> None:
    if len(line) > limit:
        raise ProviderError(
            "server_error",
            f"the provider sent a stream line longer than {limit // 1024} KiB; a well-formed "
            "stream sends the answer in small pieces, so this one was refused unread",
        )


def redact(message: str, key: str | None) -> str:
    """Removes the key, and anything shaped like one, from a message (providers echo them)."""
    if key:
        message = message.replace(key, "***")
    return _KEYLIKE.sub("***", message)


def origin(url: str) -> str:
    u = httpx.URL(url)
    return f"{u.scheme}://{u.host}:{u.port}" if u.port else f"{u.scheme}://{u.host}"
