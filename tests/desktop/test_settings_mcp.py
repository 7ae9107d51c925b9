"""Settings → MCP servers against a real backend process, with real MCP servers: the
`mcp-server-time` package (stdio), a program that fails at start, and a URL nothing answers.

What the page shows comes from config.get/config.set, mcp.list, mcp.test and the live
`mcp.server` events; what it changes is checked in config.toml and secrets.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before any QApplication exists

import asyncio
import json
import shlex
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QLabel, QMenu, QWidget
from pytestqt.qtbot import QtBot

from desktop.link import Link
from desktop.qt.settings import SettingsDialog
from desktop.qt.settings_mcp import McpPage
from desktop.qt.transcript_view import plain_text, tool_html
from desktop.state.mcp_form import new_server_table
from desktop.state.transcript import ToolItem
from shared import protocol as p
from shared.config import ConfigView
from shared.mcp_names import shown_name, split_model_name
from shared.methods import ConfigGet, ConfigSet, McpTest, SessionCreate
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.backend_proc import Backend

from .test_accessibility import unnamed

REPO = Path(__file__).resolve().parents[2]
TOKEN = "mcp-http-LEAKCHECK-token-0123456789"
WAIT_MS = 60_000  # a server's start (the sandbox, Python's imports) on a slow machine
KEY = "Bearer mcp-test-LEAKCHECK-0123456789abcdef"
TIME = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
TIME_TOOLS = {"get_current_time", "convert_time"}
# A program that says why on stderr and exits at once.
BROKEN = [sys.executable, "-c", "import sys; sys.stderr.write('cannot open the vault\\n'); "
          "sys.exit(3)"]


# --- fixtures ----------------------------------------------------------------------------


def _run(qtbot: QtBot, coro: Coroutine[Any, Any, Any], timeout_ms: int = WAIT_MS) -> Any:
    task = asyncio.ensure_future(coro)
    qtbot.waitUntil(task.done, timeout=timeout_ms)
    return task.result()


@pytest.fixture
def link(desk_backend: Backend, qloop: asyncio.AbstractEventLoop, qtbot: QtBot) -> Iterator[Link]:
    made = Link(desk_backend.data_dir, restart_after_s=None)
    task = qloop.create_task(made.start())
    qtbot.waitUntil(lambda: made.current == "connected" or task.done(), timeout=WAIT_MS)
    assert made.current == "connected", task.exception() if task.done() else "not connected"
    yield made
    _run(qtbot, made.close())


@pytest.fixture
def dialog(link: Link, desk_backend: Backend, qtbot: QtBot) -> Iterator[SettingsDialog]:
    d = SettingsDialog(link, desk_backend.data_dir)
    qtbot.addWidget(d)
    d.resize(900, 640)
    d.show()
    d.show_tab("MCP servers")
    _idle(qtbot, d)
    assert d.config is not None
    yield d
    _idle(qtbot, d)  # nothing in flight when the link closes


def _idle(qtbot: QtBot, d: SettingsDialog) -> None:
    qtbot.waitUntil(lambda: not d.busy, timeout=WAIT_MS)


def _configure(qtbot: QtBot, link: Link, servers: dict[str, Any]) -> ConfigView:
    """Servers configured by a call of the test's own (another client, as far as the page knows)."""
    result = _run(qtbot, link.call(ConfigSet(patch={"mcp": {"servers": servers}})))
    assert isinstance(result, ConfigView)
    return result


def _toml(backend: Backend) -> dict[str, Any]:
    return tomllib.loads((backend.data_dir / "config.toml").read_text())


def _servers(backend: Backend) -> dict[str, Any]:
    return dict(_toml(backend).get("mcp", {}).get("servers", {}))


def _row(page: McpPage, name: str) -> list[str]:
    """The list's row for `name`: its cells as shown."""
    for i in range(page.table.topLevelItemCount()):
        item = page.table.topLevelItem(i)
        assert item is not None
        if item.data(0, Qt.ItemDataRole.UserRole) == name:
            return [item.text(c) for c in range(3)]
    raise AssertionError(f"no row for {name!r}")


def _tools(page: McpPage) -> dict[str, list[str]]:
    out = {}
    for i in range(page.tools_tree.topLevelItemCount()):
        item = page.tools_tree.topLevelItem(i)
        assert item is not None
        out[item.text(0)] = [item.text(1), item.text(2)]
    return out


