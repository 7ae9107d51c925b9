"""The memory notebooks as `memory.get` and `memory.set` see them (the settings' Memory page):
the same files, checks and `memory.changed` event as the `memory` tool's writes
(`tools/memory.py`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from backend.errors import EnvironmentFault, InvalidParams
from backend.tools import memory, registry
from shared import protocol as p


class Notebooks:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    async def get(self) -> p.MemoryResult:
        files = await asyncio.to_thread(self._read)
        return p.MemoryResult(user=_file(files["user"]), environment=_file(files["environment"]))

    async def set(self, target: memory.Target, text: str) -> p.MemoryResult:
        """The same checks as the tool's writes; the event tells open editors."""
        def write() -> memory.Usage:
            try:
                return memory.update(self.data_dir, target, lambda current: text)
            except memory.MemoryUnsafe as exc:
                raise EnvironmentFault(str(exc)) from None
            except memory.MemoryRefused as exc:
                raise InvalidParams("text", str(exc)) from None

        usage = await asyncio.to_thread(write)
        registry.MEMORY.changed(target, usage)
        return await self.get()

    def _read(self) -> dict[memory.Target, memory.Usage]:
        try:
            return memory.read_all(self.data_dir)
        except memory.MemoryRefused as exc:
            raise EnvironmentFault(str(exc)) from None


def _file(usage: memory.Usage) -> p.MemoryFile:
    return p.MemoryFile(text=usage.text, used=usage.used, limit=usage.limit)
