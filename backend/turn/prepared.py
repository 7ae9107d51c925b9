"""A turn's attached files, prepared for the providers it calls: the thin loader.

Reads each file's stored bytes through `reader` (the store's `read_bytes`, or a dict in
tests), has the rendering core (turn/attachments.py) make its part off the event loop,
and keeps the part for the rest of the turn by (sha256, form, limits, name): every model
call of a turn, and a fallback of the same kind, reuses it instead of scaling the image
again.  A backend's turns also share a bounded cache of parts (`PartCache`): a prompt's
image goes with every later request of its session, and a part depends only on the file's
bytes (named by their sha256), so it never goes stale.  The stored bytes are only ever read.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from backend.compress.tokens import message_chars
from backend.providers.base import ChatRequest, WireFile, WireMessage
from backend.turn.attachments import (
    Part,
    PartKey,
    Target,
    current_from,
    key,
    needs_bytes,
    prepare,
    render,
)

log = logging.getLogger("turn")

Reader = Callable[[str], Awaitable[bytes]]  # sha256 -> the file's bytes; FileNotFoundError


@dataclass(frozen=True)
class Rendered:
    """A request with its files rendered; `unseen`: images of the latest prompt that the
    model cannot see (people are told once a turn); `dropped`: old prompts' images and
    PDFs left out to save room."""

    request: ChatRequest
    unseen: int = 0
    dropped: int = 0


def part_bytes(part: Part) -> int:
    """About what a part holds in memory (its base64 or text)."""
    return len(part.text) + (len(part.image.data) if part.image else 0) \
        + (len(part.document.data) if part.document else 0)


def binary_bytes(parts: list[Part]) -> int:
    """The base64 bytes of the images and documents among `parts`."""
    return sum((len(p.image.data) if p.image else 0) + (len(p.document.data) if p.document else 0)
               for p in parts)


class PartCache:
    """Prepared parts shared by a backend's turns, least recently used first out once they
    hold more than `budget` bytes.  Measured (tests/bench/test_attachment_bench.py): a
    10 MB image scaled for Anthropic took ~0.45 s in every later turn of its session
    without it."""

    def __init__(self, budget: int = 128 * 1024 * 1024) -> None:
        self.budget = budget
        self.held = 0
        self._parts: OrderedDict[PartKey, Part] = OrderedDict()

    def get(self, k: PartKey) -> Part | None:
        part = self._parts.get(k)
        if part is not None:
            self._parts.move_to_end(k)
        return part

    def put(self, k: PartKey, part: Part) -> None:
        size = part_bytes(part)
        if size > self.budget or k in self._parts:
            return
        self._parts[k] = part
        self.held += size
        while self.held > self.budget:
            _, old = self._parts.popitem(last=False)
            self.held -= part_bytes(old)


class PreparedFiles:
    """One turn's prepared parts, kept for the whole turn, drawn from and added to the
    backend's shared `PartCache` when there is one."""

    def __init__(self, reader: Reader, shared: PartCache | None = None) -> None:
        self._reader = reader
        self._shared = shared
        self._parts: dict[PartKey, Part] = {}

    async def render(self, request: ChatRequest, target: Target, *, drop_old: bool = False,
                     ) -> Rendered:
        """`request` with every message's files rendered for `target`; `drop_old`: old
        prompts' images and PDFs as notes instead.  Its `chars` follow what is sent.  Past
        the target's `binary_budget`, the oldest prompts' images and PDFs are left out first,
        one prompt at a time, until the request fits (the latest prompt's are kept)."""
        current = current_from(request.messages)
        done: dict[int, tuple[WireMessage, list[Part], bool]] = {}
        for i, m in enumerate(request.messages):
            if m.files:
                done[i] = await self._message(m, target, drop_old and i < current)
        binary = sum(binary_bytes(parts) for _, parts, _ in done.values())
        for i in sorted(done):
            if binary <= target.binary_budget or i >= current:
                break
            _, parts, dropped = done[i]
            if dropped or not binary_bytes(parts):
                continue
            done[i] = await self._message(request.messages[i], target, True)
            binary -= binary_bytes(parts) - binary_bytes(done[i][1])
        out: list[WireMessage] = []
        delta = unseen = dropped_count = 0
        for i, m in enumerate(request.messages):
            if i not in done:
                out.append(m)
                continue
            sent, parts, drop = done[i]
            delta += message_chars(sent) - message_chars(m)
            if i >= current:
                unseen += sum(p.unseen for p in parts)
            dropped_count += sum(drop and f.kind in ("image", "pdf") for f in m.files)
            out.append(sent)
        chars = None if request.chars is None else request.chars + delta
        return Rendered(replace(request, messages=out, chars=chars, files=False), unseen, dropped_count)

    async def _message(self, m: WireMessage, target: Target,
                       drop: bool) -> tuple[WireMessage, list[Part], bool]:
        parts = [await self._part(f, target, drop) for f in m.files]
        return render(m, parts), parts, drop

    async def _part(self, file: WireFile, target: Target, drop: bool) -> Part:
        k = key(file, target, drop=drop)
        part = self._parts.get(k)
        if part is None and self._shared is not None:
            part = self._shared.get(k)
        if part is None:
            form = k[1]
            data = await self._read(file) if needs_bytes(form) else None
            # Scaling a 24-megapixel image takes a good part of a second: not on the loop.
            part = await asyncio.to_thread(prepare, file, form, target, data)
            if self._shared is not None and (data is not None or not needs_bytes(form)):
                self._shared.put(k, part)  # a file not read now may be read next time
        self._parts[k] = part
        return part

    async def _read(self, file: WireFile) -> bytes | None:
        try:
            return await self._reader(file.sha256)
        except FileNotFoundError:
            log.warning("attachment %s (%s) is not held any more", file.sha256[:12], file.name)
            return None