def _state(page: McpPage, name: str) -> str:
    status = page.statuses.get(name)
    return status.state if status is not None else ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# --- tests -------------------------------------------------------------------------------


def test_with_no_servers_the_page_says_what_they_are(dialog: SettingsDialog) -> None:
    page = dialog.mcp_page
    assert page.names() == []
    assert page.empty_label.isVisible()
    assert "Add…" in page.empty_label.text()
    assert not page.remove_button.isEnabled()
    assert page.add_button.isEnabled()
    assert not page.status_label.isVisible(), page.status_label.text()  # mcp.list answered


def test_adding_a_stdio_server_shows_it_starting_then_ready_and_test_lists_its_tools(
    dialog: SettingsDialog, desk_backend: Backend, qtbot: QtBot,
) -> None:
    page = dialog.mcp_page
    page.add_button.click()
    assert page.adding()
    assert page.name_edit.hasFocus()
    QTest.keyClicks(page.name_edit, "time")
    page.command_edit.setText(shlex.join(TIME))
    assert page.key_hint.text().startswith("A key is stored in the system keyring as “mcp-time”")
    updates: list[p.McpServerStatus] = []
    page.updated.connect(updates.append)
    with qtbot.waitSignals([page.saved, page.tested], timeout=WAIT_MS):
        page.save_button.click()  # saved, then tested at once
    _idle(qtbot, dialog)
    assert not page.adding()
    assert page.current == "time"
    assert _servers(desk_backend) == {"time": {"command": TIME}}, "only what the form said"
    assert page.save_label.text() == "Added “time”."
    assert page.what_label.text() == f"Runs: {shlex.join(TIME)}"
    assert page.test_label.text().startswith("OK: “time” started and listed 2 tools in ")

    # Live: the backend said where it went with mcp.server events; the badge follows.
    assert "ready" in [u.state for u in updates if u.name == "time"]
    qtbot.waitUntil(lambda: page.badge.state == "ready", timeout=WAIT_MS)
    assert _row(page, "time") == ["time", "Ready", "2 tools"]
    assert page.badge.text() == "● Ready"
    assert not page.error_label.isVisible()
    assert page.enabled_check.isChecked()

    with qtbot.waitSignal(page.tested, timeout=WAIT_MS) as blocker:
        page.test_button.click()
    _idle(qtbot, dialog)
    result = blocker.args[0]
    assert isinstance(result, p.McpTestResult)
    assert result.ok, result.error
    assert page.test_label.text() == (f"OK: “time” started and listed 2 tools in "
                                      f"{result.latency_ms} ms.")
    assert page.test_label.property("tone") == "success"
    tools = _tools(page)
    assert set(tools) == TIME_TOOLS
    assert tools["get_current_time"][0] == "asks"  # approval "ask", the default
    assert "time" in tools["get_current_time"][1].lower()  # the server's own description
    assert _row(page, "time")[2] == "2 tools"
    assert page.tools_tree.isVisible()
    assert page.badge.state == "ready"


