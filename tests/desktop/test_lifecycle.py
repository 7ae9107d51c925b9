"""Start-up and the composer: the app starts a detached backend when none answers, starts a new
one when it dies, and the keyboard drives sending, queueing, cancelling and interrupting."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from desktop.qt.aio import settle
from desktop.state.transcript import AssistantItem, UserItem
from shared.launcher import alive, spawn
from shared.methods import SessionCreate
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.backend_proc import config_toml

from .conftest import drive


@pytest.fixture
def fresh_dir(tmp_path: Path, fake_provider: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A data folder with a config and no backend; whatever backend the app starts is stopped after."""
    data = tmp_path / "fresh"
    data.mkdir()
    (data / "config.toml").write_text(config_toml(fake_provider.base_url))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("TURNKEY_NO_KEYRING", "1")
    yield data
    try:
        pid = json.loads((data / "backend.json").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return
    if alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)


def backend_pid(data: Path) -> int:
    return int(json.loads((data / "backend.json").read_text())["pid"])


def test_the_app_starts_a_detached_backend_and_replaces_one_that_died(
    qtbot: Any, qloop: Any, fresh_dir: Path, fake_provider: FakeOpenAI
) -> None:
    from desktop.qt.controller import Controller

    ctl = Controller(fresh_dir, restart_after_s=0.5)
    ctl.exit_app = lambda: None  # Quit ends the test's app, not pytest-qt's QApplication
    try:
        ctl.start(restore=False)
        qtbot.waitUntil(lambda: ctl.link.current == "connected", timeout=30_000)
        first = backend_pid(fresh_dir)
        assert os.getsid(first) == first  # its own session: closing the app never takes it down
        os.kill(first, signal.SIGKILL)
        qtbot.waitUntil(lambda: ctl.link.current in ("reconnecting", "starting"), timeout=10_000)
        qtbot.waitUntil(lambda: ctl.link.current == "connected", timeout=30_000)
        second = backend_pid(fresh_dir)
        assert second != first
        assert alive(second)
        # And it works: a turn through the replacement.
        fake_provider.script(Reply(deltas=["back"]))
        sid = drive(qtbot, ctl.link.call(SessionCreate())).session.session_id
        win = ctl.open_session(sid)
        qtbot.waitUntil(lambda: win.conversation.state.loaded, timeout=10_000)
        win.conversation.composer.setPlainText("hello?")
        win.conversation.send()
        qtbot.waitUntil(lambda: [it.text for it in win.conversation.state.transcript.items
                                 if isinstance(it, AssistantItem)] == ["back"], timeout=15_000)
    finally:
        ctl.quit()
        qtbot.waitUntil(lambda: ctl.link.client.state == "closed", timeout=10_000)
    assert alive(backend_pid(fresh_dir))  # quitting the app leaves the backend running


def test_the_link_waits_for_the_backend_the_launch_started_before_qt(
    qtbot: Any, qloop: Any, fresh_dir: Path
) -> None:
    """desktop/app.py starts the backend before loading Qt; the link then waits for that
    process's READY line (its stdout read and closed) and connects to it, starting no other."""
    from desktop.link import Link

    proc = spawn(fresh_dir)
    link = Link(fresh_dir, restart_after_s=None)
    link.spawned = proc
    states: list[str] = []
    link.state.connect(states.append)
    try:
        drive(qtbot, link.start())
        assert link.current == "connected"
        assert proc.stdout is not None
        assert proc.stdout.closed, "its READY line was read"
        assert backend_pid(fresh_dir) == proc.pid
        assert link.spawned is None
        assert states == ["starting", "connected"]
    finally:
        drive(qtbot, link.close())


def test_enter_sends_shift_enter_breaks_the_line_and_esc_interrupts(
    qtbot: Any, controller: Any, fake_provider: FakeOpenAI
) -> None:
    release = __import__("threading").Event()
    fake_provider.script(Reply(deltas=["thinking", " more"], hang_after=1, release=release),
                         Reply(deltas=["second"]))
    sid = drive(qtbot, controller.link.call(SessionCreate())).session.session_id
    win = controller.open_session(sid)
    qtbot.waitUntil(lambda: win.conversation.state.loaded, timeout=10_000)
    win.conversation.composer.setFocus()
    qtbot.keyClicks(win.conversation.composer, "line one")
    qtbot.keyClick(win.conversation.composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(win.conversation.composer, "line two")
    assert win.conversation.composer.toPlainText() == "line one\nline two"
    qtbot.keyClick(win.conversation.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: win.conversation.state.status == "running", timeout=10_000)
    assert win.conversation.composer.toPlainText() == ""
    # Sent while busy: queued, shown, and cancellable.
    qtbot.keyClicks(win.conversation.composer, "never mind")
    qtbot.keyClick(win.conversation.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(win.conversation.queue_rows) == 1, timeout=10_000)
    row = next(iter(win.conversation.queue_rows.values()))
    row.cancel.click()
    try:
        qtbot.waitUntil(lambda: not win.conversation.queue_rows and not win.conversation.state.queue,
                        timeout=10_000)
    except Exception as exc:  # (failed twice in fresh-ci, never here: say what the window held)
        conv = win.conversation
        raise AssertionError(
            f"the cancelled prompt stayed queued: rows {list(conv.queue_rows)}, state queue "
            f"{list(conv.state.queue)}, gone {sorted(conv.state.gone)}, status {conv.state.status}, "
            f"mark {conv.state.mark}, link {controller.link.current}, banner "
            f"{conv.banner.text()!r} (shown: {conv.banner.isVisible()})") from exc
    # Esc stops the running turn.
    qtbot.keyClick(win.conversation.composer, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: win.conversation.state.status == "idle", timeout=15_000)
    release.set()
    users = [it.text for it in win.conversation.state.transcript.items if isinstance(it, UserItem)]
    assert users == ["line one\nline two"]  # the cancelled prompt never ran
    drive(qtbot, settle())
