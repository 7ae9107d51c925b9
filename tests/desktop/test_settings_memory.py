"""Settings → Memory against a real backend process: edit and save, a refused save, live
refresh on `memory.changed` (from another client, and from the agent's own tool in a real
turn), and an external change while the person has unsaved typing, which must not replace it.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before any QApplication exists

import asyncio
from collections.abc import Iterator

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from desktop.link import Link
from desktop.qt.settings import SettingsDialog
from desktop.qt.settings_memory import MemoryPage
from shared import protocol as p
from shared.methods import MemorySet, PromptSubmit, SessionCreate
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.backend_proc import Backend

from .conftest import drive

WAIT_MS = 30_000


@pytest.fixture
def link(desk_backend: Backend, qloop: asyncio.AbstractEventLoop, qtbot: QtBot) -> Iterator[Link]:
    made = Link(desk_backend.data_dir, restart_after_s=None)
    task = qloop.create_task(made.start())
    qtbot.waitUntil(lambda: made.current == "connected" or task.done(), timeout=WAIT_MS)
    assert made.current == "connected", task.exception() if task.done() else "not connected"
    yield made
    drive(qtbot, made.close())


@pytest.fixture
def dialog(link: Link, desk_backend: Backend, qtbot: QtBot) -> Iterator[SettingsDialog]:
    d = SettingsDialog(link, desk_backend.data_dir)
    qtbot.addWidget(d)
    d.resize(900, 640)
    d.show()
    d.show_tab("Memory")
    qtbot.waitUntil(lambda: not d.busy and d.memory_page.boxes["user"].state.limit > 0,
                    timeout=WAIT_MS)
    yield d
    qtbot.waitUntil(lambda: not d.busy, timeout=WAIT_MS)


@pytest.fixture
def page(dialog: SettingsDialog) -> MemoryPage:
    return dialog.memory_page


def _elsewhere(qtbot: QtBot, link: Link, target: p.MemoryTarget, text: str) -> None:
    """A change by a call of the test's own (another client, as far as the page knows)."""
    drive(qtbot, link.call(MemorySet(target=target, text=text)))


def test_edit_and_save(page: MemoryPage, desk_backend: Backend, qtbot: QtBot) -> None:
    box = page.boxes["user"]
    assert box.editor.toPlainText() == ""
    assert box.usage.text() == "0 / 1,400 characters"
    assert not box.save_button.isEnabled()
    box.editor.setFocus()
    QTest.keyClicks(box.editor, "Prefers short answers.")
    assert box.usage.text() == "22 / 1,400 characters"
    assert box.status.text() == "Not saved"
    assert box.save_button.isEnabled()
    with qtbot.waitSignal(page.saved, timeout=WAIT_MS):
        QTest.mouseClick(box.save_button, Qt.MouseButton.LeftButton)
    assert (desk_backend.data_dir / "memory" / "USER.md").read_text() == "Prefers short answers.\n"
    assert box.status.text() == "Saved; the next turn sees it."
    assert not box.save_button.isEnabled()
    assert not box.notice.isVisible(), "our own save's event is not news"

    env = page.boxes["environment"]
    env.editor.setPlainText("Debian 12 laptop.   \n\n")
    assert env.usage.text() == "17 / 2,200 characters"
    with qtbot.waitSignal(page.saved, timeout=WAIT_MS):
        env.save_button.click()
    assert env.editor.toPlainText() == "Debian 12 laptop.", "the backend's cleaned text is shown"
    assert not env.save_button.isEnabled()


def test_a_refused_save_keeps_the_text_and_says_why(page: MemoryPage, desk_backend: Backend,
                                                    qtbot: QtBot) -> None:
    box = page.boxes["environment"]
    box.editor.setPlainText("deploy key: ghp_0123456789abcdefghijABCDEFGHIJ")
    box.save_button.click()
    qtbot.waitUntil(page.error_label.isVisible, timeout=WAIT_MS)
    assert "looks like a GitHub token" in page.error_label.text()
    assert page.error_label.text().startswith("Not saved: ")
    assert box.editor.toPlainText() == "deploy key: ghp_0123456789abcdefghijABCDEFGHIJ"
    assert box.save_button.isEnabled()
    assert not (desk_backend.data_dir / "memory" / "ENVIRONMENT.md").exists()


def test_a_change_elsewhere_shows_at_once_when_nothing_is_typed(
    page: MemoryPage, link: Link, qtbot: QtBot
) -> None:
    box = page.boxes["environment"]
    with qtbot.waitSignal(page.refreshed, timeout=WAIT_MS):
        _elsewhere(qtbot, link, "environment", "Uses fish.")
    assert box.editor.toPlainText() == "Uses fish."
    assert box.usage.text() == "10 / 2,200 characters"
    assert not box.notice.isVisible()
    assert not box.save_button.isEnabled()


def test_a_change_elsewhere_never_replaces_unsaved_typing(
    dialog: SettingsDialog, page: MemoryPage, link: Link, desk_backend: Backend, qtbot: QtBot
) -> None:
    box = page.boxes["user"]
    box.editor.setFocus()
    QTest.keyClicks(box.editor, "Name: Ada, half-typed")
    with qtbot.waitSignal(page.refreshed, timeout=WAIT_MS):
        _elsewhere(qtbot, link, "user", "Likes tea.")
    assert box.editor.toPlainText() == "Name: Ada, half-typed", "the person's typing is kept"
    assert box.notice.isVisible()
    assert "Your text is kept" in box.notice.text()
    # A reload (the dialog shown again, a reconnection) does not replace it either.
    with qtbot.waitSignal(page.loaded, timeout=WAIT_MS):
        dialog.reload()
    assert box.editor.toPlainText() == "Name: Ada, half-typed"
    # Revert shows their change; typing again and saving replaces it.
    box.revert_button.click()
    assert box.editor.toPlainText() == "Likes tea."
    assert not box.notice.isVisible()
    box.editor.setPlainText("Likes tea.\nName: Ada.")
    with qtbot.waitSignal(page.saved, timeout=WAIT_MS):
        box.save_button.click()
    assert (desk_backend.data_dir / "memory" / "USER.md").read_text() == "Likes tea.\nName: Ada.\n"
    assert not box.notice.isVisible()


def test_the_agents_own_write_refreshes_the_page(
    page: MemoryPage, link: Link, fake_provider: FakeOpenAI, qtbot: QtBot
) -> None:
    fake_provider.script(
        Reply.calls({"name": "memory", "arguments": {
            "action": "add", "target": "environment", "text": "The repo uses ruff."}}),
        Reply(deltas=["Noted."]),
    )
    box = page.boxes["environment"]
    with qtbot.waitSignal(page.refreshed, timeout=WAIT_MS):
        session = drive(qtbot, link.call(SessionCreate()))
        drive(qtbot, link.call(PromptSubmit(session_id=session.session.session_id,
                                            request_id="r1", text="remember: ruff")))
    assert box.editor.toPlainText() == "The repo uses ruff."
    assert box.usage.text() == "19 / 2,200 characters"