def test_a_server_that_fails_shows_why_and_is_removed_after_a_confirmation(
    dialog: SettingsDialog, link: Link, desk_backend: Backend, qtbot: QtBot,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    page = dialog.mcp_page
    _configure(qtbot, link, {"vault": {"command": BROKEN}})
    dialog.reload(refill=False)  # the config from another client: shown when reloaded
    _idle(qtbot, dialog)
    page.select("vault")
    assert _row(page, "vault") == ["vault", "Not running", "—"]  # it starts on need
    assert "Test starts it now" in page.tools_empty.text()

    with qtbot.waitSignal(page.tested, timeout=WAIT_MS) as blocker:
        page.test_button.click()
    _idle(qtbot, dialog)
    result = blocker.args[0]
    assert isinstance(result, p.McpTestResult)
    assert not result.ok
    assert page.test_label.text().startswith("Failed: “vault”: ")
    assert "cannot open the vault" in page.test_label.text()  # its last words on stderr
    assert page.test_label.property("tone") == "danger"
    qtbot.waitUntil(lambda: _state(page, "vault") == "failed", timeout=WAIT_MS)
    assert _row(page, "vault")[1] == "Failed"
    assert page.badge.text() == "● Failed"
    assert page.error_label.isVisible()
    assert "cannot open the vault" in page.error_label.text()
    assert page.error_label.property("tone") == "danger"
    assert "did not start" in page.tools_empty.text()

    asked: list[str] = []

    def say_no(question: str, _detail: str) -> bool:
        asked.append(question)
        return False

    monkeypatch.setattr(dialog, "_confirm", say_no)
    page.remove_button.click()
    assert asked == ["Remove the MCP server “vault”?"]
    _idle(qtbot, dialog)
    assert "vault" in _servers(desk_backend), "not removed without a yes"

    monkeypatch.setattr(dialog, "_confirm", lambda *_a: True)
    page.table.setFocus()
    with qtbot.waitSignal(page.saved, timeout=WAIT_MS):
        QTest.keyClick(page.table, Qt.Key.Key_Delete)  # the keyboard way
    _idle(qtbot, dialog)
    assert _servers(desk_backend) == {}
    assert page.names() == []
    assert page.empty_label.isVisible()


def test_disabling_stops_a_server_and_enabling_starts_it_again(
    dialog: SettingsDialog, link: Link, desk_backend: Backend, qtbot: QtBot,
) -> None:
    page = dialog.mcp_page
    _configure(qtbot, link, {"time": {"command": TIME}})
    dialog.reload(refill=False)
    _idle(qtbot, dialog)
    page.select("time")
    with qtbot.waitSignal(page.tested, timeout=WAIT_MS):
        page.test_button.click()
    _idle(qtbot, dialog)
    qtbot.waitUntil(lambda: page.badge.state == "ready", timeout=WAIT_MS)

    with qtbot.waitSignal(page.saved, timeout=WAIT_MS):
        page.enabled_check.click()
    _idle(qtbot, dialog)
    assert _servers(desk_backend)["time"]["enabled"] is False
    qtbot.waitUntil(lambda: page.badge.state == "disabled", timeout=WAIT_MS)
    assert _row(page, "time")[1] == "Disabled"
    assert not page.enabled_check.isChecked()

    with qtbot.waitSignal(page.saved, timeout=WAIT_MS):
        page.enabled_check.click()
    _idle(qtbot, dialog)
    assert _servers(desk_backend)["time"].get("enabled", True) is True
    qtbot.waitUntil(lambda: page.badge.state == "stopped", timeout=WAIT_MS)  # until needed
    assert page.badge.text() == "● Not running"
    assert page.enabled_check.isChecked()

    with qtbot.waitSignal(page.saved, timeout=WAIT_MS):
        page.set_approval("time", "trusted")
    _idle(qtbot, dialog)
    assert _servers(desk_backend)["time"]["approval"] == "trusted"
    assert page.approval_combo.currentData() == "trusted"


def test_an_http_server_keeps_its_key_in_the_keyring_and_shows_why_it_fails(
    dialog: SettingsDialog, desk_backend: Backend, qtbot: QtBot,
) -> None:
    page = dialog.mcp_page
    url = f"http://127.0.0.1:{_free_port()}/mcp"  # nothing listens there
    page.start_add()
    page.name_edit.setText("web")
    page.kind_combo.setCurrentIndex(page.kind_combo.findData("http"))
    assert not page.command_edit.isVisibleTo(page)
    assert page.url_edit.isVisibleTo(page)
    label = page.form.labelForField(page.key_to_edit)
    assert isinstance(label, QLabel)
    assert label.text() == "Header"
    page.url_edit.setText(url)
    page.key_to_edit.setText("Authorization")
    page.key_edit.setText(KEY)
    page.new_approval_combo.setCurrentIndex(page.new_approval_combo.findData("trusted"))
    with qtbot.waitSignals([page.saved, page.tested], timeout=WAIT_MS):
        page.key_edit.returnPressed.emit()  # Enter in the form adds (and tests)
    _idle(qtbot, dialog)
    assert _servers(desk_backend) == {"web": {"url": url, "approval": "trusted",
                                              "header_secrets": {"Authorization": "mcp-web"}}}
    secrets = json.loads((desk_backend.data_dir / "secrets.json").read_text())
    assert secrets["mcp-web"] == KEY.strip()
    assert KEY not in (desk_backend.data_dir / "config.toml").read_text()
    assert page.key_edit.text() == "", "the key leaves the form once stored"

    qtbot.waitUntil(lambda: _state(page, "web") == "failed", timeout=WAIT_MS)
    assert page.current == "web"
    assert page.test_label.text().startswith("Failed: “web”: ")
    assert page.what_label.text() == f"URL: {url}"
    assert page.error_label.isVisible()
    assert page.error_label.text()
    assert page.approval_combo.currentData() == "trusted"


@pytest.fixture
def http_server() -> Iterator[str]:
    """The project's fake MCP server over streamable HTTP, answering only with the token."""
    port = _free_port()
    env = {**os.environ, "FAKE_MCP_HTTP_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.mcp_server", "--http", str(port)],
                            env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:  # until it listens
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else "it exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the fake MCP server did not listen"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()  # (uvicorn waits for the backend's open stream on a SIGTERM)
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


def _web_server(qtbot: QtBot, dialog: SettingsDialog, link: Link, url: str) -> McpPage:
    """`web` at `url`, its Authorization header from the secret `mcp-web` (not stored yet),
    configured by another client and shown on the page."""
    page = dialog.mcp_page
    _configure(qtbot, link, {"web": {"url": url, "header_secrets": {"Authorization": "mcp-web"}}})
    dialog.reload(refill=False)
    _idle(qtbot, dialog)
    page.select("web")
    return page


def _store_key_and_test(qtbot: QtBot, dialog: SettingsDialog, page: McpPage,
                        backend: Backend) -> None:
    edit, button = page.key_rows["mcp-web"]
    edit.setText(f"Bearer {TOKEN}")
    with qtbot.waitSignal(page.tested, timeout=WAIT_MS) as blocker:
        button.click()  # stored, then tested with it
    _idle(qtbot, dialog)
    result = blocker.args[0]
    assert result.ok, result.error
    assert edit.text() == ""
    assert page.key_label.text().startswith("Key stored in a file as “mcp-web”.")  # no keyring
    secrets = json.loads((backend.data_dir / "secrets.json").read_text())
    assert secrets["mcp-web"] == f"Bearer {TOKEN}"
    assert TOKEN not in (backend.data_dir / "config.toml").read_text()
    qtbot.waitUntil(lambda: page.badge.state == "ready", timeout=WAIT_MS)
    assert {"echo", "add"} <= set(_tools(page))
    assert _row(page, "web")[1] == "Ready"


def test_a_servers_key_is_stored_from_its_page_and_tested_with_it(
    dialog: SettingsDialog, link: Link, desk_backend: Backend, qtbot: QtBot, http_server: str,
) -> None:
    page = _web_server(qtbot, dialog, link, http_server)
    assert list(page.key_rows) == ["mcp-web"]
    edit, _button = page.key_rows["mcp-web"]
    assert edit.isVisible()
    assert edit.accessibleName() == "Key for the header Authorization"
    assert "mcp-web" in edit.placeholderText()
    _store_key_and_test(qtbot, dialog, page, desk_backend)


def test_a_key_stored_after_a_failed_test_makes_the_next_test_pass(
    dialog: SettingsDialog, link: Link, desk_backend: Backend, qtbot: QtBot, http_server: str,
) -> None:
    page = _web_server(qtbot, dialog, link, http_server)
    with qtbot.waitSignal(page.tested, timeout=WAIT_MS) as blocker:
        page.test_button.click()
    _idle(qtbot, dialog)
    assert not blocker.args[0].ok
    assert "not stored" in page.test_label.text()  # the words name the secret to store
    assert "mcp-web" in page.test_label.text()
    _store_key_and_test(qtbot, dialog, page, desk_backend)


def test_the_add_form_says_what_is_wrong_before_and_after_asking_the_backend(
    dialog: SettingsDialog, desk_backend: Backend, qtbot: QtBot,
) -> None:
    page = dialog.mcp_page
    page.start_add()
    page.add_server()
    assert page.form_error.text() == "Name: give the server a name."
    assert page.name_edit.property("problem") is True

    page.name_edit.setText("quotes")
    page.command_edit.setText("python -c 'print(1)")
    page.add_server()
    assert page.form_error.text() == "Command: No closing quotation (check the quotes)."
    assert page.command_edit.property("problem") is True
    assert page.name_edit.property("problem") is False

    page.command_edit.setText(shlex.join(TIME))
    page.key_edit.setText("secret-without-a-variable")
    page.add_server()
    assert page.form_error.text().startswith("Variable: name the variable the key goes into")
    page.key_edit.clear()

    page.name_edit.setText("my_server")  # '_' would break mcp__SERVER__TOOL: the backend says no
    with qtbot.waitSignal(page.failed, timeout=WAIT_MS) as blocker:
        page.add_server()
    _idle(qtbot, dialog)
    words = blocker.args[0]
    assert words.startswith("Server “my_server”: a server's name is 1 to 32 letters"), words
    assert page.form_error.text() == words
    assert page.adding(), "the form stays, to fix"
    assert _servers(desk_backend) == {}

    page.cancel_add()
    assert not page.adding()
    assert page.empty_label.isVisible()


def test_the_add_form_can_be_tested_before_it_is_saved(
    dialog: SettingsDialog, desk_backend: Backend, qtbot: QtBot,
) -> None:
    page = dialog.mcp_page
    page.start_add()
    page.name_edit.setText("clock")
    page.command_edit.setText(shlex.join(TIME))
    with qtbot.waitSignal(page.tested, timeout=WAIT_MS) as blocker:
        page.form_test_button.click()
    _idle(qtbot, dialog)
    result = blocker.args[0]
    assert isinstance(result, p.McpTestResult)
    assert result.ok, result.error
    assert page.form_result.text().startswith("OK: “clock” started and listed 2 tools in ")
    assert "get_current_time" in page.form_result.text()
    assert page.adding()
    assert _servers(desk_backend) == {}, "a test saves nothing"
    assert page.names() == []


def test_every_control_of_the_mcp_page_has_a_name(
    dialog: SettingsDialog, link: Link, qtbot: QtBot,
) -> None:
    page = dialog.mcp_page
    _configure(qtbot, link, {"time": {"command": TIME}})
    dialog.reload(refill=False)
    _idle(qtbot, dialog)
    page.select("time")
    with qtbot.waitSignal(page.tested, timeout=WAIT_MS):
        page.test_selected()
    _idle(qtbot, dialog)
    assert page.tools_tree.isVisible()
    missing = unnamed(dialog)
    page.start_add()
    for kind in ("stdio", "http"):
        page.kind_combo.setCurrentIndex(page.kind_combo.findData(kind))
        missing += unnamed(dialog)
    assert not missing, "unnamed controls:\n  " + "\n  ".join(missing)


def _tab_walk(qtbot: QtBot, start: QWidget) -> list[QWidget]:
    """The widgets Tab visits from `start` until it comes back (or 40 presses)."""
    start.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is start, timeout=5_000)
    walk: list[QWidget] = []
    for _ in range(40):
        now = QApplication.focusWidget()
        assert now is not None, "the focus was lost"
        QTest.keyClick(now, Qt.Key.Key_Tab)
        now = QApplication.focusWidget()
        if now is start:
            break
        assert now is not None
        assert now.isVisible(), f"{now!r} took the focus while hidden"
        walk.append(now)
    return walk


