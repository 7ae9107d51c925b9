"""The app with a backend on another computer: File ▸ Connect to a remote backend… pairs
with it (beside this computer's), over wss with a pinned self-signed certificate and a scoped
token (tests/integration/tls_backend.py says where that backend listens: a non-loopback
address, or loopback with a given certificate on a box without a network)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from PySide6.QtWidgets import QPushButton

from desktop.state.transcript import AssistantItem
from shared import protocol as p
from shared.client import Client, RpcError
from shared.errors import ErrorCode
from shared.methods import PromptSubmit, Request, SessionCreate, TokenCreate
from shared.remote import RemoteTarget
from tests.desktop.conftest import drive
from tests.desktop.test_main_window import approval_turn
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.tls_backend import TlsBackend, outside_address, start_tls_backend

R = TypeVar("R")


@pytest.fixture
def remote(tmp_path: Path, fake_provider: FakeOpenAI) -> Iterator[TlsBackend]:
    backend = start_tls_backend(tmp_path / "remote", fake_provider.base_url, outside_address())
    yield backend
    backend.close()
    print(backend.stderr_tail())
    errors = backend.logged_errors()
    assert not errors, "the remote backend logged errors:\n" + "\n".join(errors[:20])


def as_owner(qtbot: Any, backend: TlsBackend, request: Request[R]) -> R:
    """One call on the remote backend's own computer, with its owner token."""
    async def go() -> R:
        client = Client(backend.data_dir, name="owner", reconnect=False)
        await client.connect()
        try:
            return await client.call(request)
        finally:
            await client.close()

    return drive(qtbot, go())


def pairing(qtbot: Any, backend: TlsBackend, scopes: list[p.Scope]) -> RemoteTarget:
    made = as_owner(qtbot, backend, TokenCreate(scopes=scopes, label="desk"))
    return RemoteTarget(backend.target_host, backend.port, made.token,
                        backend.info["tls_fingerprint"])


def connect_with(qtbot: Any, dialog: Any, text: str, name: str = "") -> None:
    dialog.field.setText(text)
    dialog.label.setText(name)
    dialog.connect_button.click()
    qtbot.waitUntil(lambda: dialog.error.isVisible() or not dialog.isVisible(), timeout=15_000)


def test_the_app_pairs_with_a_remote_backend_by_its_connection_string(
    controller: Any, remote: TlsBackend, qtbot: Any, fake_provider: FakeOpenAI,
) -> None:
    there = as_owner(qtbot, remote, SessionCreate(title="Built over there")).session
    target = pairing(qtbot, remote, ["read", "submit"])
    host = target.host
    controller.open_remote()
    dialog = controller.remote_dialog
    assert dialog is not None
    assert dialog.isVisible()

    connect_with(qtbot, dialog, "turnkey://somewhere?token=abc")
    assert "no port" in dialog.error.text()
    wrong = target._replace(fingerprint="0" * 64).connection_string()
    connect_with(qtbot, dialog, wrong)
    assert "not the one this connection string pins" in dialog.error.text()
    assert target.fingerprint in dialog.error.text(), "the certificate shown is named"
    assert dialog.isVisible()
    assert controller.backends.remotes == [], "nothing paired"

    connect_with(qtbot, dialog, target.connection_string(), "build-box")
    assert not dialog.isVisible()
    assert controller.link.remote_host == "", "this computer's backend stays"
    [link] = controller.backends.remotes
    assert link.remote_host == host
    assert link.title == f"build-box ({host})"
    assert link.current == "connected"
    assert controller.main.windowTitle() == "Turnkey"
    assert not controller.main.sidebar.backend_label.isVisible(), "each section has a header"
    rows = controller.main.sidebar.sections[1].rows
    qtbot.waitUntil(lambda: [s.session_id for s in rows.rows] == [there.session_id], timeout=10_000)

    # A new session there: its folder is typed (a file dialog would show this computer's).
    main = controller.main
    main.new_session(link)
    new = main.new_dialog
    assert new.chosen is link
    assert new.folder.text() == ""
    assert "build-box" in new.folder.placeholderText(), "the computer is named"
    choose = [b for b in new.findChildren(QPushButton) if b.text() == "Choose…"]
    assert len(choose) == 1
    assert choose[0].isHidden(), "no local file dialog for a remote folder"
    new.reject()

    # A turn there, typed in the app: the remote backend runs it.
    fake_provider.script(Reply(deltas=["ran ", "remotely"]))
    main.show_session(there.session_id)
    qtbot.waitUntil(lambda: main.conversation.state.loaded, timeout=10_000)
    assert main.conversation.link is link, "opened on its own backend's connection"
    assert main.windowTitle() == "Built over there — Turnkey on build-box"
    main.conversation.composer.setPlainText("where do you run?")
    main.conversation.send()
    qtbot.waitUntil(lambda: [it.text for it in main.conversation.state.transcript.items
                             if isinstance(it, AssistantItem)] == ["ran remotely"], timeout=20_000)
    assert fake_provider.wait_requests(1)[-1].last_user_text == "where do you run?"


def test_a_read_only_pairing_cannot_submit_from_the_app(
    controller: Any, remote: TlsBackend, qtbot: Any, fake_provider: FakeOpenAI,
) -> None:
    there = as_owner(qtbot, remote, SessionCreate(title="Look, do not touch")).session
    link = drive(qtbot, controller.add_remote(pairing(qtbot, remote, ["read"])))
    rows = controller.main.sidebar.sections[1].rows
    qtbot.waitUntil(lambda: [s.session_id for s in rows.rows] == [there.session_id], timeout=10_000)
    with pytest.raises(RpcError) as caught:
        drive(qtbot, link.call(PromptSubmit(session_id=there.session_id,
                                                       request_id="r1", text="rm -rf /")))
    assert caught.value.code == ErrorCode.FORBIDDEN
    assert fake_provider.requests == []


def test_an_approval_on_the_remote_backend_reaches_the_app(
    controller: Any, remote: TlsBackend, qtbot: Any, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    """The remote backend's turn asks before `rm -rf`: the app says so, the person denies it
    there, and the folder on the backend's computer stays."""
    target = pairing(qtbot, remote, ["read", "submit", "approve"])
    link = drive(qtbot, controller.add_remote(target))
    victim = approval_turn(fake_provider, tmp_path)
    created = drive(qtbot, link.call(SessionCreate(cwd=str(tmp_path))))
    sid = created.session.session_id
    drive(qtbot, link.call(PromptSubmit(session_id=sid, request_id="r1", text="clean up")))
    main = controller.main
    qtbot.waitUntil(lambda: main.banner.isVisible() and "approval" in main.banner.text(),
                    timeout=15_000)
    assert f"approval on {target.host}" in main.banner.text(), "the backend is named"
    main._banner_clicked()
    qtbot.waitUntil(lambda: main.current is not None and len(main.conversation.cards) == 1,
                    timeout=10_000)
    assert main.conversation.link is link
    next(iter(main.conversation.cards.values())).buttons["deny"].click()
    qtbot.waitUntil(lambda: main.conversation.state.status == "idle"
                    and not main.conversation.cards, timeout=15_000)
    assert victim.exists()
