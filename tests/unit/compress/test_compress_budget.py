"""The summary's budget: what the model is asked for and what the fallback may take, both within
what the turn's window leaves beside the head, the tail and an answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from backend.compress import compressor as compressor_module
from backend.compress import tokens as tok
from backend.compress.compressor import (
    ANSWER_RESERVE_TOKENS,
    SUMMARY_FLOOR_TOKENS,
    WRAP_CHARS,
    Compressor,
    summary_budget,
    summary_chars,
)
from backend.compress.summary import SECTIONS, fit, wrap
from backend.config import ConfigFile
from backend.errors import ProviderError
from backend.ids import new_id
from backend.providers.base import ChatRequest, TextChunk
from backend.providers.registry import ConfiguredProvider, Providers
from backend.secrets import Secrets
from backend.store import messages, sessions
from backend.store.db import Database, Tx
from shared.config import ProviderConfig

WINDOW = 4000


def test_budget_is_the_models_and_never_more_than_the_room() -> None:
    assert summary_budget(100_000, 200_000, 50_000) == 10_000, "a fifth, capped at 10,000"
    assert summary_budget(1_000, 200_000, 50_000) == 2_000, "at least 2,000"
    assert summary_budget(100_000, 4_000, 50_000) == 1_000, "a quarter of the summarizer's window"
    assert summary_budget(100_000, 200_000, 700) == 700, "what the turn's window leaves"
    assert summary_budget(100_000, 200_000, -50) == SUMMARY_FLOOR_TOKENS


def test_chars_follow_the_learnt_ratio_but_never_pass_the_plain_estimate() -> None:
    assert summary_chars(1000, tok.Calibration(3.0)) == 3000 - WRAP_CHARS
    assert summary_chars(1000, tok.Calibration(6.0)) == 4000 - WRAP_CHARS, "preflight counts 4"
    assert summary_chars(10, tok.Calibration()) == 0


def test_fit_keeps_a_summary_that_fits_and_cuts_one_that_does_not_by_section() -> None:
    short = "## Goal\n- g"
    assert fit(short, 100) == short
    long = "\n".join(f"## {name}\n" + "\n".join(f"- {name} {i}" for i in range(200))
                     for name in SECTIONS)
    cut = fit(long, 2000)
    assert len(cut) <= 2000
    assert [line for line in cut.splitlines() if line.startswith("## ")] == \
        [f"## {name}" for name in SECTIONS]
    assert "- Goal 0" in cut, "each section keeps its start"


class _Hangs:
    """A summarizer that never answers (the call times out)."""

    name = model = "hangs"

    async def stream(self, request: ChatRequest) -> AsyncIterator[Any]:
        await asyncio.Event().wait()
        yield TextChunk("never")

    async def aclose(self) -> None:
        pass


class _Fails(_Hangs):
    async def stream(self, request: ChatRequest) -> AsyncIterator[Any]:
        raise ProviderError("server_error", "summarizer down")
        yield TextChunk("never")


class _Rambles(_Hangs):
    """A summarizer that writes far past the budget it was given."""

    async def stream(self, request: ChatRequest) -> AsyncIterator[Any]:
        yield TextChunk("## Goal\n" + "\n".join(f"- point {i}: " + "detail " * 20 for i in range(400)))


async def _seeded(db: Database) -> str:
    """A session like a long one in a 4,000-token window: a big protected head, a fallback
    summary from before at the old 8,000-character cap, and many requests since."""
    sid = new_id("ses")

    def seed(tx: Tx) -> None:
        sessions.insert(tx, sid, "t", "/tmp", "m")
        for i in range(3):
            messages.insert(tx, sid, "user" if i % 2 == 0 else "assistant", f"head {i} " + "h " * 600)
        previous = "## Goal\n" + "\n".join(f"- The user asked: “request {i} " + "r " * 90 + "”"
                                           for i in range(38))
        messages.insert(tx, sid, "system_note", previous[:8000], note_kind="summary",
                        api_content=wrap(previous[:8000]))
        for i in range(24):
            messages.insert(tx, sid, "user" if i % 2 == 0 else "assistant", f"later {i} " + "w " * 300)

    await db.write(seed)
    return sid


@pytest.mark.parametrize("summarizer", [_Hangs, _Fails, _Rambles], ids=["times-out", "fails", "rambles"])
async def test_the_compressed_request_leaves_room_for_an_answer(
    summarizer: type[_Hangs], db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(compressor_module, "SUMMARY_TIMEOUT_S", 0.2)
    config = ConfigFile(tmp_path / "config.toml")
    config.load()
    providers = Providers(Secrets(tmp_path), tmp_path)
    try:
        sid = await _seeded(db)
        link = ConfiguredProvider("small", ProviderConfig(model="m", context_window=WINDOW), summarizer())
        out = await Compressor(db, config, providers, 1).compress(sid, link, "test")
        assert out.compressed
        assert out.before_tokens > WINDOW, "the session did not fit to begin with"
        assert out.after_tokens + ANSWER_RESERVE_TOKENS <= WINDOW, out
        note = await db.read(lambda tx: tx.one(
            "SELECT api_content, meta FROM messages WHERE session_id = ? AND note_kind = 'summary' "
            "ORDER BY id DESC LIMIT 1", (sid,)))
        assert note is not None
        assert len(note["api_content"]) <= 4 * (WINDOW // 4), "within its budget, framed"
        assert ('"fallback": true' in note["meta"]) == (summarizer is not _Rambles)
    finally:
        await providers.aclose()
