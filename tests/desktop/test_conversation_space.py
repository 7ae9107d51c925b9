"""What waits under the transcript never squeezes it: with an approval card and five queued
messages in a 900 px tall window the transcript keeps half the height (the card's shelf is
bounded, the queue folds into one line), a short file preview is as tall as its lines, the
window fits beside an editor (480 px wide or less, the card's answers wrapping, still in view),
and Send, which Enter presses, is the primary button while Steer is not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from desktop.qt.controller import Controller
from desktop.qt.shelves import PREVIEW_MAX_PX
from shared.methods import PromptSubmit
from tests.fakes.openai_server import FakeOpenAI, Reply

from .conftest import drive
from .test_session_window import new_session, open_window, type_and_send


def test_an_approval_and_five_queued_messages_leave_the_transcript_half_the_window(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-notes.txt"  # outside the folder: it asks
    fake_provider.script(
        Reply.calls({"name": "write_file", "arguments": {"path": str(outside), "content": "one line"}}),
        Reply(deltas=["Written."]),
    )
    work = tmp_path / "work"
    work.mkdir()
    sid = new_session(qtbot, controller, work)
    win = open_window(qtbot, controller, sid, new_window=True)
    win.resize(900, 900)
    win.show()
    conv = win.conversation
    type_and_send(qtbot, win, "note it down")
    qtbot.waitUntil(lambda: len(conv.cards) == 1, timeout=15_000)
    for i in range(5):
        drive(qtbot, controller.link.call(PromptSubmit(
            session_id=sid, request_id=f"later-{i}", text=f"and then step {i}: " + "more words " * 12)))
    qtbot.waitUntil(lambda: len(conv.queue_rows) == 5, timeout=10_000)
    qtbot.waitUntil(lambda: win.height() == 900 and conv.queue_panel.summary.isVisible())
    qtbot.wait(50)  # (the layout settles)

    assert conv.view.height() >= 0.5 * win.height(), (conv.view.height(), win.height())
    (card,) = conv.cards.values()
    assert card.isVisible()
    # The five queued messages fold into one line, which opens them.
    panel = conv.queue_panel
    assert panel.count_label.text() == "5 messages queued"
    assert not panel.shelf.isVisible()
    # The one-line file's preview is as tall as its line, not a fixed box.
    assert card.preview is not None
    line = card.preview.fontMetrics().lineSpacing()
    assert card.preview.height() <= 2 * line + 2 * card.preview.frameWidth(), card.preview.height()
    assert card.preview.height() < PREVIEW_MAX_PX

    panel.toggle.click()
    qtbot.waitUntil(panel.shelf.isVisible)
    qtbot.waitUntil(lambda: all(r.isVisible() for r in conv.queue_rows.values())
                    or panel.shelf.verticalScrollBar().maximum() > 0)
    assert panel.shelf.height() <= 0.15 * conv.height() + 1, "opened, a few rows, then it scrolls"
    assert panel.shelf.verticalScrollBar().maximum() > 0
    assert conv.view.height() > card.height()
    panel.toggle.click()
    qtbot.waitUntil(lambda: not panel.shelf.isVisible())

    # Narrow, beside an editor: the window's minimum is 480 px or less; the card's four answers
    # wrap onto more lines instead of widening it.
    assert win.minimumSizeHint().width() <= 480, win.minimumSizeHint()
    win.resize(480, 900)
    qtbot.waitUntil(lambda: win.width() == 480)
    qtbot.wait(50)
    buttons = card.buttons
    assert all(b.geometry().right() <= card.width() for b in buttons.values())
    assert buttons["deny"].geometry().top() > buttons["once"].geometry().top(), "wrapped"
    # Taller now, the card is still shown whole (its answers never scroll out of view) and the
    # transcript still has most of what is left.
    shelf = conv.approvals_shelf
    assert shelf.verticalScrollBar().maximum() == 0
    assert card.height() <= shelf.viewport().height()
    assert conv.view.height() >= 0.45 * win.height(), conv.view.height()

    # Enter sends (or queues, while the turn runs): Send is the primary button, Steer is not.
    assert conv.steer_button.isVisible()
    assert conv.send_button.text() == "Queue"
    assert conv.send_button.property("primary") is True
    assert conv.send_button.isDefault()
    assert not conv.steer_button.property("primary")
    card.buttons["deny"].click()
    qtbot.waitUntil(lambda: not conv.cards, timeout=15_000)


def test_a_long_preview_gives_way_so_the_answers_stay_in_view(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-long.txt"
    content = "\n".join(f"line {i} of the new file" for i in range(200))
    fake_provider.script(
        Reply.calls({"name": "write_file", "arguments": {"path": str(outside), "content": content}}),
        Reply(deltas=["Written."]),
    )
    work = tmp_path / "work"
    work.mkdir()
    sid = new_session(qtbot, controller, work)
    win = open_window(qtbot, controller, sid, new_window=True)
    win.resize(900, 800)
    win.show()
    conv = win.conversation
    type_and_send(qtbot, win, "write it")
    qtbot.waitUntil(lambda: len(conv.cards) == 1, timeout=15_000)
    qtbot.waitUntil(lambda: win.height() == 800)
    qtbot.wait(50)
    (card,) = conv.cards.values()
    assert card.preview is not None
    shelf = conv.approvals_shelf
    assert card.preview.height() < PREVIEW_MAX_PX, "shortened to fit the card's share"
    assert card.preview.verticalScrollBar().maximum() > 0, "the rest scrolls inside it"
    assert shelf.verticalScrollBar().maximum() == 0, "the card itself is not scrolled"
    assert card.height() <= shelf.viewport().height()
    assert shelf.height() <= max(0.2 * conv.height(), card.least_height()) + 1
    assert conv.view.height() >= 0.5 * win.height()
    card.buttons["deny"].click()
    qtbot.waitUntil(lambda: not conv.cards, timeout=15_000)
