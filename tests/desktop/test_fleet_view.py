"""The Backends view against real backends: this computer's alone (SQLite) with the session its
running turn holds, refreshed while shown and quiet while hidden; two backends sharing a
PostgreSQL store, one of them killed; and a paired backend whose token lacks `admin`, reached
from its header in the sidebar."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QTreeWidgetItem

from desktop.qt import theme
from desktop.qt.fleet import MARK, FleetDialog
from desktop.state.sidebar import BackendHeader
from shared.methods import PromptSubmit, SessionCreate, TurnInterrupt
from tests.desktop.conftest import drive
from tests.desktop.test_remote_backend import pairing
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.backend_proc import Backend, running
from tests.integration.tls_backend import TlsBackend, outside_address, start_tls_backend
from tests.pg_server import PgServer

WAIT_MS = 30_000
PEERS = 'idle_exit_minutes = 0\n[lease]\nttl_s = 3\nrefresh_s = 1\nheartbeat_s = 0.5\ndead_after_s = 3\n'


def item(view: FleetDialog, row: int) -> QTreeWidgetItem:
    found = view.table.topLevelItem(row)
    assert found is not None
    return found


def rows(view: FleetDialog) -> list[list[str]]:
    return [[item(view, r).text(c) for c in range(view.table.columnCount())]
            for r in range(view.table.topLevelItemCount())]


def wait_rows(qtbot: Any, view: FleetDialog, ok: Any) -> list[list[str]]:
    qtbot.waitUntil(lambda: bool(rows(view)) and ok(rows(view)), timeout=WAIT_MS)
    return rows(view)


def test_this_backend_alone_with_the_session_its_turn_holds(
    controller: Any, qtbot: Any, desk_backend: Backend, fake_provider: FakeOpenAI,
) -> None:
    controller.main.app_actions["backends"].trigger()  # View ▸ Backends on the store…
    view = controller.fleet_views["local"]
    assert isinstance(view, FleetDialog)
    assert view.isVisible()
    assert view.windowTitle() == "Backends — This computer"
    [row] = wait_rows(qtbot, view, lambda _r: True)
    assert row[:4] == [MARK, socket.gethostname(), str(desk_backend.pid), "live"]
    assert row[5:] == ["now", "0"]
    assert view.summary_label.text().startswith("SQLite store: this backend")
    state = item(view, 0)
    assert state.foreground(3).color() == QColor(theme.colors().success)
    assert "answered" in state.toolTip(1)

    release = threading.Event()
    fake_provider.default = Reply(deltas=["working", "never"], hang_after=1, release=release)
    sid = drive(qtbot, controller.link.call(SessionCreate(title="long"))).session.session_id
    drive(qtbot, controller.link.call(PromptSubmit(session_id=sid, request_id="r1", text="go")))
    wait_rows(qtbot, view, lambda r: r[0][6] == "1")  # the timer asked again: its lease
    drive(qtbot, controller.link.call(TurnInterrupt(session_id=sid)))
    release.set()
    wait_rows(qtbot, view, lambda r: r[0][6] == "0")

    view.close()
    assert not view.timer.isActive(), "nothing is asked while the view is hidden"
    assert controller.open_backends() is view, "one view per backend, brought back"
    assert view.timer.isActive()


@pytest.fixture(scope="module")
def pg() -> Iterator[PgServer]:
    with PgServer() as server:
        yield server


@pytest.fixture
def pg_desk(tmp_path: Path, pg: PgServer, fake_provider: FakeOpenAI) -> Iterator[tuple[Backend, Backend]]:
    """Two backends on one fresh PostgreSQL database: the app's (A) and a peer (B)."""
    name = pg.create_database()
    a, b = (Backend(tmp_path / folder, fake_provider.base_url, PEERS, store=pg.dsn(name),
                    extra_env={"TURNKEY_NO_KEYRING": "1"}) for folder in ("data", "peer"))
    try:
        with running(a, b):
            yield a, b
    finally:
        pg.drop_database(name)


def test_two_backends_on_postgresql_and_one_falls_silent(
    qloop: asyncio.AbstractEventLoop, qtbot: Any, pg_desk: tuple[Backend, Backend],
) -> None:
    from desktop.qt.aio import settle
    from desktop.qt.controller import Controller

    a, b = pg_desk
    ctl = Controller(a.data_dir, restart_after_s=None)
    ctl.exit_app = lambda: None
    ctl.start(restore=False)
    try:
        qtbot.waitUntil(lambda: ctl.link.current == "connected", timeout=15_000)
        view = ctl.open_backends()
        both = wait_rows(qtbot, view, lambda r: len(r) == 2)
        assert [(r[0], r[2], r[3]) for r in both] == [(MARK, str(a.pid), "live"),
                                                       ("", str(b.pid), "live")]
        assert view.summary_label.text().startswith("PostgreSQL store: 2 live of 2")
        b.kill9()
        gone = wait_rows(qtbot, view, lambda r: len(r) == 2 and r[1][3] != "live")
        assert gone[1][2] == str(b.pid)
        assert gone[1][3] in ("silent", "dead")
        tone = "warning" if gone[1][3] == "silent" else "danger"
        assert item(view, 1).foreground(3).color() == QColor(getattr(theme.colors(), tone))
        assert "over 3 s" in item(view, 1).toolTip(3) or gone[1][3] == "dead"
        assert view.summary_label.text().startswith("PostgreSQL store: 1 live of 2")
    finally:
        for view in ctl.fleet_views.values():
            view.close()
        ctl.main.close()
        drive(qtbot, settle())
        drive(qtbot, ctl.notifier.stop())
        drive(qtbot, ctl.link.close())


