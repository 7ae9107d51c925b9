"""The fake OpenAI server itself speaks the Chat Completions streaming wire format."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply


@pytest.fixture
def fake(fake_provider: FakeOpenAI) -> FakeOpenAI:
    return fake_provider


def _body(text: str) -> dict[str, object]:
    return {
        "model": "fake-model",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": text}],
    }


def _stream(client: httpx.Client, url: str, text: str) -> tuple[list[dict[str, Any]], bool]:
    chunks: list[dict[str, Any]] = []
    done = False
    with client.stream("POST", url + "/chat/completions", json=_body(text)) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        for line in resp.iter_lines():
            if not line:
                continue
            assert line.startswith("data: "), f"not an SSE data line: {line!r}"
            payload = line[len("data: ") :]
            if payload == "[DONE]":
                done = True
                continue
            chunks.append(json.loads(payload))
    return chunks, done


def test_streams_deltas_usage_and_done(fake: FakeOpenAI) -> None:
    fake.script(Reply(deltas=["Hel", "lo"], delay=0.01))
    with httpx.Client(trust_env=False) as client:
        chunks, done = _stream(client, fake.base_url, "hi")
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "Hello"
    assert done, "stream must end with data: [DONE]"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 7
    [req] = fake.snapshot()
    assert req.last_user_text == "hi"
    assert req.ended is not None
    assert not req.disconnected


def test_default_reply_and_http_error(fake: FakeOpenAI) -> None:
    fake.script(Reply.http_error(500, "exploded", **{"Retry-After": "0"}))
    with httpx.Client(trust_env=False) as client:
        resp = client.post(fake.base_url + "/chat/completions", json=_body("a"))
        assert resp.status_code == 500
        assert resp.json()["error"]["message"] == "exploded"
        assert resp.headers["retry-after"] == "0"
        chunks, done = _stream(client, fake.base_url, "b")
    assert done
    assert chunks[1]["choices"][0]["delta"]["content"] == "ok"
    assert [r.last_user_text for r in fake.wait_requests(2)] == ["a", "b"]


def test_hang_until_released(fake: FakeOpenAI) -> None:
    release = threading.Event()
    fake.script(Reply(deltas=["a", "b", "c"], hang_after=1, release=release))
    result: list[tuple[list[dict[str, Any]], bool]] = []

    def run() -> None:
        with httpx.Client(trust_env=False) as client:
            result.append(_stream(client, fake.base_url, "x"))

    t = threading.Thread(target=run)
    t.start()
    fake.wait_requests(1)
    time.sleep(0.3)
    assert not result, "the stream ended while it should hang"
    release.set()
    t.join(5)
    chunks, done = result[0]
    assert done
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "abc"


def test_hang_ends_quietly_when_client_disconnects(fake: FakeOpenAI) -> None:
    fake.script(Reply(deltas=["a", "b"], hang_after=1))
    with (
        httpx.Client(trust_env=False) as client,
        client.stream("POST", fake.base_url + "/chat/completions", json=_body("x")) as resp,
    ):
        for line in resp.iter_lines():
            if '"a"' in line:
                break
    deadline = time.monotonic() + 5
    while fake.snapshot()[0].ended is None and time.monotonic() < deadline:
        time.sleep(0.02)
    req = fake.snapshot()[0]
    assert req.ended is not None, "a disconnect must end the hanging reply"
    assert req.disconnected
    assert fake.active == 0


def test_truncated_and_raw_bodies(fake: FakeOpenAI) -> None:
    fake.script(
        Reply(deltas=["a"], truncate=True),
        Reply(raw=b"<html>bad gateway</html>", content_type="text/html"),
    )
    with httpx.Client(trust_env=False) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            _stream(client, fake.base_url, "t")
        resp = client.post(fake.base_url + "/chat/completions", json=_body("h"))
    assert resp.status_code == 200
    assert resp.text.startswith("<html>")


def test_max_concurrency_is_observed(fake: FakeOpenAI) -> None:
    fake.default = Reply(deltas=["x", "y"], delay=0.2)
    threads = [
        threading.Thread(
            target=lambda i=i: httpx.post(
                fake.base_url + "/chat/completions", json=_body(str(i)), trust_env=False
            )
        )
        for i in range(5)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert fake.max_active == 5
    assert fake.active == 0
