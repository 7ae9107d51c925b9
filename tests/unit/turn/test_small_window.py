"""A model with a small context window (the bundled offline model has 2,048 tokens) gets the
file and command tools only, and no memory block: the agent's own tools and notes would take
most of its window (tools/registry.AGENT_TOOLS_MIN_WINDOW)."""

from __future__ import annotations

import pytest

from backend.tools import memory, registry
from tests.unit.turn.harness import Harness, config_toml, text


@pytest.fixture
def harness_config() -> str:
    return config_toml(window=2_048)


async def test_a_small_window_gets_no_agent_tools_and_no_memory_block(harness: Harness) -> None:
    memory.update(harness.data_dir, "user", lambda _: "Name: Ada.")
    sid = await harness.session()
    harness.provider.script(text("Hi."))
    await harness.turn(sid, "hello")
    (request,) = harness.provider.requests
    names = [t.name for t in request.tools]
    assert names == ["terminal", "read_file", "write_file", "patch", "search_files", "list_dir"]
    assert [m.role for m in request.messages] == ["system", "user"], "no memory block"
    assert "Name: Ada." not in request.messages[0].content


def test_the_rule_is_the_window_not_the_provider() -> None:
    small = registry.offered(0, registry.AGENT_TOOLS_MIN_WINDOW - 1)
    roomy = registry.offered(0, registry.AGENT_TOOLS_MIN_WINDOW)
    assert "memory" not in small
    assert "delegate" not in small
    assert "memory" in roomy