def test_the_page_works_from_the_keyboard(
    dialog: SettingsDialog, link: Link, qtbot: QtBot,
) -> None:
    page = dialog.mcp_page
    _configure(qtbot, link, {"time": {"command": TIME}})
    dialog.reload(refill=False)
    _idle(qtbot, dialog)
    dialog.raise_()
    dialog.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog, timeout=5_000)
    page.table.setFocus()
    QTest.keyClick(page.table, Qt.Key.Key_Down)
    assert page.current == "time"
    walk = _tab_walk(qtbot, page.table)
    wanted = [page.add_button, page.remove_button, page.enabled_check, page.approval_combo,
              page.test_button]
    assert [w for w in walk if w in wanted] == wanted, "in the order a reader sees them"

    QTest.keyClick(page.table, Qt.Key.Key_A, Qt.KeyboardModifier.AltModifier)  # &Add…
    qtbot.waitUntil(page.adding, timeout=5_000)  # (a mnemonic clicks as an animated click)
    assert page.name_edit.hasFocus()
    walk = _tab_walk(qtbot, page.name_edit)
    wanted = [page.kind_combo, page.command_edit, page.key_to_edit, page.key_edit,
              page.new_approval_combo, page.form_test_button, page.cancel_button,
              page.save_button]
    assert [w for w in walk if w in wanted] == wanted
    assert page.url_edit not in walk, "hidden for a program"


