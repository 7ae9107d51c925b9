"""Reading and selecting in the transcript with the mouse: a click never moves the view, a drag
selects across messages, Ctrl+C copies the selection; an exchange copies as markdown."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication

from desktop.qt import theme
from tests.unit.desktop.factories import assistant, call, tool, user

from .test_rendering import ANSWER, Shown, show_transcript

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


def drag(shown: Shown, qtbot: Any, start: QPoint, end: QPoint) -> None:
    viewport = shown.view.viewport()
    qtbot.mousePress(viewport, Qt.MouseButton.LeftButton, pos=start)
    qtbot.mouseMove(viewport, (start + end) / 2)
    qtbot.mouseMove(viewport, end)
    qtbot.mouseRelease(viewport, Qt.MouseButton.LeftButton, pos=end)


def highlighted(shown: Shown, row: int) -> int:
    """How many pixels of the row's text are painted in the selection's colour."""
    index = shown.model.index(row, 0)
    rect = shown.view.delegate.text_rect(shown.transcript.items[row], shown.view.visualRect(index),
                                         shown.doc(row))
    image = shown.view.viewport().grab(rect).toImage()
    mark = QColor(theme.tokens().primary).rgb()
    return sum(1 for y in range(image.height()) for x in range(image.width())
               if image.pixel(x, y) == mark)


def test_a_drag_across_three_messages_selects_and_copies_all_three(shown: Shown, qtbot: Any) -> None:
    shown.load(user("m1", "Why is the build slow today?"),
               assistant("m2", "The **cache** was cleared.\n\nIt rebuilds everything."),
               user("m3", "How do I keep the cache warm?"),
               assistant("m4", "Run it nightly."))
    start = shown.text_point(0, "build slow")
    end = shown.text_point(2, "keep the")
    drag(shown, qtbot, start, end)
    wanted = "build slow today?\n\nThe cache was cleared.\nIt rebuilds everything.\n\nHow do I "
    shown.view.setFocus()
    qtbot.keyClick(shown.view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.clipboard().text() == wanted
    assert shown.view.selecting.text() == wanted
    assert [highlighted(shown, row) > 0 for row in range(4)] == [True, True, True, False]
    menu = shown.view.message_menu(shown.model.index(1, 0))
    assert menu.actions()[0].text().startswith("Copy selection")

    # Upwards, the same; a click anywhere drops it.
    drag(shown, qtbot, end, start)
    assert shown.view.selecting.text() == wanted
    qtbot.mouseClick(shown.view.viewport(), Qt.MouseButton.LeftButton, pos=start)
    assert shown.view.selecting.text() == ""
    assert highlighted(shown, 1) == 0


def test_copy_as_markdown_on_an_exchange_gives_the_prompt_answers_and_calls(shown: Shown) -> None:
    shown.load(user("m1", "Why is it slow?\n\nIt was fast.", turn_id="t1"),
               assistant("m2", "Let me look at the `loop`.", turn_id="t1",
                         calls=[call("c1", "terminal", command="ls -la"),
                                call("c2", "read_file", path="a `b`.py")]),
               tool("m3", "c1", "a.py", turn_id="t1"),
               tool("m4", "c2", "", turn_id="t1", status="error", name="read_file"),
               assistant("m5", ANSWER, turn_id="t1"),
               user("m6", "Thanks", turn_id="t2"),
               assistant("m7", "You're welcome.", turn_id="t2"))
    wanted = ("> Why is it slow?\n>\n> It was fast.\n\n"
              "Let me look at the `loop`.\n\n"
              "- `terminal` `ls -la` — done\n- `read_file` ``a `b`.py`` — error\n\n"
              f"{ANSWER.strip()}\n")
    for row in range(5):  # from any row of it: the prompt, an answer, a card
        menu = shown.view.message_menu(shown.model.index(row, 0))
        action = next(a for a in menu.actions() if a.text() == "Copy exchange as Markdown")
        QApplication.clipboard().setText("before")
        action.trigger()
        assert QApplication.clipboard().text() == wanted, row
    menu = shown.view.message_menu(shown.model.index(6, 0))
    next(a for a in menu.actions() if a.text() == "Copy exchange as Markdown").trigger()
    assert QApplication.clipboard().text() == "> Thanks\n\nYou're welcome.\n"


def test_a_drag_from_inside_a_code_block_takes_the_code_from_there_on(shown: Shown, qtbot: Any) -> None:
    shown.load(user("m1", "why?"), assistant("m2", ANSWER), user("m3", "Thanks, and the tests?"))
    drag(shown, qtbot, shown.text_point(1, "for row in"), shown.text_point(2, "and the"))
    shown.view.setFocus()
    qtbot.keyClick(shown.view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.clipboard().text() == (
        'for row in rows(path):\n        total += 1\n    return "done"\n\n'
        "A quote stays a quote.\n\nRun pytest -k load to check.\n\nThanks, ")
