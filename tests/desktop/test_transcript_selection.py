"""Reading and selecting in the transcript with the mouse: a click never moves the view."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.unit.desktop.factories import assistant, user

from .test_rendering import Shown, show_transcript

LONG = "\n\n".join(f"Paragraph {i} of a long answer, with enough words in it to wrap." for i in range(200))


@pytest.fixture
def shown(qtbot: Any) -> Shown:
    return show_transcript(qtbot)


def test_a_click_inside_a_long_message_leaves_the_view_where_it_was(shown: Shown, qtbot: Any) -> None:
    shown.load(user("m1", "tell me everything"), assistant("m2", LONG), user("m3", "thanks"))
    rect = shown.view.visualRect(shown.model.index(1, 0))
    bar = shown.view.verticalScrollBar()
    assert rect.height() > 4 * shown.view.viewport().height()
    bar.setValue(bar.value() + rect.top() + rect.height() // 2)  # the middle of the answer
    kept = bar.value()
    where = shown.text_point(1, "Paragraph 100 ")
    assert shown.view.viewport().rect().contains(where)

    qtbot.mouseClick(shown.view.viewport(), Qt.MouseButton.LeftButton, pos=where)
    # (a view scrolls to a clicked row once a double click can no longer come)
    qtbot.wait(QApplication.doubleClickInterval() + 300)
    assert bar.value() == kept
    # A press and a drag to select, within the message: no move either.
    end = shown.text_point(1, "Paragraph 101 ")
    qtbot.mousePress(shown.view.viewport(), Qt.MouseButton.LeftButton, pos=where)
    qtbot.mouseMove(shown.view.viewport(), end)
    qtbot.mouseRelease(shown.view.viewport(), Qt.MouseButton.LeftButton, pos=end)
    qtbot.wait(QApplication.doubleClickInterval() + 300)
    assert bar.value() == kept

