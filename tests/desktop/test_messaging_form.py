"""Settings → Messaging sets a Matrix door up with a form, against a real homeserver
(tests/matrix_server.py: Synapse on 127.0.0.1) and a real backend with no door yet: the access
token is never echoed, Test connection asks the homeserver for real and says what worked or
failed, and Save makes the door appear on the page, connected.  Editing it shows its settings,
never its token."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication, QLabel, QLineEdit

from desktop.qt.settings_messaging import KEEP_TOKEN, MessagingPage
from tests.desktop.test_accessibility import unnamed
from tests.integration.backend_proc import Backend
from tests.matrix_server import MatrixAccount, MatrixServer
from tests.pg_server import free_port

WAIT_MS = 60_000


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


def messaging(controller: Any, qtbot: Any) -> MessagingPage:
    controller.main.resize(1100, 760)
    controller.main.show()
    controller.open_settings("Messaging")
    assert controller.settings.tabs.currentWidget() is controller.settings.messaging_page
    page = controller.settings.messaging_page
    assert isinstance(page, MessagingPage)
    qtbot.waitUntil(lambda: page.watch.loaded, timeout=15_000)
    return page


def fill(qtbot: Any, edit: QLineEdit, text: str) -> None:
    edit.clear()
    qtbot.keyClicks(edit, text)


def test_test_connection_and_save_set_a_door_up(
        controller: Any, qtbot: Any, desk_backend: Backend, synapse: MatrixServer,
        agent: MatrixAccount, person: MatrixAccount) -> None:
    page = messaging(controller, qtbot)
    form = page.form
    # No door yet: the page says what a door is, and the form is there to make one.
    assert page.empty.isVisible()
    assert form.isVisible()
    assert not page.cards
    assert not form.cancel_button.isVisible()
    assert not unnamed(page)
    assert form.token_edit.echoMode() == QLineEdit.EchoMode.Password

    fill(qtbot, form.homeserver_edit, synapse.url)
    fill(qtbot, form.account_edit, agent.user_id)
    qtbot.keyClicks(form.users_edit, person.user_id)
    fill(qtbot, form.token_edit, "syt_wrong-token-0123")
    assert form.token_edit.text() == "syt_wrong-token-0123"
    assert "syt_wrong" not in form.token_edit.displayText(), "the token is not echoed"

    def tested(button_text: str = "Test connection") -> str:
        qtbot.waitUntil(lambda: form.test_button.isEnabled()
                        and form.test_button.text() == button_text, timeout=WAIT_MS)
        return form.result_label.text()

    with qtbot.waitSignal(form.tested, timeout=WAIT_MS):
        form.test_button.click()
    said = tested()
    assert said.startswith(f"Test failed. Reached {synapse.url}, but it refused the access token")
    assert form.result_label.property("tone") == "danger"
    assert form.result_label.isVisible()

    home = f"http://127.0.0.1:{free_port()}"
    fill(qtbot, form.homeserver_edit, home)
    fill(qtbot, form.token_edit, agent.access_token)
    with qtbot.waitSignal(form.tested, timeout=WAIT_MS):
        form.test_button.click()
    assert tested() == (f"Test failed. Cannot reach {home}: connection refused. Check the "
                        "homeserver URL and that this computer can reach it.")

    fill(qtbot, form.homeserver_edit, synapse.url)
    with qtbot.waitSignal(form.tested, timeout=WAIT_MS):
        form.test_button.click()
    said = tested()
    assert said.startswith("Connection works: the homeserver answered and accepted the token for "
                           f"{agent.user_id} (device {agent.device_id}), in "), said
    assert form.result_label.property("tone") == "success"
    assert not (desk_backend.data_dir / "secrets.json").exists(), "a test saves nothing"

    # Save: the door appears on the page (and in the sidebar), and connects.
    with qtbot.waitSignal(form.saved, timeout=WAIT_MS):
        form.save_button.click()
    assert len(page.cards) == 1
    card = page.cards[0]
    qtbot.waitUntil(card.isVisible)
    assert form.result_label.text().startswith("Saved. The door is starting")
    assert form.token_edit.text() == "", "the token is not kept in the form"
    assert form.token_edit.placeholderText() == KEEP_TOKEN
    qtbot.waitUntil(lambda: card.badge.text() == "● Connected", timeout=WAIT_MS)
    assert card.account.text() == f"Speaks as {agent.user_id}"
    assert person.user_id in card.allowed.text()
    strip = controller.main.sidebar.doors
    qtbot.waitUntil(lambda: bool(strip.rows) and strip.rows[0].property("tone") == "success",
                    timeout=WAIT_MS)
    table = tomllib.loads((desk_backend.data_dir / "config.toml").read_text())["doors"]["matrix"]
    assert (table["homeserver"], table["user_id"], table["allowed_users"]) == (
        synapse.url, agent.user_id, [person.user_id])
    assert agent.access_token not in (desk_backend.data_dir / "config.toml").read_text()
    shown = [w.text() for w in QApplication.allWidgets()
             if isinstance(w, QLabel | QLineEdit) and w is not form.token_edit]
    assert not [s for s in shown if agent.access_token in s]

    # Closed, the form opens again from the card: the saved settings, not the token.
    form.cancel_button.click()
    assert not form.isVisible()
    card.edit_button.click()
    qtbot.waitUntil(lambda: form.isVisible())
    assert form.homeserver_edit.text() == synapse.url
    assert form.account_edit.text() == agent.user_id
    assert form.users_edit.toPlainText() == person.user_id
    assert form.token_edit.text() == ""
    assert form.token_edit.placeholderText() == KEEP_TOKEN
    # An empty token field keeps the stored token, which the test then uses.
    with qtbot.waitSignal(form.tested, timeout=WAIT_MS):
        form.test_button.click()
    assert tested().startswith("Connection works")
    assert not unnamed(page)
