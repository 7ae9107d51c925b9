"""Tool calling through OpenAIChat, against the real fake server on loopback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

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
    WireToolCall,
)
from backend.providers.openai import OpenAIChat
from tests.fakes.openai_server import FakeOpenAI, Reply

READ = ToolSpec(
    "read_file",
    "Read a text file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


@pytest.fixture
async def provider(fake_provider: FakeOpenAI) -> AsyncIterator[OpenAIChat]:
    chat = OpenAIChat("fake", fake_provider.base_url, "fake-model", "sk-test-0123456789")
    yield chat
    await chat.aclose()


def _request(*messages: WireMessage, tools: tuple[ToolSpec, ...] = (READ,)) -> ChatRequest:
    return ChatRequest("fake-model", list(messages) or [WireMessage("user", "go")], tools=tools)


async def _collect(chat: OpenAIChat, request: ChatRequest | None = None) -> list[Chunk]:
    return [chunk async for chunk in chat.stream(request or _request())]


async def _collect_into(seen: list[Chunk], chat: OpenAIChat) -> None:
    """Like `_collect`, keeping what came before a failure."""
    async for chunk in chat.stream(_request()):
        seen.append(chunk)


def _sse(*events: dict[str, Any] | str) -> bytes:
    """A hand-written SSE body: dicts become JSON chunks, strings are sent as they are."""
    lines = [e if isinstance(e, str) else json.dumps(e) for e in events]
    return b"".join(b"data: " + line.encode() + b"\n\n" for line in lines)


def _delta(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


async def test_text_then_two_calls_in_order_then_done(
    fake_provider: FakeOpenAI, provider: OpenAIChat
) -> None:
    fake_provider.script(
        Reply.calls(
            {"name": "read_file", "arguments": {"path": "a.txt"}},
            {"id": "call_b", "name": "list_dir", "arguments": '{"path": "."}'},
            text="Looking.",
        )
    )
    chunks = await _collect(provider)
    assert chunks[0] == TextChunk("Looking.")
    first, second = chunks[1], chunks[2]
    assert isinstance(first, ToolCallChunk)
    assert isinstance(second, ToolCallChunk)
    assert (first.index, first.name, first.arguments) == (0, "read_file", '{"path": "a.txt"}')
    assert first.call_id.startswith("call_fake_")
    assert second == ToolCallChunk(1, "call_b", "list_dir", '{"path": "."}')
    assert chunks[3] == DoneChunk("tool_calls")
    assert isinstance(chunks[4], UsageChunk)
    assert len(chunks) == 5


async def test_fragments_reassembled_exactly(fake_provider: FakeOpenAI, provider: OpenAIChat) -> None:
    arguments = json.dumps({"path": 'dir/ü "quoted".txt', "lines": [1, 2, 3], "note": "\\n"})
    fake_provider.script(Reply.calls({"id": "c1", "name": "read_file", "arguments": arguments}))
    chunks = await _collect(provider)
    assert chunks[:2] == [ToolCallChunk(0, "c1", "read_file", arguments), DoneChunk("tool_calls")]


async def test_fake_streams_arguments_in_pieces(fake_provider: FakeOpenAI) -> None:
    fake_provider.script(Reply.calls({"id": "c1", "name": "f", "arguments": "abcdefgh"}))
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    async with httpx.AsyncClient(trust_env=False) as client:
        resp = await client.post(fake_provider.base_url + "/chat/completions", json=body)
    events = [line[6:] for line in resp.text.splitlines() if line.startswith("data: ")]
    deltas = [json.loads(e)["choices"][0] for e in events[:-1] if json.loads(e)["choices"]]
    fragments = [d["delta"]["tool_calls"][0] for d in deltas if "tool_calls" in d["delta"]]
    assert fragments[0] == {
        "index": 0,
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": ""},
    }
    assert [f["function"]["arguments"] for f in fragments[1:]] == ["abc", "def", "gh"]
    assert deltas[-1]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("arguments", ['{"path": "a.txt"', "not json at all", "", "[1, 2]"])
async def test_malformed_arguments_pass_through_verbatim(
    fake_provider: FakeOpenAI, provider: OpenAIChat, arguments: str
) -> None:
    fake_provider.script(Reply.calls({"id": "c1", "name": "read_file", "arguments": arguments}))
    chunks = await _collect(provider)
    assert chunks[0] == ToolCallChunk(0, "c1", "read_file", arguments)


async def test_tools_sent_only_when_given(fake_provider: FakeOpenAI, provider: OpenAIChat) -> None:
    await _collect(provider, _request())
    await _collect(provider, _request(tools=()))
    with_tools, without = fake_provider.wait_requests(2)
    assert with_tools.body["tools"] == [
        {
            "type": "function",
            "function": {"name": READ.name, "description": READ.description, "parameters": READ.parameters},
        }
    ]
    assert "tools" not in without.body


async def test_tool_rows_serialized_for_the_wire(fake_provider: FakeOpenAI, provider: OpenAIChat) -> None:
    calls = (WireToolCall("c1", "read_file", '{"path": "a"}'), WireToolCall("c2", "read_file", "{bad"))
    request = _request(
        WireMessage("system", "sys"),
        WireMessage("user", "read a"),
        WireMessage("assistant", "", tool_calls=calls),
        WireMessage("tool", "contents of a", tool_call_id="c1", name="read_file"),
        WireMessage("tool", "error: bad arguments", tool_call_id="c2", name="read_file"),
        WireMessage("assistant", "Reading.", tool_calls=calls[:1]),
        WireMessage("assistant", "done"),
    )
    await _collect(provider, request)
    [recorded] = fake_provider.wait_requests(1)
    wire_calls = [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}},
        {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": "{bad"}},
    ]
    assert recorded.body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": None, "tool_calls": wire_calls},
        {"role": "tool", "tool_call_id": "c1", "content": "contents of a"},
        {"role": "tool", "tool_call_id": "c2", "content": "error: bad arguments"},
        {"role": "assistant", "content": "Reading.", "tool_calls": wire_calls[:1]},
        {"role": "assistant", "content": "done"},
    ]


async def test_leading_system_messages_go_as_one(fake_provider: FakeOpenAI, provider: OpenAIChat) -> None:
    """The frozen prompt then the memory block: one system message whose text starts with the
    frozen prompt's exact bytes (prefix caching keys on them); a later system message stays."""
    await _collect(provider, _request(
        WireMessage("system", "frozen prompt"),
        WireMessage("system", "memory block"),
        WireMessage("user", "hi"),
        WireMessage("system", "later"),
    ))
    [recorded] = fake_provider.wait_requests(1)
    assert recorded.body["messages"] == [
        {"role": "system", "content": "frozen prompt\n\nmemory block"},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "later"},
    ]


