"""Fixtures of the turn tests: `harness`, a started in-process store, authority and runner."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.unit.turn.harness import Harness, config_toml


@pytest.fixture
def harness_config() -> str:
    """The config.toml the harness starts with (override in a module to change it)."""
    return config_toml()


@pytest.fixture
async def harness(tmp_path: Path, harness_config: str) -> AsyncIterator[Harness]:
    h = Harness(tmp_path, harness_config)
    await h.start()
    try:
        yield h
    finally:
        await h.stop()
