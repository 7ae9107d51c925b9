"""`door.test` for Matrix: does the homeserver answer as one, and whose is the access token?

Two requests, each bounded: `GET /_matrix/client/versions` (no token: is anything there, and is
it a homeserver?), then `GET /_matrix/client/v3/account/whoami` with the token (is it valid,
and which account does it speak as?).  Every answer is in words a person can act on; the token
is only ever in the second request's Authorization header, never in a message.  When the URL
is not a homeserver but its site's `.well-known/matrix/client` names one, the words say which.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import httpx

from shared import protocol as p

TIMEOUT_S = 10.0


@dataclass(frozen=True)
class _Answer:
    status: int
    body: Any  # the JSON body, or None when it was not JSON


async def check(homeserver: str, user_id: str, token: str) -> p.DoorTestResult:
    """Checks `homeserver` and `token` for `user_id`; failures are the result, not errors."""
    base = homeserver.rstrip("/")
    started = time.monotonic()

    def result(ok: bool, reached: bool, error: str | None = None, **who: str | None) -> p.DoorTestResult:
        return p.DoorTestResult(ok=ok, reached=reached, error=error,
                                latency_ms=int((time.monotonic() - started) * 1000), **who)

    async with httpx.AsyncClient(timeout=TIMEOUT_S, trust_env=False, follow_redirects=False) as http:
        try:
            versions = await _get(http, f"{base}/_matrix/client/versions")
        except httpx.HTTPError as exc:
            return result(False, False, f"Cannot reach {base}: {_why(exc)}. Check the homeserver "
                          "URL and that this computer can reach it.")
        if not (versions.status == 200 and isinstance(versions.body, dict)
                and isinstance(versions.body.get("versions"), list)):
            return result(False, False, await _not_a_homeserver(http, base, versions))
        try:
            whoami = await _get(http, f"{base}/_matrix/client/v3/account/whoami",
                                {"Authorization": f"Bearer {token}"})
        except httpx.HTTPError as exc:
            return result(False, True, f"Reached {base}, but the token check failed: {_why(exc)}.")
    body = whoami.body if isinstance(whoami.body, dict) else {}
    if whoami.status != 200 or not isinstance(body.get("user_id"), str):
        return result(False, True, _refused(base, whoami.status, body))
    account, device = str(body["user_id"]), body.get("device_id")
    device_id = str(device) if isinstance(device, str) else None
    if account != user_id:
        return result(False, True, (
            f"{base} accepted the token, but it belongs to {account}, not {user_id}: set the "
            f"account to {account}, or paste {user_id}'s token."), account=account,
            device_id=device_id)
    return result(True, True, account=account, device_id=device_id)


async def _get(http: httpx.AsyncClient, url: str, headers: dict[str, str] | None = None) -> _Answer:
    response = await http.get(url, headers=headers)
    try:
        body = response.json()
    except ValueError:
        body = None
    return _Answer(response.status_code, body)


async def _not_a_homeserver(http: httpx.AsyncClient, base: str, versions: _Answer) -> str:
    """Words for a URL that answered, but not as a homeserver; the homeserver its site names
    in `.well-known/matrix/client`, when it names one."""
    said = f"HTTP {versions.status}" if versions.status != 200 else "an answer that is not Matrix's"
    text = (f"{base} answered ({said} for /_matrix/client/versions), but not as a Matrix "
            "homeserver. Check the URL: it is the homeserver's address, not a chat app's page.")
    try:
        known = await _get(http, f"{base}/.well-known/matrix/client")
    except httpx.HTTPError:
        return text
    server = known.body.get("m.homeserver") if isinstance(known.body, dict) else None
    url = server.get("base_url") if isinstance(server, dict) else None
    if isinstance(url, str) and url.startswith(("http://", "https://")) \
            and url.rstrip("/") != base:
        return (f"{base} is not the homeserver itself: its site names {url.rstrip('/')} as "
                "its homeserver. Use that URL.")
    return text


def _refused(base: str, status: int, body: dict[str, Any]) -> str:
    code = body.get("errcode")
    said = f"{code}: {body.get('error', '')}".rstrip(": ") if isinstance(code, str) else f"HTTP {status}"
    if code == "M_UNKNOWN_TOKEN" or status == 401:
        return (f"Reached {base}, but it refused the access token ({said}): it is mistyped, or "
                "that login was logged out. Copy the token again, or log in as the account "
                "once more for a new one.")
    if code == "M_FORBIDDEN" or status == 403:
        return f"Reached {base}, but it refused this account ({said})."
    return f"Reached {base}, but the token check failed ({said})."


def _why(exc: httpx.HTTPError) -> str:
    """Why a request failed, in words: the system's for a refused or unknown host."""
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {TIMEOUT_S:g} s"
    if isinstance(exc, httpx.UnsupportedProtocol):
        return "the URL must start with https:// (or http://)"
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, socket.gaierror):
            return f"the name was not found ({str(cause.strerror or cause).lower()})"
        if isinstance(cause, OSError) and cause.errno and cause.errno > 0:
            return os.strerror(cause.errno).lower()
        cause = cause.__cause__ or cause.__context__
    text = str(exc)
    return text[:200] if text else type(exc).__name__


def user_id_problem(user_id: str) -> str | None:
    """What is wrong with a Matrix user id (`@name:server`), or None."""
    name, sep, server = user_id.partition(":")
    if not user_id.startswith("@") or not sep or len(name) < 2 or not server \
            or any(c.isspace() for c in user_id):
        return (f"{user_id!r} is not a Matrix user id: it looks like @name:server "
                "(e.g. @agent:matrix.org)")
    return None

