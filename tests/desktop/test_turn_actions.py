"""From the conversation itself: Retry a failed turn, Undo the file changes of the latest
one, see what a file write awaiting approval would write, see "thinking" before the first
word, and a new session that says what it can do and who answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtGui import QTextDocumentFragment
from pytestqt.exceptions import TimeoutError as QtTimeout

from desktop.qt.controller import Controller
from desktop.qt.transcript_view import note_html, tool_html
from desktop.state.transcript import AssistantItem, NoteItem, ToolItem, UserItem
from tests.fakes.openai_server import FakeOpenAI, Reply

from .test_session_window import new_session, open_window, texts, turn_done, type_and_send


def shown_texts(win: Any) -> list[str]:
    """The answers' texts people see (an answer not shown is hidden)."""
    return [it.text for it in win.conversation.state.transcript.items
            if isinstance(it, AssistantItem) and not it.hidden]


def test_retry_sends_a_failed_turns_prompt_again(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply.http_error(401, "invalid api key"), Reply(deltas=["Second time lucky."]))
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    type_and_send(qtbot, win, "summarize the changelog")
    try:
        qtbot.waitUntil(lambda: conv.retry_button.isVisible(), timeout=15_000)
    except QtTimeout as exc:  # (it failed twice in full runs and never alone: say why)
        st = conv.state
        raise AssertionError(
            f"no Retry: status {st.status}, queue {list(st.queue)}, actions {conv.turn_actions}, "
            f"items {[(type(i).__name__, getattr(i, 'kind', None)) for i in st.transcript.items]}, "
            f"provider requests {len(fake_provider.snapshot())}") from exc
    assert "did not finish" in conv.turn_label.text()
    # Said once, in people's words, with the raw detail a click away.
    qtbot.waitUntil(lambda: any(isinstance(it, NoteItem) and it.detail
                                for it in conv.state.transcript.items), timeout=10_000)
    row, note = next((i, it) for i, it in enumerate(conv.state.transcript.items)
                     if isinstance(it, NoteItem))
    assert "API key" in note.text
    assert "Details" in note_html(note)
    assert note.detail not in note_html(note)
    conv.state.transcript.toggle(row)
    assert note.detail in QTextDocumentFragment.fromHtml(note_html(note)).toPlainText()
    assert not conv.banner.isVisible()
    assert not conv.notice.isVisible()
    assert not conv.undo_button.isVisible()
    conv.retry_button.click()
    # Answered again in place: one prompt, the new answer shown, the failed one a page away.
    qtbot.waitUntil(lambda: shown_texts(win)[-1:] == ["Second time lucky."], timeout=15_000)
    qtbot.waitUntil(lambda: turn_done(win, 1) and conv.state.transcript.last_bar() is not None,
                    timeout=10_000)
    assert texts(win, UserItem) == ["summarize the changelog"], "no second bubble"
    assert not conv.turn_bar.isVisible()
    assert len(fake_provider.requests) == 2
    assert [m["role"] for m in fake_provider.requests[1].body["messages"]] == ["system", "user"]


def test_undo_puts_back_what_the_latest_turn_changed(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("original\n")
    fake_provider.script(
        Reply.calls({"name": "write_file", "arguments": {"path": "notes.txt", "content": "rewritten\n"}}),
        Reply(deltas=["Rewrote it."]),
    )
    sid = new_session(qtbot, controller, tmp_path)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    type_and_send(qtbot, win, "rewrite the notes")
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=15_000)
    assert target.read_text() == "rewritten\n"
    qtbot.waitUntil(lambda: conv.undo_button.isVisible(), timeout=5_000)
    assert "changed files" in conv.turn_label.text()
    conv.undo_button.click()
    qtbot.waitUntil(lambda: target.read_text() == "original\n", timeout=10_000)
    qtbot.waitUntil(lambda: "Put back 1 file: notes.txt" in conv.turn_label.text(), timeout=5_000)
    assert not conv.undo_button.isVisible(), "undone once: the button goes"


