"""The main window and the tray against a real backend: the sessions sidebar (live status,
search with snippets, rename, delete, grouping), approval notifications that open the session
at its card, and the in-app fallback."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QFont, QImage, QPainter
from PySide6.QtWidgets import QApplication, QSystemTrayIcon

from desktop.qt import theme
from desktop.qt.compat import emit
from desktop.qt.sidebar_delegate import SessionDelegate
from desktop.qt.sidebar_model import KIND
from shared import protocol as p
from shared.methods import ApprovalRespond, PromptSubmit, SessionCreate
from tests.fakes.openai_server import FakeOpenAI, Reply

from .conftest import drive
from .seed import seed_long_session_info


def rows(controller: Any) -> list[p.Session]:
    found: list[p.Session] = controller.main.sidebar.sessions.rows
    return found


def row_of(controller: Any, sid: str) -> p.Session | None:
    return next((r for r in rows(controller) if r.session_id == sid), None)


def row(controller: Any, sid: str) -> p.Session:
    found = row_of(controller, sid)
    assert found is not None, f"{sid} is not listed"
    return found


def shown(controller: Any, sid: str) -> str:
    """What the sidebar's row says of a session (as a screen reader reads it)."""
    model = controller.main.sidebar.model
    n = model.row_of(sid)
    return "" if n is None else str(model.index(n, 0).data(Qt.ItemDataRole.AccessibleTextRole))


def headers(controller: Any) -> list[str]:
    model = controller.main.sidebar.model
    return [str(model.index(n, 0).data()) for n in range(model.rowCount())
            if model.index(n, 0).data(KIND) == "header"]


def test_the_sidebar_follows_status_live_and_creates_renames_searches_and_deletes(
    qtbot: Any, controller: Any, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    main = controller.main
    sidebar = main.sidebar
    qtbot.waitUntil(lambda: sidebar.empty.isVisible() or not rows(controller), timeout=5_000)
    assert not main.sandbox_note.isVisibleTo(main), "commands are sandboxed here"
    main.create_session("Refactor parser", str(tmp_path))
    qtbot.waitUntil(lambda: main.current is not None and main.conversation.state.loaded,
                    timeout=10_000)
    win = main
    sid = win.session_id
    assert not controller.windows, "a new session opens beside the sidebar, not in a new window"
    qtbot.waitUntil(lambda: row_of(controller, sid) is not None, timeout=10_000)
    assert sidebar.selected_id() == sid, "the session shown is the current row"
    assert row(controller, sid).cwd == str(tmp_path)
    # Live status and cost from the backend's broadcasts, without the sidebar subscribing.
    fake_provider.script(Reply(deltas=[f"w{i} " for i in range(12)], delay=0.1))
    win.conversation.composer.setPlainText("explain the tokenizer")
    win.conversation.send()
    qtbot.waitUntil(lambda: "Working" in shown(controller, sid), timeout=10_000)
    qtbot.waitUntil(lambda: "Idle" in shown(controller, sid), timeout=15_000)
    assert row(controller, sid).message_count == 2
    # Rename through the list's editor path.
    index = sidebar.model.index(sidebar.model.row_of(sid), 0)
    assert sidebar.model.setData(index, "Parser rewrite", Qt.ItemDataRole.EditRole)
    qtbot.waitUntil(lambda: row(controller, sid).title == "Parser rewrite", timeout=10_000)
    qtbot.waitUntil(lambda: win.windowTitle().startswith("Parser rewrite"), timeout=5_000)
    # A second session, then search over message text: the match's words come with it.
    other = drive(qtbot, controller.link.call(SessionCreate(title="Unrelated"))).session
    qtbot.waitUntil(lambda: row_of(controller, other.session_id) is not None, timeout=10_000)
    sidebar.search.setText("tokenizer")
    qtbot.waitUntil(lambda: [r.session_id for r in rows(controller)] == [sid], timeout=10_000)
    match = sidebar.model.matches[sid]
    assert "tokenizer" in match.snippet
    assert [match.snippet[a:b].lower() for a, b in match.highlights] == ["tokenizer"]
    assert headers(controller) == ["1 result"]
    sidebar.search.clear()
    qtbot.waitUntil(lambda: len(rows(controller)) == 2, timeout=10_000)
    assert headers(controller) == ["Today"], "grouped by day"
    # Delete: the row goes, and the conversation beside it goes back to the start page.
    sidebar.delete(sid)
    qtbot.waitUntil(lambda: row_of(controller, sid) is None, timeout=10_000)
    qtbot.waitUntil(lambda: main.current is None, timeout=5_000)
    assert main.stack.currentWidget() is main.empty


def test_a_snippet_shows_its_match_even_when_many_words_come_before_it(qapp: QApplication) -> None:
    lead = "…return the total of every row in the table before the loop ends, then the"
    snippet = f"{lead} zebra step re-reads the rows on each pass…"
    start = snippet.index("zebra")
    match = p.SearchMatch(session_id="s", message_id="m", snippet=snippet, highlights=[(start, start + 5)])
    colors = theme.colors()
    image = QImage(240, 20, QImage.Format.Format_RGB32)
    image.fill(QColor(colors.surface))
    painter = QPainter(image)
    SessionDelegate._snippet(painter, QRect(0, 0, 240, 20), QFont(), match, colors)
    painter.end()
    accent = QColor(colors.accent).rgb()
    assert any(image.pixel(x, y) == accent for x in range(240) for y in range(20)), \
        "the matched word is drawn, in the accent colour"


def approval_turn(fake_provider: FakeOpenAI, folder: Path) -> Path:
    victim = folder / "victim"
    victim.mkdir()
    fake_provider.script(
        Reply.calls({"name": "terminal", "arguments": {"command": f"rm -rf {victim}"}}),
        Reply(deltas=["Done."]),
    )
    return victim


@pytest.fixture
def tray_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """A desktop with a system tray: QSystemTrayIcon says one exists; its balloons are recorded."""
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))
    monkeypatch.setattr(QSystemTrayIcon, "showMessage",
                        lambda self, title, text, *rest: calls.append((title, text)))
    return calls


