"""The offline model's speed on the CPU library the backend chooses, against plain x86-64.

The portable build carries one CPU library per instruction-set level; the backend loads
the best one this machine allows (backend/providers/llama_build.py). This measures what
that choice buys: the same answers from the real bundled model through `LocalChat`, once
on the chosen library and once on the baseline (`x64`, what every x86-64 runs and what a
SIGILL falls back to), each selected the way a remembered SIGILL selects it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from backend.providers import llama_build
from backend.providers.base import ChatRequest, TextChunk, UsageChunk, WireMessage
from backend.providers.local import CHECK_FILE, LOCAL_DEFAULT, LocalChat, local_available

pytestmark = [
    pytest.mark.bench,
    pytest.mark.skipif(not local_available(), reason="the offline model is not installed"),
]

ANSWERS = 3
TOKENS = 48
PROMPT = "Write three sentences about the sea."


async def _tokens_per_second(data_dir: Path, variant: str) -> tuple[float, float]:
    """(output tokens per second, prompt-to-last-token seconds, median) on `variant`."""
    _remember(data_dir, variant)
    chat = LocalChat("local", LOCAL_DEFAULT, data_dir)
    request = ChatRequest(model=LOCAL_DEFAULT.model, max_tokens=TOKENS,
                          messages=[WireMessage("user", PROMPT)])
    rates, walls = [], []
    try:
        [_ async for _ in chat.stream(request)]  # start, start check, warm
        for _ in range(ANSWERS):
            started = time.perf_counter()
            chunks = [chunk async for chunk in chat.stream(request)]
            wall = time.perf_counter() - started
            [usage] = [c for c in chunks if isinstance(c, UsageChunk)]
            assert "".join(c.text for c in chunks if isinstance(c, TextChunk)).strip()
            rates.append(usage.output_tokens / wall)
            walls.append(wall)
    finally:
        await chat.aclose()
    log = (data_dir / "logs" / "llama-server.log").read_text()
    assert f"libggml-cpu-{variant}.so" in log, f"the server did not load {variant}"
    return sorted(rates)[len(rates) // 2], sorted(walls)[len(walls) // 2]


def _remember(data_dir: Path, variant: str) -> None:
    """What a SIGILL leaves behind, for `variant`: the next start loads that library."""
    build = llama_build.installed_build()
    assert build is not None
    data_dir.mkdir()
    (data_dir / CHECK_FILE).write_text(json.dumps({"build": build.fingerprint(),
                                                   "variant": variant}))


async def test_chosen_cpu_library_against_plain_x86_64(tmp_path: Path) -> None:
    build = llama_build.installed_build()
    assert build is not None
    assert build.portable, "a native build has no libraries to choose from"
    chosen = llama_build.ranked(list(build.variants), llama_build.read_machine())[0]
    base_rate, base_wall = await _tokens_per_second(tmp_path / "x64", llama_build.BASELINE)
    rate, wall = await _tokens_per_second(tmp_path / chosen, chosen)
    print(f"\nBENCH baseline: offline model on plain x86-64 (libggml-cpu-x64): {base_rate:.0f} "
          f"tokens/s, {base_wall * 1000:.0f} ms per {TOKENS}-token answer (median of {ANSWERS})")
    print(f"BENCH offline model on the chosen library ({chosen}): {rate:.0f} tokens/s, "
          f"{wall * 1000:.0f} ms per answer; {rate / base_rate:.2f}x the baseline")
