"""Other backends' signals reach the handler of their kind, and only it; an unknown kind (a
newer backend's) is dropped."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from backend.store.signals import Signals


def test_each_signal_goes_to_the_handler_of_its_kind(caplog: pytest.LogCaptureFixture) -> None:
    interrupts: list[dict[str, Any]] = []
    tokens: list[dict[str, Any]] = []
    route = Signals()
    route.on("interrupt", interrupts.append)
    route.on("token", tokens.append)

    route({"kind": "token", "token_id": "tok_1"})
    route({"kind": "interrupt", "session_id": "ses_1"})
    with caplog.at_level(logging.INFO, logger="store"):
        route({"kind": "from the future"})
        route({"token_id": "tok_2"})
    assert tokens == [{"kind": "token", "token_id": "tok_1"}]
    assert interrupts == [{"kind": "interrupt", "session_id": "ses_1"}]
    assert caplog.text.count("ignored another backend's signal") == 2


def test_a_kind_has_one_handler() -> None:
    route = Signals()
    route.on("token", lambda data: None)
    with pytest.raises(AssertionError):
        route.on("token", lambda data: None)