def test_undo_in_one_window_is_seen_in_every_window_of_the_session(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    """The backend's files.restored, not the window that asked, says a turn was undone: a
    pop-out of the same session stops offering Undo, and both windows mark the call's card."""
    target = tmp_path / "notes.txt"
    target.write_text("original\n")
    fake_provider.script(
        Reply.calls({"name": "write_file", "arguments": {"path": "notes.txt", "content": "rewritten\n"}}),
        Reply(deltas=["Rewrote it."]),
    )
    sid = new_session(qtbot, controller, tmp_path)
    main = open_window(qtbot, controller, sid)
    popped = open_window(qtbot, controller, sid, new_window=True)
    assert popped is not main
    type_and_send(qtbot, main, "rewrite the notes")
    for win in (main, popped):
        qtbot.waitUntil(lambda w=win: turn_done(w, 1), timeout=15_000)
        qtbot.waitUntil(lambda w=win: w.conversation.undo_button.isVisible(), timeout=5_000)

    main.conversation.undo_button.click()
    qtbot.waitUntil(lambda: target.read_text() == "original\n", timeout=10_000)
    qtbot.waitUntil(lambda: popped.conversation.turn_actions.undo_turn is None, timeout=5_000)
    assert not popped.conversation.undo_button.isVisible(), "the other window offers no Undo"
    for win in (main, popped):
        card = next(it for it in win.conversation.state.transcript.items if isinstance(it, ToolItem))
        qtbot.waitUntil(lambda c=card: c.undone, timeout=5_000)
        head = QTextDocumentFragment.fromHtml(tool_html(card, False)).toPlainText().splitlines()[0]
        assert head.endswith("· undone"), head
    assert target.read_text() == "original\n"

    # A window opened afterwards reads it from the stored rows.
    popped.close()
    later = open_window(qtbot, controller, sid, new_window=True)
    qtbot.waitUntil(lambda: turn_done(later, 1), timeout=10_000)
    card = next(it for it in later.conversation.state.transcript.items if isinstance(it, ToolItem))
    assert card.undone
    assert later.conversation.turn_actions.undo_turn is None
    assert not later.conversation.undo_button.isVisible()


def test_a_file_write_awaiting_approval_shows_what_it_would_write(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    folder = tmp_path / "project"
    folder.mkdir()
    hostile = "line one\n<img src='file:///etc/passwd'>\nexport TOKEN=$(cat ~/.ssh/id_rsa)\n"
    fake_provider.script(
        Reply.calls({"name": "write_file",
                     "arguments": {"path": str(outside / "run.sh"), "content": hostile}}),
        Reply(deltas=["Not written."]),
    )
    sid = new_session(qtbot, controller, folder)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    type_and_send(qtbot, win, "write the script over there")
    qtbot.waitUntil(lambda: len(conv.cards) == 1, timeout=15_000)
    card = next(iter(conv.cards.values()))
    assert card.preview is not None, "the content being approved is shown"
    shown = card.preview.toPlainText()
    assert "+line one" in shown
    assert "+<img src='file:///etc/passwd'>" in shown, "shown as text, never as markup"
    assert "+export TOKEN=$(cat ~/.ssh/id_rsa)" in shown
    card.buttons["deny"].click()
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=15_000)
    assert not (outside / "run.sh").exists()
    # The card says who refused it, and when; a call that never ran has no duration.
    denied = next(it for it in conv.state.transcript.items if isinstance(it, ToolItem))
    assert denied.status == "denied"
    words = QTextDocumentFragment.fromHtml(tool_html(denied, False)).toPlainText()
    assert "Not run: denied by you at " in words
    assert " s" not in words.splitlines()[0].split("denied")[-1], "no '0.0 s' for a call that never ran"


def test_thinking_shows_until_the_first_word(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply(deltas=["", "Here", " it is."], delay=0.8))
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    type_and_send(qtbot, win, "think first")
    qtbot.waitUntil(lambda: conv.thinking.isVisible(), timeout=10_000)
    assert conv.thinking.text().startswith("Thinking")
    qtbot.waitUntil(lambda: any(isinstance(it, AssistantItem) and it.text.strip()
                                for it in conv.state.transcript.items), timeout=10_000)
    qtbot.waitUntil(lambda: not conv.thinking.isVisible(), timeout=2_000)
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=10_000)


def test_a_new_session_says_what_it_can_do_and_which_model_answers(
    qtbot: Any, controller: Controller, tmp_path: Path
) -> None:
    sid = new_session(qtbot, controller, tmp_path)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    qtbot.waitUntil(lambda: conv.empty.isVisible(), timeout=5_000)
    words = conv.empty.text()
    assert tmp_path.name in words
    assert conv.state.session is not None
    assert f"Answering: {conv.state.session.model}" in words
    assert "offline model" not in words, "a real provider is configured here"


def test_the_model_box_sets_the_sessions_model_and_the_next_turn_asks_for_it(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    from PySide6.QtCore import Qt

    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    box = conv.model_box
    assert conv.state.session is not None
    qtbot.waitUntil(lambda: box.currentText() == "main · fake-model", timeout=5_000)  # provider · model
    entry = box.lineEdit()
    assert entry is not None
    entry.selectAll()
    qtbot.keyClicks(entry, "bigger-model")
    qtbot.keyClick(entry, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: conv.state.session is not None
                    and conv.state.session.model == "bigger-model", timeout=10_000)
    assert conv.state.session.provider is None, "a model alone: still the default provider"
    fake_provider.script(Reply(deltas=["ok"]))
    type_and_send(qtbot, win, "which model?")
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=15_000)
    assert fake_provider.requests[-1].body["model"] == "bigger-model"


def test_retry_shows_even_when_the_turn_bar_refreshed_before_the_stored_rows_came(
    qtbot: Any, controller: Controller, fake_provider: FakeOpenAI
) -> None:
    # A failed turn's note comes with the stored rows fetched after message.complete; a
    # refresh that ran before they arrived (here: at once, no 30 ms coalescing) must not be
    # the last one, or Retry never shows (seen in full runs, where timing varies).
    fake_provider.script(Reply.http_error(401, "invalid api key"))
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    conv = win.conversation
    conv._refresh_timer.setInterval(0)
    type_and_send(qtbot, win, "summarize the changelog")
    qtbot.waitUntil(lambda: conv.retry_button.isVisible(), timeout=15_000)
    assert conv.turn_actions.retry_text == "summarize the changelog"
