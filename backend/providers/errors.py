"""Provider failures classified: what kind each is, what the turn may do about it, and what a
person is told.

Every provider translates its transport and wire errors into `ProviderError`
with one of the kinds below, using `from_http` for HTTP answers so that
status codes, `Retry-After` and the tell-tale messages of context overflow
or a content filter are read the same way for every provider.  The turn
reads only the kind's `Policy`: retry (with backoff), compress (back to
preflight), or fall back to the next provider.

Two texts leave here for every failure: `told(err)`, one or two sentences in
the words a person uses, ending in what to do (`WORDS`, or a sentence the
raiser knew better, `err.words`); and `err.message`, the raw detail (which
provider, the HTTP status, what the server said), which front-ends show a
click away.  Neither ever carries a key (providers redact the detail; the
words are fixed sentences that never quote the server).
"""

from __future__ import annotations

import http
import re
import time
from dataclasses import dataclass
from typing import Literal

from backend.errors import ProviderError

Kind = Literal[
    "auth", "billing", "rate_limit", "overloaded", "server_error", "timeout", "connection",
    "context_overflow", "payload_too_large", "model_not_found", "bad_request", "content_policy",
    "unknown", "not_configured", "crashed",
]

RETRY_AFTER_CAP_S = 600.0

SETTINGS = "Settings → Providers"  # where the desktop app edits providers


@dataclass(frozen=True)
class Policy:
    retryable: bool  # the same request to the same provider may succeed later
    compress: bool  # the request is too large: go back to preflight
    fallback: bool  # another provider may succeed


POLICIES: dict[str, Policy] = {
    "auth": Policy(False, False, True),
    "billing": Policy(False, False, True),
    "rate_limit": Policy(True, False, True),
    "overloaded": Policy(True, False, True),
    "server_error": Policy(True, False, True),
    "timeout": Policy(True, False, True),
    "connection": Policy(True, False, True),
    "context_overflow": Policy(False, True, False),
    "payload_too_large": Policy(False, True, False),
    "model_not_found": Policy(False, False, True),
    "bad_request": Policy(False, False, False),
    "content_policy": Policy(False, False, False),
    "unknown": Policy(False, False, True),
    "not_configured": Policy(False, False, True),
    # The provider's own process died (the offline model's server): it was already started
    # once more (providers/local.py), so the turn does not try it again.
    "crashed": Policy(False, False, True),
}

# What a person is told for each kind: what happened, then what to do.
WORDS: dict[str, str] = {
    "auth": f"The server rejected the API key. Paste a new key in {SETTINGS}.",
    "billing": "The provider refused because of the account's credit or plan. Check your "
               "account on the provider's website.",
    "rate_limit": "The provider is limiting how many requests you may send. Wait a minute and "
                  "try again, or raise the account's limits.",
    "overloaded": "The provider's servers are too busy right now. Try again in a few minutes.",
    "server_error": "The provider's server failed while answering. Try again soon; if it keeps "
                    f"failing, check the base URL in {SETTINGS}.",
    "timeout": "The provider did not answer in time. Try again; if it keeps happening, check "
               "that its server is running.",
    "connection": "Turnkey could not reach the provider's server. Check that it is running and "
                  f"that the base URL in {SETTINGS} is right.",
    "context_overflow": "The conversation is too long for this model. Start a new session, or "
                        "choose a model with a larger context window.",
    "payload_too_large": "The request is too large for this provider. Start a new session, or "
                         "send less at once.",
    "model_not_found": f"The provider does not know this model. Check the model name in {SETTINGS}.",
    "bad_request": "The provider refused the request as malformed. The details say what it "
                   f"objected to; a setting in {SETTINGS} may not suit it.",
    "content_policy": "The provider's content filter refused this request. Rephrase it and try "
                      "again.",
    "unknown": "The provider failed in a way Turnkey does not recognize. The details say what "
               "it answered.",
    "not_configured": f"No model provider is set up yet. Add one in {SETTINGS}.",
    "crashed": "The offline model's server stopped unexpectedly. Its log (logs/llama-server.log "
               f"in the data folder) says why; add a provider in {SETTINGS} to keep working.",
}

# Kinds whose words stand even when the server sent a web page: they say more than "a page".
_PAGE_KEEPS = frozenset({"auth", "billing", "rate_limit", "overloaded"})


def policy(err: ProviderError) -> Policy:
    return POLICIES.get(err.kind, POLICIES["unknown"])


def told(err: ProviderError) -> str:
    """What a person is told about `err`: the raiser's own sentence, else its kind's."""
    return err.words or WORDS.get(err.kind, WORDS["unknown"])


def error_page(status: int | None) -> str:
    """The words for a web page where an answer should be (a wrong base URL, a proxy)."""
    what = (f"an error page ({status_text(status)})" if status
            else "a web page instead of an answer")
    return f"The provider's server answered with {what}. Check the base URL in {SETTINGS}."


def status_text(status: int) -> str:
    """`HTTP 501: Not Implemented`, or `HTTP 599` for a status without a standard phrase."""
    try:
        return f"HTTP {status}: {http.HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


def looks_like_html(content_type: str, body: bytes | str = b"") -> bool:
    """Whether an answer is a web page (by its type, or by how its body starts)."""
    if "text/html" in content_type.lower():
        return True
    head = body[:64].lstrip().lower()
    head = head.decode("ascii", "replace") if isinstance(head, bytes) else head
    return head.startswith(("<!doctype html", "<html"))


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


def from_http(
    provider: str, status: int, message: str | None, headers: dict[str, str] | None = None,
    code: str | None = None, *, html: bool = False,
) -> ProviderError:
    """A provider's non-200 answer (or an error object inside a 200 stream, status 200);
    `html`: the answer was a web page, not the API's error object."""
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
    if html and kind not in _PAGE_KEEPS:
        err.words = error_page(status if status != 200 else None)
    elif kind == "model_not_found" and not re.search(r"model", text, re.IGNORECASE):
        err.words = (f"The server has nothing at this address ({status_text(status)}). Check the "
                     f"base URL in {SETTINGS}.")
    elif kind == "server_error" and status != 200:
        err.words = (f"The provider's server failed ({status_text(status)}). Try again soon; if "
                     f"it keeps failing, check the base URL in {SETTINGS}.")
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
    import email.utils  # an HTTP date is rare here; the module costs the backend's start ~3 ms

    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return _cap(when.timestamp() - (time.time() if now is None else now))


def _cap(seconds: float) -> float:
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)
