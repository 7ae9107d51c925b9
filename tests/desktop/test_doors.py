"""Messaging doors in the app, against a real backend whose `[doors.matrix]` points at a
homeserver on 127.0.0.1: the door's state at the foot of the sidebar (failing: outlined, the
reason on the row, in its tooltip and in the card a click opens), the settings' Messaging
page, the live `door.state` event, and nothing extra at all when no door is configured.

The homeserver is a closed port (nothing answers: "cannot reach"), then a small HTTP server
on that port that refuses every access token the way Synapse does (401 M_UNKNOWN_TOKEN): the
backend's retry reaches it and reports the new reason as a `door.state` event.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLineEdit

from desktop.qt.doors import DoorWatch
from desktop.qt.doors_view import DoorRow
from desktop.state import doors as words
from shared import protocol as p
from shared.methods import SecretSet
from tests.desktop.conftest import drive
from tests.desktop.test_accessibility import unnamed
from tests.desktop.test_remote_backend import pairing
from tests.fakes.openai_server import FakeOpenAI
from tests.integration.backend_proc import Backend, config_toml
from tests.integration.tls_backend import outside_address, start_tls_backend
from tests.pg_server import free_port

WAIT_MS = 60_000  # the door retries at 1, 2, 4, 8 s after a failure
AGENT = "@agent:example.org"
ME = "@me:example.org"
TOKEN = "syt_door-LEAKCHECK-0123456789abcdef"
NO_TOKEN = "turnkey secret set doors.matrix"  # what the backend's reason says to do


def door_toml(port: int) -> str:
    return (f'[doors.matrix]\nhomeserver = "http://127.0.0.1:{port}"\nuser_id = "{AGENT}"\n'
            f'allowed_users = ["{ME}"]\n')


@pytest.fixture
def door_port() -> int:
    return free_port()  # closed: nothing listens there until a test starts a server on it


@pytest.fixture
def with_door() -> bool:
    return True


@pytest.fixture
def desk_backend(tmp_path: Path, fake_provider: FakeOpenAI, door_port: int,
                 with_door: bool) -> Iterator[Backend]:
    """The desk fixtures' real backend, with a Matrix door on `door_port` (or none)."""
    backend = Backend(tmp_path / "data", fake_provider.base_url,
                      extra_config=door_toml(door_port) if with_door else "",
                      extra_env={"TURNKEY_NO_KEYRING": "1"})
    backend.start()
    yield backend
    backend.close()
    print(backend.stderr_tail())
    errors = backend.logged_errors()
    assert not errors, "the backend logged errors:\n" + "\n".join(errors[:20])