def test_the_settings_dialog_of_the_app_follows_mcp_server_events(
    make_controller: Any, qtbot: QtBot,
) -> None:
    """In the app (one link for every window), the page hears the session-less events."""
    controller = make_controller()
    controller.open_settings()
    d = controller.settings
    assert isinstance(d, SettingsDialog)
    _idle(qtbot, d)
    page = d.mcp_page
    updates: list[p.McpServerStatus] = []
    page.updated.connect(updates.append)
    listed: list[object] = []
    page.listed.connect(listed.append)
    # Another client adds and starts a server; the page hears of it only through the events.
    _run(qtbot, controller.link.call(ConfigSet(patch={"mcp": {"servers": {"time": {"command": TIME}}}})))
    result = _run(qtbot, controller.link.call(McpTest(name="time")))
    assert result.ok, result.error
    qtbot.waitUntil(lambda: any(u.name == "time" and u.state == "ready" for u in updates),
                    timeout=WAIT_MS)
    _idle(qtbot, d)  # the config, fetched for a server it did not know
    assert _row(page, "time") == ["time", "Ready", "2 tools"]
    assert listed == [], "updated in place, not listed again"
    page.select("time")
    assert page.badge.state == "ready"
    assert set(_tools(page)) == TIME_TOOLS
    config = _run(qtbot, controller.link.call(ConfigGet()))
    assert set(config.mcp.servers) == {"time"}


