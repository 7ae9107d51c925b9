"""The memory block in the turn's requests, in process: read once per turn at its first request,
the same bytes for the rest of that turn, after the frozen prompt, and counted in `chars`."""

from __future__ import annotations

import dataclasses

from backend.compress.tokens import request_chars
from backend.tools import memory
from tests.unit.turn.harness import Harness, calls, text


async def test_memory_is_read_once_per_turn_and_counted(harness: Harness) -> None:
    memory.update(harness.data_dir, "user", lambda _: "Name: Ada.")
    sid = await harness.session()
    add = '{"action": "add", "target": "user", "text": "Likes tea."}'
    harness.provider.script(calls(("c1", "memory", add)), text("Noted."), text("Hi again."))
    await harness.turn(sid, "remember tea")
    await harness.turn(sid, "hello")
    first, second, third = harness.provider.requests
    frozen = first.messages[0]
    assert frozen.role == "system"
    assert "Memory:" not in frozen.content
    block = first.messages[1]
    assert block.role == "system"
    assert block.content == memory.block(harness.data_dir).replace("\nLikes tea.", "")
    assert second.messages[:2] == first.messages[:2], "the same bytes for the whole turn"
    assert third.messages[0] == frozen, "the frozen prompt is unchanged"
    assert third.messages[1].content.endswith("Name: Ada.\nLikes tea."), "the next turn sees it"
    for request in (first, second, third):
        counted = request_chars(dataclasses.replace(request, chars=None))  # from the messages
        assert request.chars == counted, "the block counts in the request's size"
        assert request.chars is not None
        assert request.chars > len(request.messages[1].content)
