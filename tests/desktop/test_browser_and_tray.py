"""The session browser and the tray against a real backend: live status, search, rename, delete,
approval notifications that open the session at its card, and the in-app fallback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSystemTrayIcon

from desktop.qt.compat import emit
from shared import protocol as p
from shared.methods import ApprovalRespond, PromptSubmit, SessionCreate
from tests.fakes.openai_server import FakeOpenAI, Reply

from .conftest import drive


def rows(controller: Any) -> list[p.Session]:
    found: list[p.Session] = controller.browser.sessions.rows
    return found


def row_of(controller: Any, sid: str) -> p.Session | None:
    return next((r for r in rows(controller) if r.session_id == sid), None)


def row(controller: Any, sid: str) -> p.Session:
    found = row_of(controller, sid)
    assert found is not None, f"{sid} is not listed"
    return found


def shown_status(controller: Any, sid: str) -> str:
    model = controller.browser.model
    i = controller.browser.sessions.index(sid)
    return "" if i is None else str(model.index(i, 1).data(Qt.ItemDataRole.DisplayRole))


def test_the_browser_follows_status_live_and_creates_renames_searches_and_deletes(
    qtbot: Any, controller: Any, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    browser = controller.browser
    qtbot.waitUntil(lambda: browser.empty.isVisible() or not rows(controller), timeout=5_000)
    assert not browser.sandbox_note.isVisibleTo(browser), "commands are sandboxed here"
    browser.create_session("Refactor parser", str(tmp_path))
    qtbot.waitUntil(lambda: len(controller.windows) == 1, timeout=10_000)
    win = controller.windows[0]
    sid = win.session_id
    qtbot.waitUntil(lambda: row_of(controller, sid) is not None and win.state.loaded, timeout=10_000)
    assert row(controller, sid).cwd == str(tmp_path)
    # Live status from the backend's broadcasts, without the browser subscribing to the session.
    fake_provider.script(Reply(deltas=[f"w{i} " for i in range(12)], delay=0.1))
    win.composer.setPlainText("explain the tokenizer")
    win.send()
    qtbot.waitUntil(lambda: shown_status(controller, sid) == "Working", timeout=10_000)
    qtbot.waitUntil(lambda: shown_status(controller, sid) == "Idle", timeout=15_000)
    assert row(controller, sid).message_count == 2
    # Rename through the table's editor path.
    index = browser.model.index(browser.sessions.index(sid), 0)
    assert browser.model.setData(index, "Parser rewrite", Qt.ItemDataRole.EditRole)
    qtbot.waitUntil(lambda: row(controller, sid).title == "Parser rewrite", timeout=10_000)
    qtbot.waitUntil(lambda: win.windowTitle().startswith("Parser rewrite"), timeout=5_000)
    # A second session, then search over message text.
    other = drive(qtbot, controller.link.call(SessionCreate(title="Unrelated"))).session
    qtbot.waitUntil(lambda: row_of(controller, other.session_id) is not None, timeout=10_000)
    browser.search.setText("tokenizer")
    qtbot.waitUntil(lambda: [r.session_id for r in rows(controller)] == [sid], timeout=10_000)
    browser.search.clear()
    qtbot.waitUntil(lambda: len(rows(controller)) == 2, timeout=10_000)
    # Delete: the row goes, and the open window says so instead of pretending.
    browser.delete(sid)
    qtbot.waitUntil(lambda: row_of(controller, sid) is None, timeout=10_000)
    qtbot.waitUntil(lambda: "deleted" in win.banner.text(), timeout=5_000)
    assert not win.composer.isEnabled()


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
    qtbot.waitUntil(lambda: win.state.loaded, timeout=10_000)
    win.composer.setPlainText("clean up")
    win.send()
    win.hide()  # the user went elsewhere; the turn goes on
    qtbot.waitUntil(lambda: bool(tray_calls), timeout=15_000)
    title, text = tray_calls[0]
    assert title == "Turnkey needs your approval"
    assert "rm -rf" in text
    assert controller.notifier.state == "approval"  # the tray icon says so too
    assert victim.exists()
    emit(controller.notifier.tray.messageClicked)  # the user clicks the balloon
    qtbot.waitUntil(lambda: win.isVisible() and len(win.cards) == 1, timeout=10_000)
    # Answered somewhere else (another window, the CLI): the card here goes away.
    approval_id = next(iter(win.cards))
    drive(qtbot, controller.link.call(ApprovalRespond(approval_id=approval_id, decision="deny")))
    qtbot.waitUntil(lambda: not win.cards, timeout=10_000)
    qtbot.waitUntil(lambda: win.state.status == "idle", timeout=15_000)
    assert victim.exists()
    qtbot.waitUntil(lambda: controller.notifier.state == "idle", timeout=5_000)


def test_without_a_tray_the_browser_shows_the_approval_and_a_click_opens_the_session(
    qtbot: Any, controller: Any, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    assert controller.notifier.tray is None  # offscreen has no tray
    approval_turn(fake_provider, tmp_path)
    created = drive(qtbot, controller.link.call(SessionCreate(cwd=str(tmp_path))))
    sid = created.session.session_id
    receipt = drive(qtbot, controller.link.call(PromptSubmit(
        session_id=sid, request_id="r1", text="clean up")))
    assert receipt.receipt.admission_id
    banner = controller.browser.banner
    qtbot.waitUntil(lambda: banner.isVisible() and "approval" in banner.text(), timeout=15_000)
    assert not controller.windows
    controller.browser._banner_clicked()
    qtbot.waitUntil(lambda: len(controller.windows) == 1 and len(controller.windows[0].cards) == 1,
                    timeout=10_000)
    win = controller.windows[0]
    next(iter(win.cards.values())).buttons["deny"].click()
    qtbot.waitUntil(lambda: win.state.status == "idle" and not win.cards, timeout=15_000)


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
    help_menu = next(a.menu() for a in controller.browser.menuBar().actions() if a.text() == "&Help")
    assert controller.browser.logs_action in help_menu.actions()
    controller.browser.logs_action.trigger()
    assert [u.toLocalFile() for u in opened] == [str(logs_dir)]
    assert (logs_dir / "backend.log").exists(), "the folder it opens holds the backend's log"
    controller.browser.data_action.trigger()
    assert opened[-1].toLocalFile() == str(controller.data_dir)
    answer[0] = False
    controller.browser.logs_action.trigger()
    assert controller.browser.banner.isVisibleTo(controller.browser)
    assert str(logs_dir) in controller.browser.banner.text()


def test_the_browser_says_once_and_for_good_when_commands_run_without_a_sandbox(
    qtbot: Any, desk_backend: Any, make_controller: Any
) -> None:
    desk_backend.close()
    desk_backend.extra_env["TURNKEY_BWRAP"] = "none"
    desk_backend.start()
    bare = make_controller()
    note = bare.browser.sandbox_note
    qtbot.waitUntil(lambda: note.isVisibleTo(bare.browser), timeout=10_000)
    assert "without a sandbox" in note.text()
    assert "TURNKEY_BWRAP=none" in note.text()


def test_enter_on_a_row_opens_its_session_and_a_double_click_still_does(
    qtbot: Any, controller: Any, tmp_path: Path
) -> None:
    browser = controller.browser
    sid = drive(qtbot, controller.link.call(SessionCreate(title="Keyboard", cwd=str(tmp_path)))) \
        .session.session_id
    qtbot.waitUntil(lambda: browser.sessions.index(sid) is not None, timeout=10_000)
    opened: list[str] = []
    browser.open_requested.connect(opened.append)
    index = browser.model.index(browser.sessions.index(sid), 0)
    browser.table.setCurrentIndex(index)  # the selected row
    qtbot.keyClick(browser.table, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(controller.windows) == 1 and controller.windows[0].state.loaded,
                    timeout=10_000)
    assert controller.windows[0].session_id == sid
    qtbot.keyClick(browser.table, Qt.Key.Key_Enter)  # the keypad's
    assert opened == [sid, sid]
    # As a mouse does it: a press and release, then the second press arrives as a double click.
    where = browser.table.visualRect(index).center()
    qtbot.mouseClick(browser.table.viewport(), Qt.MouseButton.LeftButton, pos=where)
    qtbot.mouseDClick(browser.table.viewport(), Qt.MouseButton.LeftButton, pos=where)
    assert opened == [sid, sid, sid], "a double click opens it once"
    assert len(controller.windows) == 1, "an open session's window is raised, not doubled"