def test_an_mcp_tool_call_in_a_conversation_is_named_by_its_tool_and_server(
    make_controller: Any, qtbot: QtBot, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    """The approval card and the tool card of a real MCP call: the tool's own name, and
    "time · MCP", never the raw mcp__time__get_current_time."""
    from PySide6.QtGui import QTextDocumentFragment

    from desktop.state.transcript import AssistantItem

    from .test_session_window import open_window, texts, turn_done, type_and_send

    controller = make_controller()
    _run(qtbot, controller.link.call(ConfigSet(patch={"mcp": {"servers": {"time": {"command": TIME}}}})))
    fake_provider.script(
        Reply.calls({"name": "mcp__time__get_current_time", "arguments": {"timezone": "UTC"}}),
        Reply(deltas=["It is past noon."]),
    )
    created = _run(qtbot, controller.link.call(SessionCreate(cwd=str(tmp_path))))
    win = open_window(qtbot, controller, created.session.session_id)
    type_and_send(qtbot, win, "what time is it?")
    qtbot.waitUntil(lambda: len(win.conversation.cards) == 1, timeout=WAIT_MS)
    card = next(iter(win.conversation.cards.values()))
    assert card.accessibleName() == "Approval for get_current_time (time · MCP)"
    titles = [label.text() for label in card.findChildren(QLabel) if "needs your approval" in label.text()]
    assert len(titles) == 1
    assert titles[0].startswith("<b>get_current_time</b> <small ")
    assert "time · MCP</small> needs your approval" in titles[0]
    card.buttons["once"].click()
    qtbot.waitUntil(lambda: turn_done(win, 1), timeout=WAIT_MS)
    assert texts(win, AssistantItem)[-1] == "It is past noon."
    tools = [it for it in win.conversation.state.transcript.items if isinstance(it, ToolItem)]
    assert [(t.name, t.status) for t in tools] == [("mcp__time__get_current_time", "ok")]
    words = QTextDocumentFragment.fromHtml(tool_html(tools[0], False)).toPlainText()
    assert words.startswith("▸ get_current_time time · MCP "), words
    assert "mcp__" not in words


# --- without a backend --------------------------------------------------------------------


def test_mcp_model_names_split_into_server_and_tool() -> None:
    assert split_model_name("mcp__time__get_current_time") == ("time", "get_current_time")
    assert split_model_name("mcp__git-hub__a__b") == ("git-hub", "a__b")  # the tool may hold __
    assert split_model_name("terminal") is None
    assert split_model_name("mcp__bad_name__tool") is None  # '_' is no server name's
    assert split_model_name("mcp__time__") is None
    assert shown_name("mcp__time__convert_time") == ("convert_time", "time · MCP")
    assert shown_name("read_file") == ("read_file", "")


def test_a_tool_card_shows_an_mcp_tools_own_name_and_its_server() -> None:
    item = ToolItem("call:c1", "turn1", call_id="c1", name="mcp__time__get_current_time",
                    summary="UTC", status="done")
    html = tool_html(item, dark=False)
    assert "<b>get_current_time</b>" in html
    assert "time · MCP" in html
    assert "mcp__" not in html
    assert plain_text(item).startswith("get_current_time (time · MCP): UTC")
    asked = ToolItem("call:c3", "turn1", call_id="c3", name="mcp__time__get_current_time",
                     summary='time · get_current_time {"timezone": "UTC"}', status="waiting_approval")
    assert '<code>{"timezone": "UTC"}</code>' in tool_html(asked, dark=False), "said once"
    builtin = ToolItem("call:c2", "turn1", call_id="c2", name="terminal", summary="ls")
    assert "<b>terminal</b> <code>" in tool_html(builtin, dark=False)


def test_the_form_becomes_a_server_table() -> None:
    assert new_server_table("stdio", "uvx 'mcp server' --x", "", False, "ask", "mcp-a") == {
        "command": ["uvx", "mcp server", "--x"]}
    assert new_server_table("http", " https://h/mcp ", "Authorization", True, "trusted",
                            "mcp-h") == {"url": "https://h/mcp", "approval": "trusted",
                                         "header_secrets": {"Authorization": "mcp-h"}}
    assert new_server_table("stdio", "npx srv", "TOKEN", True, "ask", "mcp-s") == {
        "command": ["npx", "srv"], "env_secrets": {"TOKEN": "mcp-s"}}
    assert new_server_table("http", "", "", False, "ask", "x") == \
        "URL: give the server's address (https://…)."
    assert new_server_table("stdio", "   ", "", False, "ask", "x") == \
        "Command: give the program to run, and its arguments."
    assert str(new_server_table("http", "https://h", "Authorization", False, "ask", "x")) \
        .startswith("Key: paste the key for Authorization")


def test_one_tool_can_be_trusted_or_hidden_from_its_row(
    dialog: SettingsDialog, desk_backend: Backend, qtbot: QtBot,
) -> None:
    page = dialog.mcp_page
    page.add_button.click()
    QTest.keyClicks(page.name_edit, "time")
    page.command_edit.setText(shlex.join(TIME))
    with qtbot.waitSignals([page.saved, page.tested], timeout=WAIT_MS):
        page.save_button.click()
    _idle(qtbot, dialog)
    assert _tools(page)["get_current_time"][0] == "asks"

    # Right-click (or the menu key on) a tool's row: its choices.
    shown: list[tuple[str, bool]] = []

    def read_and_close() -> None:
        menu = QApplication.activePopupWidget()
        assert isinstance(menu, QMenu)
        shown.extend((a.text(), a.isChecked()) for a in menu.actions() if a.text())
        menu.close()

    (item,) = page.tools_tree.findItems("get_current_time", Qt.MatchFlag.MatchExactly, 0)
    at = page.tools_tree.visualItemRect(item).center()
    QTimer.singleShot(300, read_and_close)
    page._tool_menu(at)
    assert shown == [("Ask before each call", False), ("Run without asking (trusted)", False),
                     ("As the server says (ask)", True), ("Hide it from the model", False)]

    with qtbot.waitSignals([page.saved, page.updated], timeout=WAIT_MS):
        page.set_tool("time", "get_current_time", {"approval": "trusted"})
    _idle(qtbot, dialog)
    assert _servers(desk_backend)["time"]["tools"] == {"get_current_time": {"approval": "trusted"}}
    assert page.save_label.text() == "“get_current_time” runs without asking."
    with qtbot.waitSignal(page.tested, timeout=WAIT_MS):
        page.test_button.click()
    _idle(qtbot, dialog)
    tools = _tools(page)
    assert tools["get_current_time"][0] == "trusted (this tool)"
    assert tools["convert_time"][0] == "asks", "the others follow the server"

    with qtbot.waitSignal(page.saved, timeout=WAIT_MS):
        page.set_tool("time", "convert_time", {"enabled": False})
    _idle(qtbot, dialog)
    with qtbot.waitSignal(page.tested, timeout=WAIT_MS):
        page.test_button.click()
    _idle(qtbot, dialog)
    assert _tools(page)["convert_time"][0] == "hidden"
    assert _row(page, "time")[2] == "1 tool (1 hidden)"

    with qtbot.waitSignal(page.saved, timeout=WAIT_MS):
        page.set_tool("time", "get_current_time", {"approval": None})
    _idle(qtbot, dialog)
    assert _servers(desk_backend)["time"]["tools"] == {"get_current_time": {},
                                                       "convert_time": {"enabled": False}}
