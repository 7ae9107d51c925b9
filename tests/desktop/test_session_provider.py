"""The session's model box lists "provider · model" for every configured provider; a choice
moves the session's next turn there, and a turn its provider failed offers "Try another
provider", which sends the prompt again on the one picked.  Two fake model servers, configured
as the providers "main" (the default) and "other", behind a real backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop.qt.controller import Controller
from desktop.state.transcript import AssistantItem, NoteItem, UserItem
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.backend_proc import Backend

from .test_session_window import new_session, open_window, texts, turn_done, type_and_send

MAIN = "main · fake-model"
OTHER = "other · other-model"


@pytest.fixture
def other_provider() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    yield fake
    fake.close()
    assert fake.errors == []


@pytest.fixture
def desk_backend(tmp_path: Path, fake_provider: FakeOpenAI,
                 other_provider: FakeOpenAI) -> Iterator[Backend]:
    """conftest's backend, with a second provider beside the default one."""
    other = ("[providers.other]\nkind = \"openai\"\n"
             f"base_url = \"{other_provider.base_url}\"\nmodel = \"other-model\"\n")
    backend = Backend(tmp_path / "data", fake_provider.base_url, extra_config=other,
                      extra_env={"TURNKEY_NO_KEYRING": "1"})
    backend.start()
    yield backend
    backend.close()
    print(backend.stderr_tail())
    errors = backend.logged_errors()
    assert not errors, "the backend logged errors:\n" + "\n".join(errors[:20])


def labels(box: Any) -> list[str]:
    return [box.itemText(i) for i in range(box.count())]


def test_the_box_lists_provider_and_model_and_a_choice_moves_the_next_turn(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, other_provider: FakeOpenAI
) -> None:
    fake_provider.default = Reply(deltas=["from main"])
    other_provider.default = Reply(deltas=["from other"])
    win = open_window(qtbot, controller, new_session(qtbot, controller))
    conv = win.conversation
    box = conv.model_box
    qtbot.waitUntil(lambda: labels(box) == [MAIN, OTHER], timeout=10_000)
    assert box.currentText() == MAIN, "a new session is on the default provider"
    assert "(main)" in conv.empty.text()

    box.setCurrentIndex(labels(box).index(OTHER))
    box.activated.emit(box.currentIndex())  # as a click on the entry does
    qtbot.waitUntil(lambda: conv.state.session is not None
                    and conv.state.session.provider == "other", timeout=10_000)
    assert conv.state.session is not None
    assert conv.state.session.model == "other-model"
    qtbot.waitUntil(lambda: box.toolTip() == "Asked of other", timeout=5_000)
    assert box.currentText() == OTHER

    type_and_send(qtbot, win, "who answers?")
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=15_000)
    assert texts(win, AssistantItem) == ["from other"]
    assert [r.body["model"] for r in other_provider.snapshot()] == ["other-model"]
    assert fake_provider.snapshot() == [], "the default provider was not asked"


def test_a_turn_its_provider_failed_is_tried_again_on_another_provider(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, other_provider: FakeOpenAI
) -> None:
    fake_provider.default = Reply.http_error(401, "invalid api key")
    other_provider.default = Reply(deltas=["other answered"])
    win = open_window(qtbot, controller, new_session(qtbot, controller))
    conv = win.conversation
    qtbot.waitUntil(lambda: labels(conv.model_box) == [MAIN, OTHER], timeout=10_000)
    type_and_send(qtbot, win, "summarize the changelog")
    qtbot.waitUntil(lambda: conv.other_button.isVisible(), timeout=15_000)
    assert conv.retry_button.isVisible(), "Retry on the same provider stays offered"
    note = next(it for it in conv.state.transcript.items if isinstance(it, NoteItem))
    assert note.failure_kind == "auth"

    conv.other_button.click()
    qtbot.waitUntil(lambda: conv.provider_menu is not None and conv.provider_menu.isVisible(),
                    timeout=10_000)
    menu = conv.provider_menu
    assert menu is not None
    assert [a.text() for a in menu.actions()] == [OTHER], "only the other providers"
    menu.actions()[0].trigger()
    menu.close()

    qtbot.waitUntil(lambda: texts(win, AssistantItem)[-1:] == ["other answered"], timeout=15_000)
    qtbot.waitUntil(lambda: turn_done(win, 2), timeout=10_000)
    assert texts(win, UserItem) == ["summarize the changelog"] * 2
    assert conv.state.session is not None
    assert conv.state.session.provider == "other", "the session stays on the provider picked"
    # The window shows a state change at its next refresh (coalesced on a timer), not at once.
    qtbot.waitUntil(lambda: conv.model_box.currentText() == OTHER and not conv.turn_bar.isVisible(),
                    timeout=5_000)
    assert len(fake_provider.snapshot()) == 1, "a bad key is not retried on the same provider"
    [asked] = other_provider.snapshot()
    assert asked.body["model"] == "other-model"


def test_a_failure_that_is_not_the_providers_offers_no_other_provider(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    """Stopped by the person: Retry, but nothing suggests the provider was at fault."""
    fake_provider.default = Reply(deltas=["working", " on it"], hang_after=1)
    win = open_window(qtbot, controller, new_session(qtbot, controller))
    conv = win.conversation
    type_and_send(qtbot, win, "a long job")
    qtbot.waitUntil(lambda: conv.state.status == "running", timeout=10_000)
    qtbot.waitUntil(lambda: any(isinstance(it, AssistantItem) and it.text
                                for it in conv.state.transcript.items), timeout=10_000)
    conv.interrupt()
    qtbot.waitUntil(lambda: conv.retry_button.isVisible(), timeout=15_000)
    assert not conv.other_button.isVisible()
