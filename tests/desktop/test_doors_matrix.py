"""A Matrix door against a real homeserver (tests/matrix_server.py: Synapse on 127.0.0.1) and a
real backend: once its token is stored the door connects and the sidebar says so; a message
from an allowed user in a room binds a new session to that room, and the app marks that
session in the list, in its conversation's header, in the door's card and in Settings →
Messaging, where the room opens its session.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from desktop.qt.doors import DoorWatch
from desktop.qt.sidebar_model import DOORS, SESSION_ID
from shared.methods import SecretSet
from tests.desktop.conftest import drive
from tests.desktop.test_accessibility import unnamed
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.backend_proc import Backend
from tests.matrix_server import MatrixAccount, MatrixServer

WAIT_MS = 60_000
ROOM = "Ops: <i>nightly</i> builds"  # a room's name is its members' words, markup or not


@pytest.fixture(scope="module")
def synapse() -> Iterator[MatrixServer]:
    with MatrixServer() as server:
        yield server


@pytest.fixture
def agent(synapse: MatrixServer) -> MatrixAccount:
    return synapse.register("agent")


@pytest.fixture
def person(synapse: MatrixServer) -> Iterator[MatrixAccount]:
    yield synapse.register("me")
    synapse.close_clients()


@pytest.fixture
def desk_backend(tmp_path: Path, fake_provider: FakeOpenAI, synapse: MatrixServer,
                 agent: MatrixAccount, person: MatrixAccount) -> Iterator[Backend]:
    """The desk fixtures' real backend with a Matrix door for `agent`, `person` allowed (its
    token not stored yet: the test stores it)."""
    door = (f'[doors.matrix]\nhomeserver = "{synapse.url}"\nuser_id = "{agent.user_id}"\n'
            f'allowed_users = ["{person.user_id}"]\nedit_interval_s = 0.2\n')
    backend = Backend(tmp_path / "data", fake_provider.base_url, extra_config=door,
                      extra_env={"TURNKEY_NO_KEYRING": "1"})
    backend.start()
    yield backend
    backend.close()
    print(backend.stderr_tail())
    errors = backend.logged_errors()
    assert not errors, "the backend logged errors:\n" + "\n".join(errors[:20])


def session_row(controller: Any, session_id: str) -> Any:
    model = controller.main.sidebar.model
    row = model.row_of(session_id)
    return model.index(row, 0) if row is not None else None


def test_a_room_message_binds_a_session_and_the_app_marks_it(
        controller: Any, qtbot: Any, desk_backend: Backend, synapse: MatrixServer,
        agent: MatrixAccount, person: MatrixAccount, fake_provider: FakeOpenAI) -> None:
    controller.main.resize(1100, 760)
    controller.main.show()
    strip = controller.main.sidebar.doors
    qtbot.waitUntil(lambda: bool(strip.rows) and strip.rows[0].property("tone") == "danger",
                    timeout=15_000)
    # Storing the token starts the door again at once (no restart): it connects.
    drive(qtbot, controller.link.call(SecretSet(name="doors.matrix", value=agent.access_token)))
    qtbot.waitUntil(lambda: bool(strip.rows) and strip.rows[0].property("tone") == "success",
                    timeout=WAIT_MS)
    row = strip.rows[0]
    assert row.full_text == f"Matrix · connected as {agent.user_id}"
    assert "Why:" not in row.toolTip()

    # An allowed person's room: the door accepts the invitation; the person asks, and a new
    # session is bound to the room (announced by a door.state event: the app lists nothing).
    talk = synapse.client(person)
    room = talk.create_room(invite=[agent.user_id], name=ROOM)
    qtbot.waitUntil(lambda: agent.user_id in talk.joined_members(room), timeout=WAIT_MS)
    fake_provider.script(Reply(deltas=["The importer parses every date twice."]))
    talk.send_text(room, "Why did the nightly import get slower?")
    watch = DoorWatch.of(controller.link)
    listed: list[str] = []
    controller.link.state.connect(lambda state: listed.append(state))
    qtbot.waitUntil(lambda: bool(watch.doors and watch.doors[0].rooms), timeout=WAIT_MS)
    assert not listed, "the room came with a door.state event, not a reconnection's door.list"
    bound = watch.doors[0].rooms[0]
    assert bound.room_id == room
    sid = bound.session_id
    qtbot.waitUntil(lambda: session_row(controller, sid) is not None, timeout=15_000)
    index = session_row(controller, sid)
    also = f"Also in Matrix: {ROOM} ({room}) via {agent.user_id}"
    shown = html.escape(also, quote=False)  # (Qt would read the room's markup as markup)
    qtbot.waitUntil(lambda: shown in str(session_row(controller, sid).data(
        Qt.ItemDataRole.ToolTipRole)), timeout=15_000)
    index = session_row(controller, sid)
    assert index.data(DOORS)
    assert also in str(index.data(Qt.ItemDataRole.AccessibleTextRole))
    others = [controller.main.sidebar.model.index(r, 0)
              for r in range(controller.main.sidebar.model.rowCount())]
    assert not [i for i in others if i.data(SESSION_ID) not in (None, sid) and i.data(DOORS)]

    # The door's card lists the room; clicking it opens the session, whose header says so.
    qtbot.mouseClick(row, Qt.MouseButton.LeftButton)
    popover = strip.popover
    qtbot.waitUntil(lambda: popover is not None and popover.isVisible())
    buttons = popover.card.room_buttons
    assert [b.text() for b in buttons] == [f"{ROOM}  ({room})"]
    assert not unnamed(popover)
    buttons[0].click()
    qtbot.waitUntil(lambda: controller.main.session_id == sid, timeout=15_000)
    conv = controller.main.current
    qtbot.waitUntil(lambda: html.escape(f"Matrix: {ROOM}", quote=False) in conv.header.text(),
                    timeout=15_000)
    assert shown in conv.header.toolTip()
    assert "<i>" not in conv.header.text()

    # Settings → Messaging: the same room, opening the same session.
    controller.main.clear_session()
    controller.open_settings("Messaging")
    page = controller.settings.messaging_page
    assert controller.settings.tabs.currentWidget() is page
    card = page.cards[0]
    assert card.badge.text() == "● Connected"
    assert not card.detail.isVisible()
    assert [b.text() for b in card.room_buttons] == [f"{ROOM}  ({room})"]
    card.room_buttons[0].click()
    qtbot.waitUntil(lambda: controller.main.session_id == sid, timeout=15_000)
