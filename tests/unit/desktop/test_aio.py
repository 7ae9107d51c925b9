"""spawn(): what a person reads when a background call fails, and what the log keeps."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest

from desktop.qt.aio import settle, spawn
from shared.client import RpcError


async def _fail(exc: Exception) -> None:
    raise exc


async def test_a_backend_error_reads_as_its_message_and_is_not_an_internal_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    words: list[str] = []
    spawn(_fail(RpcError(-32006, "session not found")), words.append)
    await settle()
    await asyncio.sleep(0)
    assert words == ["session not found"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_bug_is_logged_with_an_error_id_that_the_message_quotes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    words: list[str] = []
    spawn(_fail(KeyError("status")), words.append)
    await settle()
    await asyncio.sleep(0)
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    error_id = record.error_id  # type: ignore[attr-defined]
    assert re.fullmatch(r"[0-9a-f]{12}", error_id)
    assert record.exc_info is not None, "the traceback is in the log"
    assert len(words) == 1
    assert f"error_id {error_id}" in words[0]
    assert "'status'" in words[0]