async def test_whole_call_in_one_chunk(fake_provider: FakeOpenAI, provider: OpenAIChat) -> None:
    whole = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    body = _sse(_delta({"content": "hi", "tool_calls": [whole]}, "tool_calls"), "[DONE]")
    fake_provider.script(Reply(raw=body))
    chunks = await _collect(provider)
    assert chunks == [TextChunk("hi"), ToolCallChunk(0, "c1", "f", '{"a": 1}'), DoneChunk("tool_calls")]


async def test_server_quirks(fake_provider: FakeOpenAI, provider: OpenAIChat) -> None:
    """Calls out of index order, the id and name repeated, no index at all, no finish_reason."""

    def call(arguments: str, **extra: Any) -> dict[str, Any]:
        return {**extra, "function": {"name": "g", "arguments": arguments}}

    body = _sse(
        _delta({"tool_calls": [{"index": 1, "id": "c2", "function": {"name": "h", "arguments": "{}"}}]}),
        _delta({"tool_calls": [call('{"x"', index=0, id="c1")]}),
        _delta({"tool_calls": [call(": 1}", index=0, id="c1")]}),
        _delta({"tool_calls": [call("[", id="c3"), call("", id="c4")]}),  # no index: position
        "[DONE]",
    )
    fake_provider.script(Reply(raw=body))
    chunks = await _collect(provider)
    assert chunks == [
        ToolCallChunk(0, "c1", "g", '{"x": 1}'),
        ToolCallChunk(1, "c2", "h", "{}"),
        ToolCallChunk(2, "c3", "g", "["),
        ToolCallChunk(3, "c4", "g", ""),
        DoneChunk(None),
    ]


async def test_cut_mid_tool_call_is_truncated(fake_provider: FakeOpenAI, provider: OpenAIChat) -> None:
    first = {"index": 0, "id": "c1", "function": {"name": "f", "arguments": '{"pa'}}
    fake_provider.script(Reply(raw=_sse(_delta({"content": "a"}), _delta({"tool_calls": [first]}))))
    seen: list[Chunk] = []
    with pytest.raises(ProviderError) as caught:
        await _collect_into(seen, provider)
    assert caught.value.kind == "connection"
    assert seen == [TextChunk("a")]


async def test_fake_truncate_after_calls_is_truncated(
    fake_provider: FakeOpenAI, provider: OpenAIChat
) -> None:
    fake_provider.script(Reply.calls({"name": "f", "arguments": {"a": 1}}, text="x", truncate=True))
    seen: list[Chunk] = []
    with pytest.raises(ProviderError) as caught:
        await _collect_into(seen, provider)
    # The fake cuts the chunked body itself, so httpx sees a broken connection, not an ended stream.
    assert caught.value.kind == "connection"
    assert seen == [TextChunk("x")]  # the call whose end never came does not surface


async def test_call_after_finish_is_a_bad_response(fake_provider: FakeOpenAI, provider: OpenAIChat) -> None:
    late = {"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}
    body = _sse(_delta({"content": "a"}, "stop"), _delta({"tool_calls": [late]}), "[DONE]")
    fake_provider.script(Reply(raw=body))
    with pytest.raises(ProviderError) as caught:
        await _collect(provider)
    assert caught.value.kind == "server_error"