@pytest.fixture
def remote(tmp_path: Path, fake_provider: FakeOpenAI) -> Iterator[TlsBackend]:
    backend = start_tls_backend(tmp_path / "remote", fake_provider.base_url, outside_address())
    yield backend
    backend.close()
    errors = backend.logged_errors()
    assert not errors, "the remote backend logged errors:\n" + "\n".join(errors[:20])


def test_a_headers_menu_opens_its_stores_view_and_a_token_without_admin_is_told(
    controller: Any, remote: TlsBackend, qtbot: Any,
) -> None:
    target = pairing(qtbot, remote, ["read", "submit", "approve"])
    link = drive(qtbot, controller.add_remote(target, "build-box"))
    qtbot.waitUntil(lambda: link.current == "connected", timeout=15_000)
    sidebar = controller.main.sidebar
    row = sidebar.model.position(BackendHeader(1))
    assert row is not None
    header = sidebar.model.index(row, 0)
    sidebar._context_menu(sidebar.list.visualRect(header).center())
    [entry] = [a for a in sidebar.context_menu.actions() if a.text().startswith("Backends on ")]
    assert entry.text() == f"Backends on build-box ({target.host})'s store…"
    with qtbot.waitSignal(controller.main.requested, timeout=5_000):
        entry.trigger()
    view = controller.fleet_views[link.key]
    assert view.isVisible()
    assert view.windowTitle() == f"Backends — build-box ({target.host})"
    qtbot.waitUntil(lambda: "admin scope" in view.status_label.text(), timeout=WAIT_MS)
    assert "read, submit, approve" in view.status_label.text()
    assert rows(view) == [], "nothing asked, nothing shown"


def test_a_turn_lost_with_its_backend_shows_why_and_the_session_moves_on(
    qloop: asyncio.AbstractEventLoop, qtbot: Any, pg_desk: tuple[Backend, Backend],
    fake_provider: FakeOpenAI,
) -> None:
    """The app (on A) watches a session whose turn runs on B; B is killed: the window shows
    the lost turn, what was streamed marked unknown and the note naming B, without a
    restart, and the next prompt sent in the window runs."""
    from desktop.qt.aio import settle
    from desktop.qt.controller import Controller
    from desktop.state.transcript import AssistantItem, NoteItem
    from tests.integration.wire import Rpc

    a, b = pg_desk
    fake_provider.default = Reply(deltas=["half an ans", "wer"], hang_after=1)
    ctl = Controller(a.data_dir, restart_after_s=None)
    ctl.exit_app = lambda: None
    ctl.start(restore=False)
    try:
        qtbot.waitUntil(lambda: ctl.link.current == "connected", timeout=15_000)
        sid = drive(qtbot, ctl.link.call(SessionCreate(title="on B"))).session.session_id
        win = ctl.open_session(sid)
        qtbot.waitUntil(lambda: win.conversation.state.loaded, timeout=10_000)

        async def submit_on_b() -> None:
            rpc = await Rpc.open(b.port, b.token, name="b")
            await rpc.call("prompt.submit", {"session_id": sid, "request_id": "r1", "text": "go"})
            await rpc.close()

        drive(qtbot, submit_on_b())
        qtbot.waitUntil(lambda: win.conversation.state.status == "running", timeout=WAIT_MS)
        qtbot.waitUntil(lambda: any(  # B's stream, live through A
            isinstance(it, AssistantItem) and it.text == "half an ans"
            for it in win.conversation.state.transcript.items), timeout=WAIT_MS)
        b.kill9()
        qtbot.waitUntil(lambda: any(isinstance(it, NoteItem) and it.kind == "recovered"
                                    for it in win.conversation.state.transcript.items),
                        timeout=WAIT_MS)
        items = win.conversation.state.transcript.items
        [note] = [it for it in items if isinstance(it, NoteItem)]
        assert "This turn was lost" in note.text
        assert f"pid {b.pid}" in note.text
        assert [it.text for it in items if isinstance(it, AssistantItem)] == ["half an ans"]
        assert win.conversation.state.status == "unknown"

        fake_provider.default = Reply(deltas=["moved on"])
        win.conversation.composer.setPlainText("again")
        win.conversation.send()
        qtbot.waitUntil(lambda: _idle_with(win, "moved on"), timeout=WAIT_MS)
        win.close()
    finally:
        ctl.main.close()
        drive(qtbot, settle())
        drive(qtbot, ctl.notifier.stop())
        drive(qtbot, ctl.link.close())


def _idle_with(win: Any, text: str) -> bool:
    from desktop.state.transcript import AssistantItem

    state = win.conversation.state
    return bool(state.status == "idle" and any(
        isinstance(it, AssistantItem) and it.text == text for it in state.transcript.items))
