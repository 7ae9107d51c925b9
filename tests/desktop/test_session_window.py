"""Session windows against a real backend: streaming, approvals, reconnect, two windows, resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PySide6.QtGui import QTextDocumentFragment

from desktop.qt.controller import Controller
from desktop.qt.session_window import Window
from desktop.qt.transcript_view import tool_html
from desktop.state.transcript import AssistantItem, Item, ToolItem, UserItem
from shared.methods import PromptSubmit, SessionCreate
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.backend_proc import Backend

from .conftest import drive


def new_session(qtbot: Any, controller: Controller, cwd: Path | None = None) -> str:
    result = drive(qtbot, controller.link.call(SessionCreate(cwd=str(cwd) if cwd else None)))
    return result.session.session_id


def texts(win: Window, kind: type[UserItem | AssistantItem]) -> list[str]:
    items: list[Item] = win.conversation.state.transcript.items
    return [it.text for it in items if isinstance(it, kind)]


def type_and_send(qtbot: Any, win: Window, text: str) -> None:
    win.conversation.composer.setPlainText(text)
    win.conversation.send()


def test_a_streamed_turn_appears_and_ends_with_the_authoritative_text(
    qtbot: Any, controller: Any, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply(deltas=["Hel", "lo ", "there"], delay=0.15))
    sid = new_session(qtbot, controller)
    win = controller.open_session(sid)
    qtbot.addWidget(win)
    qtbot.waitUntil(lambda: win.conversation.state.loaded, timeout=10_000)
    type_and_send(qtbot, win, "say hello")
    # Mid-stream: a streaming item with part of the text.
    qtbot.waitUntil(lambda: any(isinstance(it, AssistantItem) and it.streaming and it.text
                                for it in win.conversation.state.transcript.items), timeout=10_000)
    qtbot.waitUntil(lambda: win.conversation.state.status == "idle"
                    and texts(win, AssistantItem) == ["Hello there"], timeout=15_000)
    qtbot.waitUntil(lambda: all(not it.key.startswith(("stream:", "prompt:"))
                                for it in win.conversation.state.transcript.items), timeout=10_000)
    assert texts(win, UserItem) == ["say hello"]
    assert texts(win, AssistantItem) == ["Hello there"]
    assert win.conversation.usage_label.text()  # tokens and cost in the status bar


def open_window(qtbot: Any, controller: Controller, sid: str, new_window: bool = False) -> Window:
    win = controller.open_session(sid, new_window=new_window)
    qtbot.waitUntil(lambda: win.conversation.state.loaded, timeout=10_000)
    return win


def turn_done(win: Window, n: int) -> bool:
    """n turns finished and reconciled with the stored rows."""
    items = win.conversation.state.transcript.items
    return (win.conversation.state.status == "idle" and len(texts(win, UserItem)) == n
            and all(not it.key.startswith(("stream:", "prompt:")) for it in items))


def test_an_approval_card_answered_in_the_window_unblocks_the_tool(
    qtbot: Any, controller: Any, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "old.txt").write_text("bye")
    fake_provider.script(
        Reply.calls({"name": "terminal", "arguments": {"command": f"rm -rf {victim}"}}),
        Reply(deltas=["Removed it."]),
    )
    sid = new_session(qtbot, controller, tmp_path)
    win = open_window(qtbot, controller, sid)
    type_and_send(qtbot, win, "clean up")
    qtbot.waitUntil(lambda: len(win.conversation.cards) == 1, timeout=15_000)
    card = next(iter(win.conversation.cards.values()))
    assert "rm -rf" in card.approval.summary
    assert victim.exists()  # nothing ran before the answer
    cards = [it for it in win.conversation.state.transcript.items if isinstance(it, ToolItem)]
    assert [c.status for c in cards] == ["waiting_approval"]
    card.buttons["once"].click()
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=20_000)
    qtbot.waitUntil(lambda: not win.conversation.cards,
                    timeout=5_000)  # gone once the backend said it was answered
    assert not victim.exists()
    cards = [it for it in win.conversation.state.transcript.items if isinstance(it, ToolItem)]
    assert [c.status for c in cards] == ["ok"]
    assert texts(win, AssistantItem)[-1] == "Removed it."
    words = QTextDocumentFragment.fromHtml(tool_html(cards[0], False)).toPlainText()
    assert "Allowed by you (once) at " in words, "the card says who let it run, and when"


def test_the_card_says_what_the_sandbox_let_through_and_what_it_blocked(
    qtbot: Any, controller: Any, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    session, victim = tmp_path / "session", tmp_path / "victim"
    session.mkdir()
    victim.mkdir()
    fake_provider.script(
        Reply.calls({"name": "terminal", "arguments": {"command": "rm -rf ../victim"}},
                    {"name": "terminal", "arguments": {"command": "touch ../elsewhere || true"}}),
        Reply(deltas=["Done."]),
    )
    sid = new_session(qtbot, controller, session)
    win = open_window(qtbot, controller, sid)
    type_and_send(qtbot, win, "clean up")
    qtbot.waitUntil(lambda: len(win.conversation.cards) == 1, timeout=15_000)
    card = next(iter(win.conversation.cards.values()))
    assert f"{tmp_path} writable" in card.approval.reason
    card.buttons["once"].click()
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=20_000)
    assert not victim.exists()
    cards = [it for it in win.conversation.state.transcript.items if isinstance(it, ToolItem)]
    allowed, blocked = (QTextDocumentFragment.fromHtml(tool_html(c, False)).toPlainText() for c in cards)
    assert f"Ran with {tmp_path} writable, as allowed." in allowed
    assert "blocked by the sandbox" in blocked
    assert "did not do all it was asked to" in blocked
    assert not (tmp_path / "elsewhere").exists()


def test_two_windows_on_one_session_stay_in_sync(
    qtbot: Any, controller: Any, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply(deltas=["one ", "two ", "three"], delay=0.1), Reply(deltas=["again"]))
    sid = new_session(qtbot, controller)
    first = open_window(qtbot, controller, sid)
    sidebar = controller.main.sidebar
    qtbot.waitUntil(lambda: sidebar.model.row_of(sid) is not None, timeout=10_000)
    sidebar.list.setCurrentIndex(sidebar.model.index(sidebar.model.row_of(sid), 0))
    sidebar.open_new_action.trigger()  # the row's context menu → Open in new window
    qtbot.waitUntil(lambda: len(controller.windows) == 1 and controller.windows[0].conversation.state.loaded,
                    timeout=10_000)
    second = controller.windows[0]
    assert first is not second
    assert second.session_id == sid
    type_and_send(qtbot, first, "count")
    qtbot.waitUntil(lambda: turn_done(first, 1) and turn_done(second, 1), timeout=15_000)
    type_and_send(qtbot, second, "more")
    qtbot.waitUntil(lambda: turn_done(first, 2) and turn_done(second, 2), timeout=15_000)
    for win in (first, second):
        assert texts(win, UserItem) == ["count", "more"]
        assert texts(win, AssistantItem) == ["one two three", "again"]
    # Closing one leaves the other following the session.
    first.close()
    fake_provider.script(Reply(deltas=["third"]))
    type_and_send(qtbot, second, "last")
    qtbot.waitUntil(lambda: turn_done(second, 3), timeout=15_000)
    assert texts(second, AssistantItem) == ["one two three", "again", "third"]


def test_after_the_backend_is_killed_and_restarted_the_window_reconnects_without_duplicates(
    qtbot: Any, controller: Any, fake_provider: FakeOpenAI, desk_backend: Backend
) -> None:
    fake_provider.script(Reply(deltas=["first ", "answer"], delay=0.05), Reply(deltas=["second answer"]))
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    type_and_send(qtbot, win, "one")
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=15_000)
    desk_backend.kill9()
    qtbot.waitUntil(lambda: controller.link.current == "reconnecting", timeout=10_000)
    qtbot.waitUntil(lambda: "reconnecting" in win.conversation.conn_label.text(), timeout=5_000)
    desk_backend.start()
    qtbot.waitUntil(lambda: controller.link.current == "connected", timeout=20_000)
    qtbot.waitUntil(lambda: win.conversation.conn_label.text() == "", timeout=5_000)
    type_and_send(qtbot, win, "two")
    qtbot.waitUntil(lambda: turn_done(win, 2), timeout=15_000)
    assert texts(win, UserItem) == ["one", "two"]
    assert texts(win, AssistantItem) == ["first answer", "second answer"]


def test_a_dropped_connection_mid_stream_replays_what_was_missed_exactly_once(
    qtbot: Any, controller: Any, fake_provider: FakeOpenAI
) -> None:
    words = [f"w{i} " for i in range(30)]
    fake_provider.script(Reply(deltas=words, delay=0.05))
    sid = new_session(qtbot, controller)
    win = open_window(qtbot, controller, sid)
    type_and_send(qtbot, win, "talk")
    qtbot.waitUntil(lambda: any(isinstance(it, AssistantItem) and len(it.text) > 10
                                for it in win.conversation.state.transcript.items), timeout=10_000)
    ws = controller.link.client._ws
    assert ws is not None
    ws.transport.abort()  # the network drops; the backend and its turn go on
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=20_000)
    assert texts(win, AssistantItem) == ["".join(words)]


def test_closing_every_window_leaves_the_turn_running_and_reopening_shows_it(
    qtbot: Any, make_controller: Any, fake_provider: FakeOpenAI
) -> None:
    # Long enough (6 s) that the turn still runs when the second app has connected.
    words = [f"part{i} " for i in range(60)]
    fake_provider.script(Reply(deltas=words, delay=0.1))
    first = make_controller()
    sid = new_session(qtbot, first)
    open_window(qtbot, first, sid)  # beside the sidebar
    win = open_window(qtbot, first, sid, new_window=True)  # and popped out
    type_and_send(qtbot, win, "long answer")
    qtbot.waitUntil(lambda: any(isinstance(it, AssistantItem) and "part3" in it.text
                                for it in win.conversation.state.transcript.items), timeout=10_000)
    win.setGeometry(140, 120, 700, 640)
    # Quit saves the layout (which sessions are open, and where), closes every window and the
    # app's connection; the backend keeps going.
    first.quit()
    qtbot.waitUntil(lambda: first.link.client.state == "closed", timeout=10_000)
    again = make_controller(restore=True)
    qtbot.waitUntil(lambda: len(again.windows) == 1 and again.windows[0].conversation.state.loaded,
                    timeout=15_000)
    reopened = again.windows[0]
    assert reopened.session_id == sid
    qtbot.waitUntil(lambda: again.main.current is not None, timeout=5_000)
    assert again.main.session_id == sid, "the main window shows what it showed"
    qtbot.waitUntil(lambda: again.main.conversation.state.loaded, timeout=15_000)
    assert (reopened.width(), reopened.height()) == (700, 640)
    assert again.notifier.state == "working"  # what runs now, before any broadcast
    # Mid-stream: the text so far is there at once, the rest follows live.
    streamed = texts(reopened, AssistantItem)
    assert streamed
    assert streamed[0].startswith("part0 part1 part2 part3")
    assert reopened.conversation.state.status in ("running", "idle")
    qtbot.waitUntil(lambda: turn_done(reopened, 1), timeout=20_000)
    assert texts(reopened, AssistantItem) == ["".join(words)]


def test_quit_right_after_opening_a_window_keeps_it_in_the_saved_layout(
    qtbot: Any, make_controller: Any
) -> None:
    # Opening a window starts the layout's 500 ms debounce; quitting inside it used to let that
    # save run after the windows had closed, leaving a layout with no session to restore (the
    # flaky restore above, whenever its turn streamed in under 500 ms).
    first = make_controller()
    sid = new_session(qtbot, first)
    open_window(qtbot, first, sid, new_window=True)
    assert first._save_timer.isActive()
    first.quit()
    qtbot.waitUntil(lambda: first.link.client.state == "closed", timeout=10_000)
    qtbot.wait(700)  # past the debounce
    layout = json.loads((first.data_dir / "desktop.json").read_text())
    assert [s["session_id"] for s in layout["sessions"]] == [sid]
    again = make_controller(restore=True)
    qtbot.waitUntil(lambda: len(again.windows) == 1 and again.windows[0].conversation.state.loaded,
                    timeout=15_000)
    assert again.windows[0].session_id == sid


def ask_approval(qtbot: Any, controller: Controller, fake: FakeOpenAI, folder: Path, name: str) -> str:
    """A session whose turn waits for the person's approval (`rm -rf` asks in smart mode),
    sent from elsewhere: no window shows it."""
    sid = new_session(qtbot, controller, folder)
    fake.routes[f"clean up {name}"] = Reply.calls(
        {"name": "terminal", "arguments": {"command": f"rm -rf {folder}/{name}"}})
    drive(qtbot, controller.link.call(PromptSubmit(session_id=sid, request_id=f"ask-{name}",
                                                   text=f"clean up {name}")))
    qtbot.waitUntil(lambda: controller.statuses.get(sid) == "waiting_approval", timeout=15_000)
    return sid


def test_relaunching_while_an_approval_waits_shows_the_session_that_needs_the_person(
    qtbot: Any, make_controller: Any, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    first = make_controller()
    new_session(qtbot, first)  # another session, with nothing to decide
    older = ask_approval(qtbot, first, fake_provider, tmp_path, "old")
    latest = ask_approval(qtbot, first, fake_provider, tmp_path, "new")
    assert first.main.current is None  # (the app shows the start page)
    first.quit()
    qtbot.waitUntil(lambda: first.link.client.state == "closed", timeout=10_000)
    again = make_controller(restore=True)
    qtbot.waitUntil(lambda: again.main.current is not None, timeout=10_000)
    assert again.main.session_id == latest, "the session asking most recently, not the start page"
    assert again.main.session_id != older
    conv = again.main.conversation
    qtbot.waitUntil(lambda: len(conv.cards) == 1, timeout=10_000)
    card = next(iter(conv.cards.values()))
    assert f"rm -rf {tmp_path}/new" in card.approval.summary
    assert again.main.stack.currentWidget() is conv
    assert not again.windows


def test_relaunching_while_only_a_question_waits_shows_its_session(
    qtbot: Any, make_controller: Any, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    """As for an approval: a question asked after the approval shows its session at start."""
    first = make_controller()
    ask_approval(qtbot, first, fake_provider, tmp_path, "old")
    asking = new_session(qtbot, first, tmp_path)
    fake_provider.routes["pick one"] = Reply.calls(
        {"name": "clarify", "arguments": {"question": "Which one?", "choices": ["a", "b"]}})
    drive(qtbot, first.link.call(PromptSubmit(session_id=asking, request_id="ask-q",
                                              text="pick one")))
    qtbot.waitUntil(lambda: first.statuses.get(asking) == "waiting_answer", timeout=15_000)
    first.quit()
    qtbot.waitUntil(lambda: first.link.client.state == "closed", timeout=10_000)
    again = make_controller(restore=True)
    qtbot.waitUntil(lambda: again.main.current is not None, timeout=10_000)
    assert again.main.session_id == asking, "the question was asked last"
    conv = again.main.conversation
    qtbot.waitUntil(lambda: len(conv.shelves.questions) == 1, timeout=10_000)


def test_a_retry_shows_a_countdown_and_a_crashed_tool_shows_its_outcome_as_unknown(
    qtbot: Any, controller: Any, fake_provider: FakeOpenAI, desk_backend: Backend, tmp_path: Path
) -> None:
    fake_provider.script(Reply.http_error(429, "slow down", **{"Retry-After": "2"}),
                         Reply(deltas=["made it"]))
    sid = new_session(qtbot, controller, tmp_path)
    win = open_window(qtbot, controller, sid)
    type_and_send(qtbot, win, "hi")
    notice = win.conversation.notice
    qtbot.waitUntil(lambda: notice.isVisible() and "Retrying in" in notice.text(), timeout=10_000)
    assert "attempt 2" in win.conversation.notice.text()
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=15_000)
    qtbot.waitUntil(lambda: not win.conversation.notice.isVisible(), timeout=5_000)
    # A tool that is running when the backend dies: after the restart the card says "unknown".
    marker = tmp_path / "marker"
    fake_provider.script(Reply.calls({"name": "terminal",
                                      "arguments": {"command": f"sleep 3; touch {marker}"}}))
    type_and_send(qtbot, win, "slow tool")
    qtbot.waitUntil(lambda: any(isinstance(it, ToolItem) and it.status == "running"
                                for it in win.conversation.state.transcript.items), timeout=10_000)
    desk_backend.kill9()
    fake_provider.script(Reply(deltas=["after the crash"]))
    qtbot.waitUntil(lambda: controller.link.current == "reconnecting", timeout=10_000)
    desk_backend.start()
    # Sent while the connection is down: it goes out (once) when the app is back.
    type_and_send(qtbot, win, "what happened?")
    qtbot.waitUntil(lambda: turn_done(win, 3), timeout=20_000)
    cards = [it for it in win.conversation.state.transcript.items if isinstance(it, ToolItem)]
    assert [c.status for c in cards] == ["unknown"]
    assert not marker.exists()
    assert texts(win, AssistantItem)[-1] == "after the crash"
    assert texts(win, UserItem) == ["hi", "slow tool", "what happened?"]
