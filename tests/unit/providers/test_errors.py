"""Classifying provider failures, what a person is told about them, reading Retry-After, and
the wait before a retry."""

from __future__ import annotations

import email.utils

import pytest

from backend.errors import ProviderError
from backend.providers.errors import (
    POLICIES,
    WORDS,
    error_page,
    from_http,
    looks_like_html,
    policy,
    retry_after,
    told,
)
from backend.turn.retry import MAX_BACKOFF_S, delay_for


@pytest.mark.parametrize(("status", "message", "kind"), [
    (401, "Incorrect API key provided", "auth"),
    (403, "forbidden", "auth"),
    (402, "payment required", "billing"),
    (429, "You exceeded your current quota (insufficient_quota)", "billing"),
    (429, "Rate limit reached", "rate_limit"),
    (529, "Overloaded", "overloaded"),
    (503, "unavailable", "overloaded"),
    (500, "oops", "server_error"),
    (502, "bad gateway", "server_error"),
    (408, "request timeout", "timeout"),
    (404, "The model `gpt-9` does not exist", "model_not_found"),
    (413, "request entity too large", "payload_too_large"),
    (400, "This model's maximum context length is 8192 tokens", "context_overflow"),
    (400, "prompt is too long: 210000 tokens > 200000 maximum", "context_overflow"),
    (400, "Your request was rejected by our content_policy", "content_policy"),
    (400, "messages: field required", "bad_request"),
    (418, "teapot", "unknown"),
])
def test_http_answers_are_classified(status: int, message: str, kind: str) -> None:
    err = from_http("main", status, message)
    assert err.kind == kind
    assert err.message.startswith(f"main: HTTP {status}: ")


def test_every_kind_says_what_to_do_and_flags_are_consistent() -> None:
    assert set(WORDS) == set(POLICIES)
    for kind, rules in POLICIES.items():
        assert not (rules.retryable and rules.compress), kind
    assert policy(from_http("m", 429, "x")).retryable
    assert not policy(from_http("m", 401, "x")).retryable
    assert policy(from_http("m", 401, "x")).fallback
    assert policy(from_http("m", 400, "maximum context length")).compress


INTERNAL = ("secret.set", "api_key_env", "base_url", "config.toml", "HTTP 4", "kind", "_")


@pytest.mark.parametrize("kind", sorted(WORDS))
def test_every_kind_is_told_in_a_persons_words_ending_in_what_to_do(kind: str) -> None:
    words = told(ProviderError(kind, "main: HTTP 999: raw server words"))
    assert words == WORDS[kind]
    assert words[0].isupper(), words
    assert words.endswith("."), words
    assert len([s for s in words.split(". ") if s]) >= 2, "what happened, then what to do"
    assert "raw server words" not in words, "the detail stays apart"
    assert not any(term in words for term in INTERNAL), words


@pytest.mark.parametrize(("status", "message", "html", "words"), [
    (401, "Incorrect API key provided", False,
     "The server rejected the API key. Paste a new key in Settings → Providers."),
    (501, "the provider returned an HTML page", True,
     "The provider's server answered with an error page (HTTP 501: Not Implemented). "
     "Check the base URL in Settings → Providers."),
    (404, "the provider returned an HTML page", True,
     "The provider's server answered with an error page (HTTP 404: Not Found). "
     "Check the base URL in Settings → Providers."),
    (500, "oops", False,
     "The provider's server failed (HTTP 500: Internal Server Error). Try again soon; if it "
     "keeps failing, check the base URL in Settings → Providers."),
    (404, "The model `gpt-9` does not exist", False, WORDS["model_not_found"]),
    (404, "no route /chat/completions", False,
     "The server has nothing at this address (HTTP 404: Not Found). Check the base URL in "
     "Settings → Providers."),
    (503, "the provider returned an HTML page", True, WORDS["overloaded"]),  # busy says more
    (429, "Rate limit reached", False, WORDS["rate_limit"]),
])
def test_http_failures_are_told_by_what_they_mean(
    status: int, message: str, html: bool, words: str
) -> None:
    err = from_http("main", status, message, html=html)
    assert told(err) == words
    assert err.message == f"main: HTTP {status}: {message}", "the raw detail is kept as it was"


def test_web_pages_are_recognized_by_type_or_by_how_they_start() -> None:
    assert looks_like_html("text/html; charset=utf-8")
    assert looks_like_html("", b"  <!DOCTYPE html><html>")
    assert looks_like_html("application/octet-stream", "<html><body>501</body></html>")
    assert not looks_like_html("application/json", b'{"error": {}}')
    assert error_page(None) == ("The provider's server answered with a web page instead of an "
                                "answer. Check the base URL in Settings → Providers.")


def test_an_error_inside_a_200_stream_is_classified_by_its_text() -> None:
    err = from_http("main", 200, "Overloaded", code="overloaded_error")
    assert err.kind == "overloaded"
    assert "error in the stream" in err.message
    assert from_http("main", 200, "Rate limit reached", code="rate_limit_exceeded").kind == \
        "rate_limit"
    assert from_http("main", 200, "something odd").kind == "unknown"
    assert from_http("main", 200, "context_length_exceeded").kind == "context_overflow"


def test_retry_after_in_seconds_milliseconds_and_http_dates() -> None:
    assert retry_after({"Retry-After": "7"}) == 7.0
    assert retry_after({"retry-after-ms": "1500"}) == 1.5
    assert retry_after({"Retry-After": "99999"}) == 600.0, "capped"
    assert retry_after({"Retry-After": "-3"}) == 0.0
    assert retry_after({"Retry-After": "soon"}) is None
    assert retry_after({}) is None
    date = email.utils.formatdate(1_000_030.0, usegmt=True)
    assert retry_after({"Retry-After": date}, now=1_000_000.0) == pytest.approx(30.0)
    assert from_http("m", 429, "x", {"Retry-After": "3"}).retry_after == 3.0


def test_the_wait_honours_retry_after_else_grows_with_jitter() -> None:
    told = ProviderError("rate_limit", "x", retry_after=12.0)
    assert delay_for(told, 1) == 12.0
    plain = ProviderError("server_error", "x")
    assert delay_for(plain, 1, rand=lambda: 0.0) == 0.5
    assert delay_for(plain, 1, rand=lambda: 1.0) == 1.0
    assert delay_for(plain, 2, rand=lambda: 1.0) == 2.0
    assert delay_for(plain, 20, rand=lambda: 1.0) == MAX_BACKOFF_S