def test_an_approval_for_a_hidden_window_raises_a_tray_notification_that_opens_the_card(
    qtbot: Any, tray_calls: list[tuple[str, str]], make_controller: Any,
    fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    controller = make_controller()
    assert controller.notifier.tray is not None
    victim = approval_turn(fake_provider, tmp_path)
    created = drive(qtbot, controller.link.call(SessionCreate(cwd=str(tmp_path))))
    sid = created.session.session_id
    win = controller.open_session(sid)
    qtbot.waitUntil(lambda: win.conversation.state.loaded, timeout=10_000)
    win.conversation.composer.setPlainText("clean up")
    win.conversation.send()
    win.hide()  # the user went elsewhere; the turn goes on
    qtbot.waitUntil(lambda: bool(tray_calls), timeout=15_000)
    title, text = tray_calls[0]
    assert title == "Turnkey needs your approval"
    assert "rm -rf" in text
    assert controller.notifier.state == "approval"  # the tray icon says so too
    assert victim.exists()
    emit(controller.notifier.tray.messageClicked)  # the user clicks the balloon
    qtbot.waitUntil(lambda: win.isVisible() and len(win.conversation.cards) == 1, timeout=10_000)
    # Answered somewhere else (another window, the CLI): the card here goes away.
    approval_id = next(iter(win.conversation.cards))
    drive(qtbot, controller.link.call(ApprovalRespond(approval_id=approval_id, decision="deny")))
    qtbot.waitUntil(lambda: not win.conversation.cards, timeout=10_000)
    qtbot.waitUntil(lambda: win.conversation.state.status == "idle", timeout=15_000)
    assert victim.exists()
    qtbot.waitUntil(lambda: controller.notifier.state == "idle", timeout=5_000)


def tray_entry(controller: Any, approval_id: str) -> Any:
    """The approval's entry in the tray's menu (a submenu), or None."""
    notifier = controller.notifier
    entry = notifier.waiting.get(approval_id)
    if entry is None:
        return None
    assert entry.menuAction() in notifier.menu.actions(), "it is in the menu the tray shows"
    return entry


def test_the_tray_menu_answers_each_approval_while_it_waits(
    qtbot: Any, tray_calls: list[tuple[str, str]], make_controller: Any,
    fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    """A tray balloon has no buttons: its click opens the approval's card, focused, and the
    tray's menu lists each approval waiting with Allow once and Deny, until it is answered."""
    controller = make_controller()
    notifier = controller.notifier
    assert notifier.tray is not None
    assert notifier.tray.contextMenu() is notifier.menu
    victim = approval_turn(fake_provider, tmp_path)
    sid = drive(qtbot, controller.link.call(SessionCreate(cwd=str(tmp_path)))).session.session_id
    drive(qtbot, controller.link.call(PromptSubmit(session_id=sid, request_id="r1", text="clean")))
    qtbot.waitUntil(lambda: bool(tray_calls) and bool(notifier.waiting), timeout=15_000)
    (approval_id,) = notifier.waiting
    entry = tray_entry(controller, approval_id)
    assert entry.title().startswith("Approve? terminal: rm -rf")
    assert [a.text() for a in entry.actions() if a.text()] == [
        "Allow once", "Deny", "Show in Turnkey…"]
    assert notifier.menu.actions()[0] is entry.menuAction(), "first in the menu"

    # The balloon's click opens the session with the card's Allow once focused.
    emit(notifier.tray.messageClicked)
    qtbot.waitUntil(lambda: controller.main.current is not None
                    and approval_id in controller.main.conversation.cards, timeout=10_000)
    card = controller.main.conversation.cards[approval_id]
    qtbot.waitUntil(lambda: controller.main.focusWidget() is card.buttons["once"], timeout=5_000)

    # Deny from the tray's menu answers it; the entry goes with the approval.
    deny = next(a for a in entry.actions() if a.text() == "Deny")
    before = len(notifier.menu.actions())
    deny.trigger()
    qtbot.waitUntil(lambda: approval_id not in notifier.waiting, timeout=10_000)
    assert len(notifier.menu.actions()) == before - 1, "its entry left the menu"
    qtbot.waitUntil(lambda: controller.statuses.get(sid) == "idle", timeout=15_000)
    assert victim.exists(), "denied"

    # Another approval, allowed from the menu.
    controller.main.clear_session()
    again = tmp_path / "again"
    again.mkdir()
    approval_turn(fake_provider, again)
    drive(qtbot, controller.link.call(PromptSubmit(session_id=sid, request_id="r2", text="again")))
    qtbot.waitUntil(lambda: len(notifier.waiting) == 1, timeout=15_000)
    (second,) = notifier.waiting
    allow = next(a for a in tray_entry(controller, second).actions() if a.text() == "Allow once")
    allow.trigger()
    qtbot.waitUntil(lambda: not notifier.waiting, timeout=10_000)
    qtbot.waitUntil(lambda: controller.statuses.get(sid) == "idle", timeout=15_000)
    assert not (again / "victim").exists(), "allowed: the command ran"
    assert not any(a.menu() for a in notifier.menu.actions()), "no approval entry is left"


def test_without_a_tray_the_main_window_shows_the_approval_and_a_click_opens_the_session(
    qtbot: Any, controller: Any, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    assert controller.notifier.tray is None  # offscreen has no tray
    approval_turn(fake_provider, tmp_path)
    created = drive(qtbot, controller.link.call(SessionCreate(cwd=str(tmp_path))))
    sid = created.session.session_id
    receipt = drive(qtbot, controller.link.call(PromptSubmit(
        session_id=sid, request_id="r1", text="clean up")))
    assert receipt.receipt.admission_id
    main = controller.main
    banner = main.banner
    qtbot.waitUntil(lambda: banner.isVisible() and "approval" in banner.text(), timeout=15_000)
    assert main.current is None
    main._banner_clicked()
    qtbot.waitUntil(lambda: main.current is not None and len(main.conversation.cards) == 1,
                    timeout=10_000)
    assert not controller.windows
    win = main
    next(iter(win.conversation.cards.values())).buttons["deny"].click()
    qtbot.waitUntil(lambda: win.conversation.state.status == "idle" and not win.conversation.cards,
                    timeout=15_000)


def test_help_opens_the_logs_folder_and_says_so_when_nothing_can(
    controller: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from PySide6.QtCore import QUrl

    opened: list[QUrl] = []
    answer = [True]

    def fake_open(url: QUrl) -> bool:
        opened.append(url)
        return answer[0]

    monkeypatch.setattr("desktop.qt.controller.QDesktopServices.openUrl", fake_open)
    logs_dir = controller.data_dir / "logs"
    main = controller.main
    help_menu = next(a.menu() for a in main.menuBar().actions() if a.text() == "&Help")
    assert main.app_actions["logs"] in help_menu.actions()
    main.app_actions["logs"].trigger()
    assert [u.toLocalFile() for u in opened] == [str(logs_dir)]
    assert (logs_dir / "backend.log").exists(), "the folder it opens holds the backend's log"
    main.app_actions["data"].trigger()
    assert opened[-1].toLocalFile() == str(controller.data_dir)
    answer[0] = False
    main.app_actions["logs"].trigger()
    assert main.banner.isVisibleTo(main)
    assert str(logs_dir) in main.banner.text()


def test_the_main_window_says_once_and_for_good_when_commands_run_without_a_sandbox(
    qtbot: Any, desk_backend: Any, make_controller: Any
) -> None:
    desk_backend.close()
    desk_backend.extra_env["TURNKEY_BWRAP"] = "none"
    desk_backend.start()
    bare = make_controller()
    note = bare.main.sandbox_note
    qtbot.waitUntil(lambda: note.isVisibleTo(bare.main), timeout=10_000)
    assert "without a sandbox" in note.text()
    assert "TURNKEY_BWRAP=none" in note.text()


def test_enter_on_a_row_opens_its_session_and_a_click_does_once(
    qtbot: Any, controller: Any, tmp_path: Path
) -> None:
    main = controller.main
    sidebar = main.sidebar
    sid = drive(qtbot, controller.link.call(SessionCreate(title="Keyboard", cwd=str(tmp_path)))) \
        .session.session_id
    qtbot.waitUntil(lambda: sidebar.model.row_of(sid) is not None, timeout=10_000)
    opened: list[str] = []
    sidebar.open_requested.connect(lambda s, _at: opened.append(s))
    index = sidebar.model.index(sidebar.model.row_of(sid), 0)
    sidebar.list.setCurrentIndex(index)  # the selected row
    qtbot.keyClick(sidebar.list, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: main.current is not None and main.conversation.state.loaded,
                    timeout=10_000)
    assert main.session_id == sid
    assert main.conversation.composer.hasFocus() or not main.isActiveWindow(), \
        "opening a session puts the typing in its message box"
    qtbot.keyClick(sidebar.list, Qt.Key.Key_Enter)  # the keypad's
    assert opened == [sid, sid]
    shown = main.conversation
    where = sidebar.list.visualRect(index).center()
    qtbot.mouseClick(sidebar.list.viewport(), Qt.MouseButton.LeftButton, pos=where)
    assert opened[-1] == sid
    assert main.conversation is shown, "the session already shown is not loaded again"
    assert not controller.windows


def test_headers_are_skipped_by_the_arrow_keys_and_grouping_by_folder_lists_each_folder(
    qtbot: Any, controller: Any, tmp_path: Path
) -> None:
    sidebar = controller.main.sidebar
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    made = [drive(qtbot, controller.link.call(SessionCreate(title=t, cwd=str(d)))).session.session_id
            for t, d in (("A", one), ("B", two), ("C", one))]
    qtbot.waitUntil(lambda: all(sidebar.model.row_of(s) is not None for s in made), timeout=10_000)
    sidebar.set_grouping("folder")
    labels = headers(controller)
    assert [label.rsplit("/", 1)[-1] for label in labels] == ["one", "two"], labels
    model = sidebar.model
    assert model.index(0, 0).data(KIND) == "header"
    assert not model.flags(model.index(0, 0)) & Qt.ItemFlag.ItemIsSelectable
    # From the last session of "one" down across the "two" header, to the session under it.
    sidebar.list.setFocus()
    sidebar.list.setCurrentIndex(model.index(model.row_of(made[0]), 0))
    qtbot.keyClick(sidebar.list, Qt.Key.Key_Down)
    assert sidebar.selected_id() == made[1]
    qtbot.keyClick(sidebar.list, Qt.Key.Key_Up)
    assert sidebar.selected_id() == made[0]
    sidebar.set_grouping("day")
    assert headers(controller) == ["Today"]


def test_a_search_result_opens_its_session_at_the_message_that_matched(
    qtbot: Any, desk_backend: Any, make_controller: Any
) -> None:
    """A word said once, early in a long session: Enter in the search opens the session,
    loads back to that message and shows it."""
    assert desk_backend.terminate() == 0
    try:
        seeded = seed_long_session_info(desk_backend.data_dir, 450)
        target = seeded.message_id(0)  # the first prompt
        with sqlite3.connect(desk_backend.data_dir / "state.db") as db:
            db.execute("UPDATE messages SET content = ? WHERE id = ?",
                       ("Mind the zebra protocol when you rewrite the handshake.", int(target)))
            kind = db.execute("SELECT role FROM messages WHERE id = ?", (int(target),)).fetchone()
        assert kind == ("user",)
    finally:
        desk_backend.start()
    controller = make_controller()
    main = controller.main
    sid = seeded.session_id
    sidebar = main.sidebar
    sidebar.search.setText("zebra")
    # (The only session is listed before the search too: wait for the search's own answer.)
    qtbot.waitUntil(lambda: sidebar.sessions.query == "zebra", timeout=10_000)
    assert [r.session_id for r in rows(controller)] == [sid]
    match = sidebar.model.matches[sid]
    assert match.message_id == target
    assert match.snippet[match.highlights[0][0]:match.highlights[0][1]].lower() == "zebra"
    sidebar.search.setFocus()
    qtbot.keyClick(sidebar.search, Qt.Key.Key_Return)  # Enter in the search opens the best match
    qtbot.waitUntil(lambda: main.current is not None and main.conversation.state.loaded,
                    timeout=10_000)
    conversation = main.conversation

    def found() -> int | None:
        row: int | None = conversation.state.transcript.find(target)
        return row

    qtbot.waitUntil(lambda: found() is not None, timeout=15_000)
    qtbot.waitUntil(lambda: conversation.view.currentIndex().row() == found(), timeout=5_000)
    assert conversation.state.transcript.fetched_messages > 400, "older pages were loaded"
    shown_rect = conversation.view.visualRect(conversation.view.currentIndex())
    assert conversation.view.viewport().rect().intersects(shown_rect), "the match is in view"
    assert not conversation.follower.stuck, "reading an old message: new ones do not pull it away"
