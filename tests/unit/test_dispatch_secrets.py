"""Dispatch redacts secret params from every error it logs or sends, whoever wrote the message."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, cast

import pytest

from backend.errors import InvalidParams, StoreUnavailable
from backend.server.auth import Authenticator
from backend.server.connection import Connection, Principal
from backend.server.dispatch import Dispatcher
from backend.server.methods import Methods
from backend.store.db import SqliteDatabase
from shared.protocol import ALL_SCOPES

KEY = "sk-test-DISPATCH-0123456789abcdef"


class StubConnection:
    initialized = True
    principal = Principal("owner", frozenset(ALL_SCOPES))
    revoked = False

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def send(self, frame: dict[str, Any]) -> None:
        self.frames.append(frame)


class StubMethods:
    def __init__(self, error: Exception) -> None:
        self.error = error
        self.handlers = {"secret.set": self.secret_set}

    async def secret_set(self, conn: Any, params: Any) -> None:
        raise self.error


async def _call(error: Exception, value: str = KEY + "\n") -> dict[str, Any]:
    conn = StubConnection()
    # A store never opened: the owner's calls read no token.
    tokens = Authenticator(SqliteDatabase(Path("never-opened.db")), "owner-token")
    dispatcher = Dispatcher(cast(Methods, StubMethods(error)), tokens)
    frame = {"jsonrpc": "2.0", "id": 1, "method": "secret.set",
             "params": {"name": "main", "value": value}}
    await dispatcher.handle(cast(Connection, conn), json.dumps(frame))
    [reply] = conn.frames
    return reply


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (InvalidParams("value", f"a careless message quoting {KEY}"), -32602),
        (StoreUnavailable(f"could not store {KEY}", {"detail": KEY}), -32603),
        (RuntimeError(f"a bug that quotes {KEY}"), -32603),
    ],
)
async def test_errors_of_a_secret_call_never_quote_the_value(
    error: Exception, code: int, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        reply = await _call(error)
    assert reply["error"]["code"] == code
    assert KEY not in json.dumps(reply)
    assert KEY not in caplog.text
    assert caplog.records, "the error was logged, redacted"


async def test_a_traceback_is_still_logged_redacted(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        await _call(RuntimeError(f"a bug that quotes {KEY}"))
    assert "Traceback" in caplog.text
    assert "RuntimeError: a bug that quotes ***" in caplog.text
