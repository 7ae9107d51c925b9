"""A prompt's answers and branches in the app: Regenerate answers the last message again in
place (no second bubble) and ‹ 1/2 › pages between the answers, the model reading the one
shown; Edit and branch sends an edited message in a new session opened in the window, which
links back to the original, where the message says it was edited into a branch.  All from the
keyboard."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocumentFragment
from PySide6.QtWidgets import QApplication

from desktop.qt import palette
from desktop.qt.controller import Controller
from desktop.qt.transcript_view import PREV, bar_html, user_html
from desktop.state.answers import AnswerBar
from desktop.state.transcript import AssistantItem, UserItem
from tests.fakes.openai_server import FakeOpenAI, Reply, content_text

from .test_session_window import new_session, open_window, texts, turn_done, type_and_send


def shown(win: Any) -> list[str]:
    return [it.text for it in win.conversation.state.transcript.items
            if isinstance(it, UserItem | AssistantItem) and not it.hidden]


def bar_words(win: Any) -> str:
    bar = win.conversation.state.transcript.last_bar()
    return QTextDocumentFragment.fromHtml(bar_html(bar)).toPlainText() if bar is not None else ""


def said(fake: FakeOpenAI, n: int) -> list[str]:
    return [content_text(m) for m in fake.requests[n].body["messages"]
            if m.get("role") in ("user", "assistant")]


def editing(conv: Any) -> bool:
    """The edit-and-branch dialog is open."""
    dialog = conv.edit_dialog
    return dialog is not None and bool(dialog.isVisible())


def keys(qtbot: Any, win: Any, key: Qt.Key, mods: Qt.KeyboardModifier) -> None:
    """A shortcut pressed in the window, with the focus in its message box."""
    win.show()
    win.raise_()
    win.activateWindow()  # (a window's shortcuts work while it is the active one)
    qtbot.waitUntil(lambda: QApplication.activeWindow() is win, timeout=5_000)
    win.conversation.composer.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is win.conversation.composer, timeout=5_000)
    qtbot.keyClick(win.conversation.composer, key, mods)


def test_regenerate_answers_in_place_and_the_pager_pages_in_every_window(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply(deltas=["First answer."]), Reply(deltas=["Second answer."]),
                         Reply(deltas=["Building on the first."]))
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    other = open_window(qtbot, controller, sid, new_window=True)
    type_and_send(qtbot, win, "tell me a joke")
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=15_000)

    Ctrl, Shift, Alt = (Qt.KeyboardModifier.ControlModifier, Qt.KeyboardModifier.ShiftModifier,
                        Qt.KeyboardModifier.AltModifier)
    keys(qtbot, win, Qt.Key.Key_R, Ctrl | Shift)  # Session ▸ Regenerate answer
    for w in (win, other):
        qtbot.waitUntil(lambda w=w: shown(w) == ["tell me a joke", "Second answer."]
                        and bar_words(w) == "‹ 2 / 2 › · Regenerate", timeout=15_000)
    assert texts(win, UserItem) == ["tell me a joke"], "no second bubble"
    hidden = [i for i, it in enumerate(win.conversation.state.transcript.items) if it.hidden]
    assert hidden
    assert all(win.conversation.view.isRowHidden(i) for i in hidden)
    assert said(fake_provider, 1) == ["tell me a joke"], "the old answer is not read"

    keys(qtbot, win, Qt.Key.Key_Left, Alt)  # Session ▸ Previous answer
    for w in (win, other):
        qtbot.waitUntil(lambda w=w: shown(w) == ["tell me a joke", "First answer."]
                        and bar_words(w).startswith("‹ 1 / 2 ›"), timeout=10_000)
    type_and_send(qtbot, win, "go on")
    qtbot.waitUntil(lambda: turn_done(win, 2), timeout=15_000)
    assert said(fake_provider, 2) == ["tell me a joke", "First answer.", "go on"]
    assert bar_words(win) == "‹ 1 / 2 ›", "an earlier prompt's bar offers no Regenerate"

    # The bar's own links page too, and Right on the bar row.
    conv = win.conversation
    row = next(i for i, it in enumerate(conv.state.transcript.items) if isinstance(it, AnswerBar))
    conv.view.follow(conv.model.index(row, 0), PREV)  # at the first: nothing happens
    conv.view.setCurrentIndex(conv.model.index(row, 0))
    conv.view.setFocus()
    qtbot.keyClick(conv.view, Qt.Key.Key_Right)
    qtbot.waitUntil(lambda: shown(win)[:2] == ["tell me a joke", "Second answer."], timeout=10_000)


def test_the_answer_and_branch_commands_are_in_the_menus_and_the_palette(
    qtbot: Any, controller: Controller
) -> None:
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    found = {palette.plain(a.text()) for a in palette.actions_of(win)}
    assert {"Regenerate answer", "Previous answer", "Next answer",
            "Edit message and branch"} <= found
    assert win.regenerate_action.shortcut().toString() == "Ctrl+Shift+R"
    assert win.edit_action.shortcut().toString() == "Ctrl+E"


def test_edit_and_branch_opens_a_new_session_with_the_edited_message(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply(deltas=["Answer one."]), Reply(deltas=["Answer two."]),
                         Reply(deltas=["Edited answer."]))
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    type_and_send(qtbot, win, "one")
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=15_000)
    type_and_send(qtbot, win, "two")
    qtbot.waitUntil(lambda: turn_done(win, 2), timeout=15_000)
    conv = win.conversation
    row = next(i for i, it in enumerate(conv.state.transcript.items)
               if isinstance(it, UserItem) and it.text == "two")
    conv.view.setCurrentIndex(conv.model.index(row, 0))
    menu = conv.view.message_menu(conv.model.index(row, 0))
    assert "Edit and branch…\tCtrl+E" in [a.text() for a in menu.actions()]
    menu.deleteLater()

    keys(qtbot, win, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)  # the last message
    qtbot.waitUntil(lambda: editing(conv), timeout=5_000)
    dialog = conv.edit_dialog
    assert dialog is not None
    assert dialog.editor.toPlainText() == "two"
    assert not dialog.restore.isChecked(), "files stay as they are unless asked"
    dialog.editor.setPlainText("two, edited")
    qtbot.keyClick(dialog.editor, Qt.Key.Key_Return)

    qtbot.waitUntil(lambda: win.conversation.session_id != sid, timeout=10_000)
    branch = win.conversation
    qtbot.waitUntil(lambda: branch.state.loaded and turn_done(win, 2), timeout=15_000)
    assert shown(win) == ["one", "Answer one.", "two, edited", "Edited answer."]
    assert said(fake_provider, 2) == ["one", "Answer one.", "two, edited"]
    assert branch.state.session is not None
    assert branch.state.session.forked_from == sid
    qtbot.waitUntil(lambda: branch.branch_note.isVisible()
                    and "open the original" in branch.branch_note.text(), timeout=5_000)
    qtbot.waitUntil(lambda: controller.main.sidebar.model.row_of(branch.session_id) is not None,
                    timeout=10_000)

    win.original_action.trigger()  # back to the original, at the message
    qtbot.waitUntil(lambda: win.conversation.session_id == sid
                    and win.conversation.state.loaded, timeout=10_000)
    edited = next(it for it in win.conversation.state.transcript.items
                  if isinstance(it, UserItem) and it.text == "two")
    assert edited.branches == [branch.session_id]
    words = QTextDocumentFragment.fromHtml(user_html(edited.text, False, 1)).toPlainText()
    assert "Edited in a new branch: open it" in words
    assert texts(win, UserItem) == ["one", "two"], "the original is as it was"
