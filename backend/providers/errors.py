"""Provider failures classified: what kind each is, and what the turn may do about it.

Every provider translates its transport and wire errors into `ProviderError`
with one of the kinds below, using `from_http` for HTTP answers so that
status codes, `Retry-After` and the tell-tale messages of context overflow
or a content filter are read the same way for every provider.  The turn
reads only the kind's `Policy`: retry (with backoff), compress (back to
preflight), or fall back to the next provider.  Messages say what happened
and what a person can do; they never carry a key (providers redact).
"""

from __future__ import annotations

import email.utils
import re
import time
from dataclasses import dataclass
from typing import Literal

from backend.errors import ProviderError

Kind = Literal[
    "auth", "billing", "rate_limit", "overloaded", "server_error", "timeout", "connection",
    "context_overflow", "payload_too_large", "model_not_found", "bad_request", "content_policy",
    "unknown", "not_configured",
]

RETRY_AFTER_CAP_S = 600.0


@dataclass(frozen=True)
class Policy:
    retryable: bool  # the same request to the same provider may succeed later
    compress: bool  # the request is too large: go back to preflight
    fallback: bool  # another provider may succeed
    advice: str  # what a person can do, appended to the message


POLICIES: dict[str, Policy] = {
    "auth": Policy(False, False, True, "check the API key (secret.set or api_key_env)"),
    "billing": Policy(False, False, True, "check the account's credit or plan"),
    "rate_limit": Policy(True, False, True, "wait a little or raise the account's limits"),
    "overloaded": Policy(True, False, True, "the provider is busy; try again soon"),
    "server_error": Policy(True, False, True, "the provider failed; try again soon"),
    "timeout": Policy(True, False, True, "the provider did not answer in time"),
    "connection": Policy(True, False, True, "check that the server is running and base_url is right"),
    "context_overflow": Policy(False, True, False, "the conversation is too long for this model"),
    "payload_too_large": Policy(False, True, False, "the request is too large for this provider"),
    "model_not_found": Policy(False, False, True, "check the model name in config.toml"),
    "bad_request": Policy(False, False, False, "the provider refused the request as malformed"),
    "content_policy": Policy(False, False, False, "the provider's content filter refused it"),
    "unknown": Policy(False, False, True, "see the backend log"),
    "not_configured": Policy(False, False, True, "configure a provider (see the README)"),
}

_STATUS_KINDS: dict[int, Kind] = {
    400: "bad_request", 401: "auth", 402: "billing", 403: "auth", 404: "model_not_found",
    408: "timeout", 409: "overloaded", 413: "payload_too_large", 422: "bad_request",
    429: "rate_limit", 503: "overloaded", 529: "overloaded",
}
_OVERFLOW = re.compile(
    r"context[_ ]length|context window|maximum context|too many tokens|prompt is too long|"
    r"exceeds? the (?:model's )?(?:maximum|context)|input is too long|reduce the length",
    re.IGNORECASE,
)
_POLICY = re.compile(r"content[_ ]policy|content[_ ]filter|safety system|flagged", re.IGNORECASE)
_BILLING = re.compile(
    r"insufficient[_ ]quota|billing|credit balance|payment|spend[_ ]limit", re.IGNORECASE
)


def policy(err: ProviderError) -> Policy:
    return POLICIES.get(err.kind, POLICIES["unknown"])


def from_http(
    provider: str, status: int, message: str | None, headers: dict[str, str] | None = None,
    code: str | None = None,
) -> ProviderError:
    """A provider's non-200 answer (or an error object inside a 200 stream, status 200)."""
    text = f"{code or ''} {message or ''}"
    kind: Kind = _STATUS_KINDS.get(status, "server_error" if status >= 500 else "unknown")
    if status == 200:  # an error object inside a stream: only its words tell
        kind = _stream_kind(text)
    if _OVERFLOW.search(text) and kind in ("bad_request", "payload_too_large", "unknown"):
        kind = "context_overflow"
    elif _POLICY.search(text) and kind in ("bad_request", "unknown"):
        kind = "content_policy"
    elif _BILLING.search(text) and kind in ("rate_limit", "auth", "bad_request", "unknown"):
        kind = "billing"
    what = f"HTTP {status}" if status != 200 else "error in the stream"
    detail = (message or "no message").strip()[:500]
    err = ProviderError(kind, f"{provider}: {what}: {detail}", status=status if status != 200 else None)
    err.retry_after = retry_after(headers or {})
    return err


_STREAM_KINDS: tuple[tuple[re.Pattern[str], Kind], ...] = (
    (re.compile(r"overload", re.IGNORECASE), "overloaded"),
    (re.compile(r"rate[_ ]limit|too many requests", re.IGNORECASE), "rate_limit"),
    (re.compile(r"server[_ ]error|internal|api[_ ]error", re.IGNORECASE), "server_error"),
    (re.compile(r"timeout|timed out", re.IGNORECASE), "timeout"),
)


def _stream_kind(text: str) -> Kind:
    return next((kind for pattern, kind in _STREAM_KINDS if pattern.search(text)), "unknown")


def retry_after(headers: dict[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date),
    capped; None when absent or unreadable."""
    lower = {k.lower(): v for k, v in headers.items()}
    raw_ms = lower.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return _cap(float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = lower.get("retry-after")
    if raw is None:
        return None
    try:
        return _cap(float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return _cap(when.timestamp() - (time.time() if now is None else now))


def _cap(seconds: float) -> float:
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)


def described(err: ProviderError) -> str:
    """The message with its advice, for failure_reason and events."""
    advice = policy(err).advice
    return err.message if advice in err.message else f"{err.message} ({advice})"
