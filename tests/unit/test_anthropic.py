"""AnthropicChat against the real fake Anthropic server on loopback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from backend.errors import ProviderError
from backend.providers.anthropic import AnthropicChat, messages_url, wire_messages
from backend.providers.base import (
    ChatRequest,
    Chunk,
    DoneChunk,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
    UsageChunk,
    WireMessage,
    WireToolCall,
)
from tests.fakes.anthropic_server import FakeAnthropic, Reply

KEY = "sk-ant-api03-secret0123456789"
READ = ToolSpec(
    "read_file",
    "Read a text file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic()
    yield server
    server.close()
    assert server.errors == [], f"the fake Anthropic server saw bad requests: {server.errors}"


@pytest.fixture
async def chat(fake: FakeAnthropic) -> AsyncIterator[AnthropicChat]:
    provider = AnthropicChat("claude", fake.base_url, "claude-fake", KEY)
    yield provider
    await provider.aclose()


def _request(*messages: WireMessage, **options: Any) -> ChatRequest:
    return ChatRequest("claude-fake", list(messages) or [WireMessage("user", "hi")], **options)


async def _collect(chat: AnthropicChat, request: ChatRequest | None = None) -> list[Chunk]:
    return [chunk async for chunk in chat.stream(request or _request())]


async def _failure(chat: AnthropicChat, seen: list[Chunk] | None = None) -> ProviderError:
    """The ProviderError the stream ends with; what came before it goes into `seen`."""
    seen = [] if seen is None else seen
    with pytest.raises(ProviderError) as caught:
        await _collect_into(seen, chat)
    assert KEY not in caught.value.message
    assert KEY not in str(caught.value)
    return caught.value


async def _collect_into(seen: list[Chunk], chat: AnthropicChat) -> None:
    async for chunk in chat.stream(_request()):
        seen.append(chunk)


# --- streaming ---------------------------------------------------------------------------


async def test_text_streams_then_usage_then_done(fake: FakeAnthropic, chat: AnthropicChat) -> None:
    fake.script(Reply(deltas=["Hel", "lo", " there"], input_tokens=20, output_tokens=3))
    chunks = await _collect(chat)
    assert chunks == [
        TextChunk("Hel"), TextChunk("lo"), TextChunk(" there"), UsageChunk(20, 3, 0), DoneChunk("stop"),
    ]
    (rec,) = fake.snapshot()
    assert rec.path == "/v1/messages"
    assert rec.headers["x-api-key"] == KEY
    assert rec.headers["anthropic-version"] == "2023-06-01"
    assert rec.headers["accept"] == "text/event-stream"
    assert rec.body == {
        "model": "claude-fake", "max_tokens": 4096, "stream": True,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }


async def test_max_tokens_tools_and_extra(fake: FakeAnthropic, chat: AnthropicChat) -> None:
    request = _request(tools=(READ,), max_tokens=321, extra={"temperature": 0.2, "max_tokens": 99})
    await _collect(chat, request)
    body = fake.snapshot()[0].body
    assert body["max_tokens"] == 99  # extra is merged last
    assert body["temperature"] == 0.2
    assert body["tools"] == [
        {"name": "read_file", "description": "Read a text file.", "input_schema": READ.parameters}
    ]
    await _collect(chat, _request(max_tokens=321))
    assert fake.snapshot()[1].body["max_tokens"] == 321
    assert "tools" not in fake.snapshot()[1].body


async def test_usage_counts_cache_reads_and_writes(fake: FakeAnthropic, chat: AnthropicChat) -> None:
    fake.script(Reply(input_tokens=5, cache_creation_tokens=100, cache_read_tokens=900, output_tokens=42))
    chunks = await _collect(chat)
    assert chunks[-2:] == [UsageChunk(1005, 42, 900), DoneChunk("stop")]


async def test_stop_reasons_mapped(fake: FakeAnthropic, chat: AnthropicChat) -> None:
    fake.script(Reply(stop_reason="max_tokens"), Reply(stop_reason="refusal"))
    assert (await _collect(chat))[-1] == DoneChunk("length")
    assert (await _collect(chat))[-1] == DoneChunk("refusal")


# --- tool calls ----------------------------------------------------------------------------


async def test_tool_use_round_trip(fake: FakeAnthropic, chat: AnthropicChat) -> None:
    fake.script(
        Reply.tools(
            {"id": "toolu_01", "name": "read_file", "input": {"path": "a.txt"}},
            {"id": "toolu_02", "name": "list_dir", "input": {"path": ".", "depth": 2}},
            text="Looking.",
        ),
        Reply(deltas=["Done."]),
    )
    first = await _collect(chat, _request(WireMessage("user", "read a.txt"), tools=(READ,)))
    assert first == [
        TextChunk("Looking."),
        ToolCallChunk(0, "toolu_01", "read_file", '{"path": "a.txt"}'),
        ToolCallChunk(1, "toolu_02", "list_dir", '{"path": ".", "depth": 2}'),
        UsageChunk(11, 7, 0),
        DoneChunk("tool_calls"),
    ]
    calls = tuple(WireToolCall(c.call_id, c.name, c.arguments) for c in first if isinstance(c, ToolCallChunk))
    second = _request(
        WireMessage("system", "You are terse."),
        WireMessage("user", "read a.txt"),
        WireMessage("assistant", "Looking.", tool_calls=calls),
        WireMessage("tool", "hello", tool_call_id="toolu_01", name="read_file"),
        WireMessage("tool", "a.txt", tool_call_id="toolu_02", name="list_dir"),
        tools=(READ,),
    )
    assert await _collect(chat, second) == [TextChunk("Done."), UsageChunk(11, 7, 0), DoneChunk("stop")]
    body = fake.snapshot()[1].body
    assert body["system"] == "You are terse."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "read a.txt"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "a.txt"}},
            {"type": "tool_use", "id": "toolu_02", "name": "list_dir", "input": {"path": ".", "depth": 2}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "hello"},
            {"type": "tool_result", "tool_use_id": "toolu_02", "content": "a.txt"},
        ]},
    ]


async def test_tool_input_fragments_arrive_whole(fake: FakeAnthropic, chat: AnthropicChat) -> None:
    raw = '{"path": "src/main.py", "start": 10, "end": 200, "note": "ünïcode"}'
    fake.script(Reply.tools({"name": "read_file", "input": raw}), Reply.tools({"name": "list_dir"}))
    calls = [c for c in await _collect(chat) if isinstance(c, ToolCallChunk)]
    assert [(c.name, c.arguments) for c in calls] == [("read_file", raw)]
    assert calls[0].call_id.startswith("toolu_fake_")
    calls = [c for c in await _collect(chat) if isinstance(c, ToolCallChunk)]
    assert [(c.name, c.arguments) for c in calls] == [("list_dir", "{}")]


async def test_malformed_arguments_pass_through_and_replay_as_empty_input(
    fake: FakeAnthropic, chat: AnthropicChat
) -> None:
    fake.script(Reply.tools({"id": "toolu_bad", "name": "read_file", "input": '{"path": "a'}), Reply())
    calls = [c for c in await _collect(chat) if isinstance(c, ToolCallChunk)]
    assert calls == [ToolCallChunk(0, "toolu_bad", "read_file", '{"path": "a')]  # the turn judges it
    history = _request(
        WireMessage("user", "go"),
        WireMessage("assistant", "", tool_calls=(WireToolCall("toolu_bad", "read_file", '{"path": "a'),)),
        WireMessage("tool", "Error: arguments are not valid JSON", tool_call_id="toolu_bad"),
    )
    await _collect(chat, history)
    assistant = fake.snapshot()[1].body["messages"][1]
    assert assistant == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_bad", "name": "read_file", "input": {}},
    ]}  # and no empty text block for the empty content


async def test_cut_stream_yields_no_tool_call(fake: FakeAnthropic, chat: AnthropicChat) -> None:
    fake.script(Reply.tools({"name": "read_file", "input": {"path": "a"}}, text="Reading", truncate=True))
    seen: list[Chunk] = []
    err = await _failure(chat, seen)
    assert err.kind == "connection"
    assert seen == [TextChunk("Reading")]


# --- translation of the history ------------------------------------------------------------


async def test_system_messages_go_top_level(fake: FakeAnthropic, chat: AnthropicChat) -> None:
    await _collect(chat, _request(
        WireMessage("system", "Be brief."),
        WireMessage("user", "hi"),
        WireMessage("system", "Project notes."),
        WireMessage("system", "  "),
    ))
    body = fake.snapshot()[0].body
    # Several system messages (the frozen prompt, then memory): one text block each, the
    # cache breakpoint on the first, so a change in the later ones keeps the first cached.
    assert body["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Project notes."},
    ]
    assert [m["role"] for m in body["messages"]] == ["user"]


async def test_consecutive_roles_are_merged(fake: FakeAnthropic, chat: AnthropicChat) -> None:
    calls = (WireToolCall("call_a", "read_file", '{"path": "a"}'), WireToolCall("call_b", "read_file", "{}"))
    await _collect(chat, _request(
        WireMessage("user", "one"),
        WireMessage("user", "two"),
        WireMessage("assistant", "   "),  # blank: dropped, so the users around it merge
        WireMessage("user", "three"),
        WireMessage("assistant", "", tool_calls=calls),
        WireMessage("tool", "A", tool_call_id="call_a"),
        WireMessage("tool", "", tool_call_id="call_b"),
        WireMessage("user", "and now?"),
        WireMessage("assistant", "Thinking"),
        WireMessage("assistant", "more."),
        WireMessage("user", "ok"),
    ))
    assert fake.snapshot()[0].body["messages"] == [
        {"role": "user", "content": [
            {"type": "text", "text": "one"},
            {"type": "text", "text": "two"},
            {"type": "text", "text": "three"},
        ]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_a", "name": "read_file", "input": {"path": "a"}},
            {"type": "tool_use", "id": "call_b", "name": "read_file", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_a", "content": "A"},
            {"type": "tool_result", "tool_use_id": "call_b"},  # empty: no blank content sent
            {"type": "text", "text": "and now?"},
        ]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Thinking"}, {"type": "text", "text": "more."},
        ]},
        {"role": "user", "content": [{"type": "text", "text": "ok"}]},
    ]


async def test_history_starting_with_the_model_gets_a_user_turn_first(
    fake: FakeAnthropic, chat: AnthropicChat
) -> None:
    await _collect(chat, _request(
        WireMessage("system", "sys"), WireMessage("assistant", "Hello!"), WireMessage("user", "hi"),
    ))
    messages = fake.snapshot()[0].body["messages"]
    assert messages[0] == {"role": "user", "content": [{"type": "text", "text": "(continuing)"}]}
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]


def test_translation_edges() -> None:
    system, messages = wire_messages([WireMessage("system", "s")])
    assert (system, [m["role"] for m in messages]) == ("s", ["user"])  # never an empty list
    _, messages = wire_messages([WireMessage("user", "q"), WireMessage("assistant", "Sure:  \n")])
    assert messages[-1]["content"] == [{"type": "text", "text": "Sure:"}]  # a prefill: no trailing blank
    _, messages = wire_messages([
        WireMessage("user", "q"),
        WireMessage("assistant", "", tool_calls=(WireToolCall("call:1", "t", "[1]"),)),
        WireMessage("tool", "r", tool_call_id="call:1"),
    ])
    assert messages[1]["content"][0]["id"] == messages[2]["content"][0]["tool_use_id"] == "call_1"
    assert messages[1]["content"][0]["input"] == {}  # JSON, but not an object
    _, messages = wire_messages([
        WireMessage("user", "q"),
        WireMessage("assistant", "", tool_calls=(WireToolCall("c1", "t", "{}"),)),
        WireMessage("user", "wait"),
        WireMessage("tool", "r", tool_call_id="c1"),
    ])
    assert [b["type"] for b in messages[2]["content"]] == ["tool_result", "text"]  # results first


@pytest.mark.parametrize(
    ("base_url", "url"),
    [
        ("https://api.anthropic.com/v1", "https://api.anthropic.com/v1/messages"),
        ("https://api.anthropic.com/v1/", "https://api.anthropic.com/v1/messages"),
        ("https://api.anthropic.com", "https://api.anthropic.com/v1/messages"),
        ("http://127.0.0.1:9/proxy/v1", "http://127.0.0.1:9/proxy/v1/messages"),
    ],
)
def test_messages_url(base_url: str, url: str) -> None:
    assert messages_url(base_url) == url


async def test_openai_default_base_url_is_refused() -> None:
    chat = AnthropicChat("claude", "https://api.openai.com/v1", "claude-fake", KEY)
    try:
        err = await _failure(chat)
    finally:
        await chat.aclose()
    assert err.kind == "not_configured"
    assert "api.anthropic.com" in err.message


# --- failures -------------------------------------------------------------------------------


async def test_error_event_after_200_is_overloaded(fake: FakeAnthropic, chat: AnthropicChat) -> None:
    fake.script(Reply.overloaded_mid_stream("Partial"))
    seen: list[Chunk] = []
    err = await _failure(chat, seen)
    assert seen == [TextChunk("Partial")]
    assert err.kind == "overloaded"
    assert "Overloaded" in err.message


async def test_429_with_retry_after_is_rate_limit(fake: FakeAnthropic, chat: AnthropicChat) -> None:
    fake.script(Reply.http_error(429, "rate_limit_error", "Number of requests has exceeded your rate limit",
                                 retry_after="7"))
    err = await _failure(chat)
    assert (err.kind, err.status, err.retry_after) == ("rate_limit", 429, 7.0)
    assert err.message.startswith("claude: HTTP 429: Number of requests")


@pytest.mark.parametrize(
    ("status", "kind", "message", "expected"),
    [
        (401, "authentication_error", "invalid x-api-key", "auth"),
        (529, "overloaded_error", "Overloaded", "overloaded"),
        (400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum",
         "context_overflow"),
        (400, "invalid_request_error", "Your credit balance is too low", "billing"),
        (404, "not_found_error", "model: claude-nope", "model_not_found"),
        (500, "api_error", "Internal server error", "server_error"),
    ],
)
async def test_http_errors_classified(
    fake: FakeAnthropic, chat: AnthropicChat, status: int, kind: str, message: str, expected: str
) -> None:
    fake.script(Reply.http_error(status, kind, message))
    err = await _failure(chat)
    assert (err.kind, err.status) == (expected, status)


async def test_key_echoed_by_the_server_is_redacted(fake: FakeAnthropic, chat: AnthropicChat) -> None:
    fake.script(Reply.http_error(401, "authentication_error", f"invalid x-api-key: {KEY}"),
                Reply(stream_error={"type": "api_error", "message": f"key {KEY} broke"}))
    assert (await _failure(chat)).kind == "auth"  # _failure asserts the key is absent
    assert (await _failure(chat)).kind == "server_error"


async def test_truncated_stream_is_a_connection_error(fake: FakeAnthropic, chat: AnthropicChat) -> None:
    fake.script(Reply(deltas=["Half"], truncate=True))
    seen: list[Chunk] = []
    err = await _failure(chat, seen)
    assert err.kind == "connection"
    assert seen == [TextChunk("Half")]


async def test_stream_closed_cleanly_before_message_stop(fake: FakeAnthropic, chat: AnthropicChat) -> None:
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {"usage": {"input_tokens": 1}}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}]
    raw = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    fake.script(Reply(raw=raw))
    err = await _failure(chat)
    assert err.kind == "connection"
    assert "ended before the answer finished" in err.message


@pytest.mark.parametrize(
    ("status", "raw", "content_type", "expected"),
    [
        (200, b"<html><body>Gateway</body></html>", "text/html", "server_error"),
        (502, b"<html><body>Bad gateway</body></html>", "text/html", "server_error"),
        (200, b"event: message_start\ndata: {not json\n\n", "text/event-stream", "server_error"),
        (200, b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
         "application/json", "overloaded"),
    ],
)
async def test_odd_bodies(
    fake: FakeAnthropic, chat: AnthropicChat, status: int, raw: bytes, content_type: str, expected: str
) -> None:
    fake.script(Reply(status=status, raw=raw, content_type=content_type))
    assert (await _failure(chat)).kind == expected


async def test_connection_refused() -> None:
    server = FakeAnthropic()
    url = server.base_url
    server.close()
    chat = AnthropicChat("claude", url, "claude-fake", KEY)
    try:
        err = await _failure(chat)
    finally:
        await chat.aclose()
    assert err.kind == "connection"


# --- the fake checks what the real API checks ---------------------------------------------


async def test_fake_refuses_what_the_api_refuses(fake: FakeAnthropic) -> None:
    bad = {
        "model": "m", "stream": True,
        "messages": [
            {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "r"}]},
            {"role": "user", "content": [{"type": "text", "text": " "}]},
            {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
            {"role": "user", "content": [
                {"type": "text", "text": "b"}, {"type": "tool_result", "tool_use_id": "toolu_y"},
            ]},
        ],
    }
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{fake.base_url}/messages", json=bad)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    found = "\n".join(fake.errors)
    for expected in ("x-api-key", "anthropic-version", "max_tokens", "first message must use the user role",
                     "roles must alternate", "unexpected tool_use_id", "non-whitespace text",
                     "tool_result blocks must come before any text"):
        assert expected in found
    fake.errors.clear()  # seen on purpose


async def test_fake_refuses_an_unanswered_tool_use(fake: FakeAnthropic, chat: AnthropicChat) -> None:
    history = _request(
        WireMessage("user", "go"),
        WireMessage("assistant", "", tool_calls=(WireToolCall("toolu_1", "read_file", "{}"),)),
        WireMessage("user", "never mind"),
    )
    err = await _failure_of(chat, history)
    assert err.kind == "bad_request"
    assert any("without tool_result" in e for e in fake.errors)
    fake.errors.clear()  # seen on purpose


async def _failure_of(chat: AnthropicChat, request: ChatRequest) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await _collect(chat, request)
    return caught.value
