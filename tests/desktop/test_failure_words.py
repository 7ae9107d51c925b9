"""A failed or stopped turn, as the window shows it: in a person's words, once (the turn's
note in the transcript), with the provider's raw detail kept apart for a click away."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QLabel

from desktop.qt.controller import Controller
from desktop.state.transcript import NoteItem
from tests.fakes.openai_server import FakeOpenAI, Reply

from .test_session_window import new_session, open_window, type_and_send

WORDS = "The server rejected the API key. Paste a new key in Settings → Providers."


def shown_texts(widget: Any) -> list[str]:
    return [label.text() for label in widget.findChildren(QLabel) if label.isVisible()]


def test_a_failed_turn_is_said_once_in_a_persons_words(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply.http_error(401, "invalid api key"))
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    type_and_send(qtbot, win, "hello")
    qtbot.waitUntil(lambda: any(isinstance(it, NoteItem) for it in conv.state.transcript.items),
                    timeout=15_000)
    [note] = [it for it in conv.state.transcript.items if isinstance(it, NoteItem)]
    assert (note.kind, note.text) == ("failed", WORDS)
    qtbot.wait(200)
    assert conv.state.notice is None, "no second copy above the message box"
    assert not conv.notice.isVisible()
    assert not conv.banner.isVisible()
    labels = shown_texts(win)
    assert not any("API key" in text for text in labels), labels
    assert not any("secret.set" in text or "api_key_env" in text for text in labels)


def test_a_stopped_turn_says_who_stopped_it(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply(deltas=["a", "b"], hang_after=1))
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    type_and_send(qtbot, win, "hello")
    qtbot.waitUntil(lambda: conv.state.status == "running", timeout=15_000)
    qtbot.waitUntil(lambda: len(fake_provider.snapshot()) == 1, timeout=15_000)
    conv.interrupt()
    qtbot.waitUntil(lambda: any(isinstance(it, NoteItem) for it in conv.state.transcript.items),
                    timeout=15_000)
    [note] = [it for it in conv.state.transcript.items if isinstance(it, NoteItem)]
    assert (note.kind, note.text) == ("interrupted", "Stopped by you.")