class Refusing(BaseHTTPRequestHandler):
    """A homeserver that knows no access token: 401 M_UNKNOWN_TOKEN to every request."""

    def _refuse(self) -> None:
        body = json.dumps({"errcode": "M_UNKNOWN_TOKEN", "error": "Invalid access token"}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = _refuse

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def refusing_server(door_port: int) -> Iterator[Any]:
    """Starts (when called) the refusing homeserver on the door's port."""
    servers: list[ThreadingHTTPServer] = []

    def start() -> None:
        server = ThreadingHTTPServer(("127.0.0.1", door_port), Refusing)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def rows(controller: Any) -> list[DoorRow]:
    return list(controller.main.sidebar.doors.rows)


def row_says(controller: Any, *parts: str) -> bool:
    """The sidebar shows one door row whose tooltip holds every part."""
    shown = rows(controller)
    return len(shown) == 1 and shown[0].isVisible() and all(x in shown[0].toolTip() for x in parts)


# --- no door ------------------------------------------------------------------------------


@pytest.mark.parametrize("with_door", [False])
def test_no_door_configured_the_app_looks_as_before(controller: Any, qtbot: Any) -> None:
    controller.main.resize(1000, 700)
    controller.main.show()
    watch = DoorWatch.of(controller.link)
    qtbot.waitUntil(lambda: watch.loaded, timeout=15_000)
    assert watch.doors == []
    strip = controller.main.sidebar.doors
    assert not strip.isVisible()
    assert strip.rows == []
    controller.open_settings("Messaging")
    page = controller.settings.messaging_page
    assert controller.settings.tabs.currentWidget() is page
    assert page.empty.isVisible()
    assert not page.cards
    assert "Matrix" in page.empty.text()
    assert page.form.isVisible(), "the form to set a first door up"
    assert page.form.homeserver_edit.text() == ""


# --- a failing door -----------------------------------------------------------------------


def test_a_door_without_its_token_shows_failing_with_what_to_do(controller: Any, qtbot: Any,
                                                                door_port: int) -> None:
    controller.main.resize(1000, 700)
    controller.main.show()
    qtbot.waitUntil(lambda: row_says(controller, NO_TOKEN), timeout=15_000)
    row = rows(controller)[0]
    # Failing is said on the row itself (outlined in the danger colour), not only in a tooltip.
    assert row.property("tone") == "danger"
    assert row.full_text.startswith("Matrix · failing: no access token")
    assert "turnkey secret set doors.matrix" in row.toolTip()
    assert row.toolTip().startswith("<p style='white-space:pre-wrap'>")  # shown as it is
    assert row.accessibleName() == "Matrix door: failing"
    # A click opens its card: the whole reason, selectable, and the account and who may use it.
    qtbot.mouseClick(row, Qt.MouseButton.LeftButton)
    popover = controller.main.sidebar.doors.popover
    qtbot.waitUntil(lambda: popover is not None and popover.isVisible())
    card = popover.card
    assert card.badge.text() == "● Failing"
    assert "turnkey secret set doors.matrix" in card.detail.text()
    assert card.detail.isVisible()
    assert card.detail.property("tone") == "danger"
    assert card.account.text() == f"Speaks as {AGENT}"
    assert ME in card.allowed.text()
    assert card.no_rooms.isVisible()
    assert not card.room_buttons
    assert not unnamed(controller.main), "the door's row is named for assistive technology"
    assert not unnamed(popover)
    # …and on to the settings' Messaging page, which says the same.
    popover.settings_button.click()
    qtbot.waitUntil(lambda: controller.settings is not None and controller.settings.isVisible())
    page = controller.settings.messaging_page
    assert controller.settings.tabs.currentWidget() is page
    assert not page.empty.isVisible()
    assert len(page.cards) == 1
    assert NO_TOKEN in page.cards[0].detail.text()
    assert not unnamed(page)
    assert f"127.0.0.1:{door_port}" not in page.cards[0].detail.text()


def test_the_row_follows_the_door_live_and_greys_while_the_backend_is_away(
        controller: Any, qtbot: Any, desk_backend: Backend, door_port: int,
        refusing_server: Any) -> None:
    """The token stored (the backend starts the door again at once): it cannot reach the
    homeserver.  Then a homeserver answers on that port and refuses the token: the backend's
    next try says so.  Both arrive as `door.state` events; the row changes without a reload.
    While the backend is down the row shows the door as last seen; back, it lists it again."""
    controller.main.resize(1000, 700)
    controller.main.show()
    qtbot.waitUntil(lambda: row_says(controller, NO_TOKEN), timeout=15_000)
    lists: list[int] = []
    controller.link.state.connect(lambda s: lists.append(1) if s == "connected" else None)
    events: list[p.DoorStatus] = []
    controller.link.received.connect(
        lambda e: events.append(e.data.door) if e.type == "door.state" else None)
    drive(qtbot, controller.link.call(SecretSet(name="doors.matrix", value=TOKEN)))
    home = f"http://127.0.0.1:{door_port}"
    qtbot.waitUntil(lambda: row_says(controller, f"cannot reach {home}"), timeout=WAIT_MS)
    row = rows(controller)[0]
    assert row.property("tone") == "danger"
    assert row.full_text.startswith(f"Matrix · failing: cannot reach {home}")

    refusing_server()
    qtbot.waitUntil(lambda: row_says(controller, "the access token is not valid"),
                    timeout=WAIT_MS)
    assert not lists, "the row changed on live events, not on a reconnection's reload"
    assert events[-1].state == "failing"
    assert "did not accept the access token" in (events[-1].detail or "")
    watch = DoorWatch.of(controller.link)
    assert watch.doors[0].detail == events[-1].detail

    # While the backend is away the row says it shows the door as last seen, greyed …
    desk_backend.terminate()
    qtbot.waitUntil(lambda: rows(controller)[0].full_text.endswith("(last seen)"), timeout=15_000)
    row = rows(controller)[0]
    assert row.property("tone") == "muted"
    assert words.AWAY in row.toolTip()
    # … and once it is back, the door as the new process lists it.
    desk_backend.start()
    qtbot.waitUntil(lambda: controller.link.current == "connected"
                    and rows(controller)[0].property("tone") == "danger", timeout=WAIT_MS)
    assert not rows(controller)[0].full_text.endswith("(last seen)")
    assert lists, "listed again on the reconnection"
    # The token is the backend's secret: nowhere in what the app shows.
    controller.open_settings("Messaging")
    shown = [row.full_text, row.toolTip(), *(w.text() for w in QApplication.allWidgets()
                                              if hasattr(w, "text") and callable(w.text))]
    assert not [s for s in shown if TOKEN in str(s)]


def test_the_messaging_page_edits_the_door_and_stores_a_new_token(
        controller: Any, qtbot: Any, door_port: int) -> None:
    """Settings → Messaging: a door's card opens the form on its settings (never its token);
    a token pasted there (not echoed) is stored as the door's secret, and the door starts
    again with it at once."""
    controller.main.resize(1000, 700)
    controller.main.show()
    qtbot.waitUntil(lambda: row_says(controller, NO_TOKEN), timeout=15_000)
    controller.open_settings("Messaging")
    page = controller.settings.messaging_page
    qtbot.waitUntil(lambda: len(page.cards) == 1)
    card = page.cards[0]
    assert not page.form.isVisible(), "a listed door's form opens from its card"
    qtbot.waitUntil(lambda: page.doors_config is not None)
    assert card.edit_button.isVisible()
    card.edit_button.click()
    form = page.form
    qtbot.waitUntil(form.isVisible)
    home = f"http://127.0.0.1:{door_port}"
    assert (form.homeserver_edit.text(), form.account_edit.text()) == (home, AGENT)
    assert form.users_edit.toPlainText() == ME
    assert form.token_edit.text() == ""
    assert form.token_edit.echoMode() == QLineEdit.EchoMode.Password
    qtbot.keyClicks(form.token_edit, f"  {TOKEN}")
    with qtbot.waitSignal(form.saved, timeout=WAIT_MS):
        form.save_button.click()
    assert "Saved" in form.result_label.text()
    qtbot.waitUntil(lambda: row_says(controller, f"cannot reach {home}"), timeout=WAIT_MS)
    assert f"cannot reach {home}" in card.detail.text()
    shown = [w.text() for w in QApplication.allWidgets() if hasattr(w, "text") and callable(w.text)]
    assert not [s for s in shown if TOKEN in str(s)]
    # The sidebar's card offers no such button: it leads to this page (for this computer's
    # backend only) instead.
    qtbot.mouseClick(rows(controller)[0], Qt.MouseButton.LeftButton)
    popover = controller.main.sidebar.doors.popover
    qtbot.waitUntil(lambda: popover is not None and popover.isVisible())
    assert not popover.card.edit_button.isVisible()


# --- several backends ----------------------------------------------------------------------


@pytest.mark.parametrize("with_door", [False])
def test_a_remote_backends_door_is_named_by_its_backend(
        controller: Any, qtbot: Any, tmp_path: Path, fake_provider: FakeOpenAI,
        door_port: int) -> None:
    """This computer's backend has no door; a paired one has (failing): one row, named by
    that backend; its card offers no settings page (the dialog is this computer's)."""
    remote = start_tls_backend(tmp_path / "remote", fake_provider.base_url, outside_address())
    try:
        remote.write_config(config_toml(fake_provider.base_url, door_toml(door_port)))
        remote.restart()  # (a door is read at start)
        target = pairing(qtbot, remote, ["read", "submit", "approve"])
        link = drive(qtbot, controller.add_remote(target, "build-box"))
        controller.main.resize(1000, 700)
        controller.main.show()
        qtbot.waitUntil(lambda: row_says(controller, NO_TOKEN), timeout=15_000)
        row = rows(controller)[0]
        assert row.link is link
        assert row.full_text.startswith(f"{link.title}: Matrix · failing")
        assert DoorWatch.of(controller.link).doors == []
        qtbot.mouseClick(row, Qt.MouseButton.LeftButton)
        popover = controller.main.sidebar.doors.popover
        qtbot.waitUntil(lambda: popover is not None and popover.isVisible())
        assert not popover.settings_button.isVisible()
        assert NO_TOKEN in popover.card.detail.text()
        popover.hide()
        drive(qtbot, controller.backends.remove(link.key))
        qtbot.waitUntil(lambda: not controller.main.sidebar.doors.isVisible())
        assert rows(controller) == []
    finally:
        remote.close()
        errors = remote.logged_errors()
        assert not errors, "the remote backend logged errors:\n" + "\n".join(errors[:20])


# --- words ----------------------------------------------------------------------------------


def test_door_words() -> None:
    door = p.DoorStatus(name="matrix", platform="matrix", state="connected", account=AGENT,
                        since=0.0, rooms=[p.DoorRoom(room_id="!ops:example.org",
                                                     session_id="ses_1", name="Ops")])
    assert words.summary(door) == f"Matrix · connected as {AGENT}"
    assert words.state_words(door) == ("connected", "success")
    room = door.rooms[0]
    assert words.bound_words(door, room) == f"Also in Matrix: Ops (!ops:example.org) via {AGENT}"
    assert words.header_words(door, room) == "Matrix: Ops"
    unnamed = p.DoorRoom(room_id="!x:example.org", session_id="ses_2")
    assert words.bound_words(door, unnamed) == f"Also in Matrix: !x:example.org via {AGENT}"
    book = words.DoorBook()
    book.load([door])
    assert book.rooms_of("ses_1") == [(door, room)]
    assert book.rooms_of("ses_2") == []
    noon = time.mktime((2026, 12, 1, 12, 0, 0, 0, 0, -1))
    assert words.since_words(noon - 3600, now=noon) == "since 11:00"
    assert words.since_words(noon - 86400, now=noon) == "since 2026-11-30 12:00"
    assert words.title(door) == "Matrix"
