"""Several backends at once: this computer's (the desk fixtures' real backend) and a remote one
over wss with a pinned certificate (tests/integration/tls_backend.py), each listed in a
section of its own, each with its own connection, reconnect and replay."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QMessageBox

from desktop import pairings
from desktop.link import Link
from desktop.qt.sidebar_model import KIND, STATE
from desktop.state.sidebar import BackendHeader
from desktop.state.transcript import AssistantItem
from shared import protocol as p
from shared.client import Incoming
from shared.methods import (
    EventsSince,
    PromptSubmit,
    SessionCreate,
    SessionDelete,
    SessionList,
    TokenCreate,
    TokenRevoke,
)
from shared.remote import RemoteTarget
from tests.desktop.conftest import drive
from tests.desktop.test_main_window import approval_turn
from tests.desktop.test_remote_backend import as_owner, pairing
from tests.fakes.memory_keyring import MemoryKeyring
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.tls_backend import TlsBackend, free_port, outside_address, start_tls_backend


@pytest.fixture
def remote(tmp_path: Path, fake_provider: FakeOpenAI) -> Iterator[TlsBackend]:
    """The remote backend on a fixed port: a restarted one comes back where the app dials."""
    host = outside_address()
    backend = start_tls_backend(tmp_path / "remote", fake_provider.base_url, host,
                                free_port(host or "127.0.0.1"))
    yield backend
    backend.close()
    print(backend.stderr_tail())
    errors = backend.logged_errors()
    assert not errors, "the remote backend logged errors:\n" + "\n".join(errors[:20])


def listing(controller: Any) -> list[tuple[str, str]]:
    """The sidebar as (kind, text) rows, top to bottom."""
    model = controller.main.sidebar.model
    return [(str(model.index(r, 0).data(KIND)), str(model.index(r, 0).data()))
            for r in range(model.rowCount())]


def header_state(controller: Any, section: int) -> str:
    model = controller.main.sidebar.model
    row = model.position(BackendHeader(section))
    if row is None:
        return ""
    words, _tone = model.index(row, 0).data(STATE)
    return str(words)


def answers(conversation: Any) -> list[str]:
    return [it.text for it in conversation.state.transcript.items if isinstance(it, AssistantItem)]


def turn(qtbot: Any, conversation: Any, text: str, expected: list[str]) -> None:
    conversation.composer.setPlainText(text)
    conversation.send()
    qtbot.waitUntil(lambda: answers(conversation) == expected
                    and conversation.state.status == "idle", timeout=20_000)  # stored, ended


def test_sessions_of_both_backends_are_listed_under_their_names_and_each_runs_turns(
    controller: Any, remote: TlsBackend, qtbot: Any, fake_provider: FakeOpenAI,
) -> None:
    here = drive(qtbot, controller.link.call(SessionCreate(title="Here"))).session
    there = as_owner(qtbot, remote, SessionCreate(title="There")).session
    target = pairing(qtbot, remote, ["read", "submit", "approve"])
    link = drive(qtbot, controller.add_remote(target, "build-box"))
    where = f"build-box ({target.host})"
    qtbot.waitUntil(lambda: {("session", "Here"), ("session", "There")} <= set(listing(controller)),
                    timeout=10_000)
    rows = listing(controller)
    assert rows[0] == ("backend", "This computer")
    assert rows.index(("backend", where)) > rows.index(("session", "Here")), \
        "this computer's sessions under its header, the remote's under its own"
    assert rows.index(("session", "There")) > rows.index(("backend", where))
    assert header_state(controller, 0) == header_state(controller, 1) == "Connected"

    # A turn on each, each on its own backend's connection.
    main = controller.main
    fake_provider.script(Reply(deltas=["local ", "answer"]))
    main.show_session(here.session_id)
    qtbot.waitUntil(lambda: main.conversation.state.loaded, timeout=10_000)
    assert main.conversation.link is controller.link
    assert main.windowTitle() == "Here — Turnkey"
    turn(qtbot, main.conversation, "hello here", ["local answer"])
    fake_provider.script(Reply(deltas=["remote ", "answer"]))
    main.show_session(there.session_id)
    qtbot.waitUntil(lambda: main.conversation.state.loaded, timeout=10_000)
    assert main.conversation.link is link
    assert main.windowTitle() == "There — Turnkey on build-box"
    turn(qtbot, main.conversation, "hello there", ["remote answer"])
    stored = as_owner(qtbot, remote, EventsSince(session_id=there.session_id, since_seq=0))
    assert [e.type for e in stored.events].count("message.complete") == 1, "run over there"

    # A popped-out window of the remote session (known by its id alone: the sidebar says
    # where it lives) names its backend too.
    win = controller.open_session(there.session_id, new_window=True)
    qtbot.waitUntil(lambda: win.conversation.state.loaded, timeout=10_000)
    assert win.conversation.link is link
    assert win.windowTitle() == "There — Turnkey on build-box"

    # New session: the selected section's backend first; either may be chosen.
    main.new_session()
    dialog = main.new_dialog
    assert dialog.chosen is link
    assert [dialog.backend.itemText(i) for i in range(dialog.backend.count())] == \
        ["This computer", where]
    dialog.backend.setCurrentIndex(0)
    assert not dialog.pick.isHidden(), "this computer's folder is chosen with a file dialog"
    dialog.backend.setCurrentIndex(1)
    assert dialog.pick.isHidden()
    dialog.title.setText("Made over there")
    dialog.accept()
    qtbot.waitUntil(lambda: ("session", "Made over there") in listing(controller)
                    and main.windowTitle() == "Made over there — Turnkey on build-box",
                    timeout=10_000)
    assert main.conversation.link is link
    made = main.conversation.session_id
    over_there = as_owner(qtbot, remote, SessionList(limit=50)).sessions
    assert made in [s.session_id for s in over_there]

    # A search asks every backend; each answers under its own header.
    sidebar = main.sidebar
    sidebar.search.setText("answer")
    qtbot.waitUntil(lambda: all(s.rows.query == "answer" for s in sidebar.sections), timeout=10_000)
    assert listing(controller) == [
        ("backend", "This computer"), ("header", "1 result"), ("session", "Here"),
        ("backend", where), ("header", "1 result"), ("session", "There")]
    sidebar.search.clear()
    qtbot.waitUntil(lambda: all(s.rows.query == "" for s in sidebar.sections), timeout=10_000)

    # Deleted over there while shown here: it leaves the window and the list.
    as_owner(qtbot, remote, SessionDelete(session_id=made))
    qtbot.waitUntil(lambda: main.current is None
                    and ("session", "Made over there") not in listing(controller), timeout=10_000)


def test_an_approval_on_the_remote_backend_reaches_the_notifications_naming_it(
    controller: Any, remote: TlsBackend, qtbot: Any, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    """The notification's own Deny button answers on the backend that asked; the finished turn
    is announced with the backend's name too."""
    shown: list[tuple[str, str]] = []
    controller.notifier.shown.connect(lambda title, text: shown.append((title, text)))
    link = drive(qtbot, controller.add_remote(
        pairing(qtbot, remote, ["read", "submit", "approve"]), "build-box"))
    victim = approval_turn(fake_provider, tmp_path)
    sid = drive(qtbot, link.call(SessionCreate(cwd=str(tmp_path)))).session.session_id
    drive(qtbot, link.call(PromptSubmit(session_id=sid, request_id="r1", text="clean up")))
    qtbot.waitUntil(lambda: any(t.startswith("Turnkey needs your approval") for t, _ in shown),
                    timeout=15_000)
    title, text = next((t, x) for t, x in shown if t.startswith("Turnkey needs your approval"))
    assert title == "Turnkey needs your approval on build-box"
    assert "rm -rf" in text
    [(approval_id, asking)] = controller.approvals.items()
    assert asking is link
    controller.answer(approval_id, "deny")  # the notification's Deny button
    qtbot.waitUntil(lambda: any(t == "Turn finished on build-box" for t, _ in shown),
                    timeout=15_000)
    assert victim.exists(), "denied on the remote backend: nothing was removed"
    assert controller.approvals == {}


def test_a_killed_remote_backend_reconnects_and_replays_while_the_local_one_keeps_working(
    controller: Any, remote: TlsBackend, qtbot: Any, fake_provider: FakeOpenAI,
) -> None:
    here = drive(qtbot, controller.link.call(SessionCreate(title="Here"))).session
    there = as_owner(qtbot, remote, SessionCreate(title="There")).session
    link: Link = drive(qtbot, controller.add_remote(
        pairing(qtbot, remote, ["read", "submit"]), "build-box"))
    seen: list[Incoming] = []
    link.received.connect(lambda e: seen.append(e) if e.session_id == there.session_id else None)
    win = controller.open_session(there.session_id, new_window=True, link=link)
    qtbot.waitUntil(lambda: win.conversation.state.loaded, timeout=10_000)

    # A turn streaming over there when the backend dies.
    release = threading.Event()
    fake_provider.script(Reply(deltas=[f"a{i} " for i in range(10)], hang_after=5, release=release))
    drive(qtbot, link.call(PromptSubmit(session_id=there.session_id, request_id="r1",
                                        text="stream")))
    qtbot.waitUntil(lambda: any(isinstance(e.data, p.TextDelta) for e in seen), timeout=15_000)
    remote.kill9()
    release.set()
    qtbot.waitUntil(lambda: header_state(controller, 1) == "Reconnecting…", timeout=15_000)
    assert header_state(controller, 0) == "Connected", "this computer's backend is untouched"
    assert controller.link.current == "connected"

    # This computer's backend goes on working meanwhile.
    main = controller.main
    fake_provider.script(Reply(deltas=["still ", "here"]))
    main.show_session(here.session_id)
    qtbot.waitUntil(lambda: main.conversation.state.loaded, timeout=10_000)
    turn(qtbot, main.conversation, "are you there?", ["still here"])
    assert link.current == "reconnecting"

    # Back on the same port: the section reconnects and the window replays what it missed.
    # A new backend process means a new epoch, so the window also reloads (session.resume).
    # That reload is waited for before the next prompt: a resume answered while the prompt's
    # first events are on their way moves this connection's mark past them (the snapshot holds
    # them, by design), and they would be missing from `seen` below (seen in a full run).
    reloads: list[bool] = []
    reload = win.conversation.loading.reload

    async def reload_and_count() -> None:
        await reload()
        reloads.append(True)

    win.conversation.loading.reload = reload_and_count
    remote.start()
    qtbot.waitUntil(lambda: header_state(controller, 1) == "Connected", timeout=20_000)
    qtbot.waitUntil(lambda: bool(reloads), timeout=20_000)
    fake_provider.script(Reply(deltas=["after ", "the crash"]))
    drive(qtbot, link.call(PromptSubmit(session_id=there.session_id, request_id="r2",
                                        text="again")))
    qtbot.waitUntil(lambda: "after the crash" in answers(win.conversation), timeout=20_000)
    stored = as_owner(qtbot, remote, EventsSince(session_id=there.session_id, since_seq=0))
    mine = [e.seq for e in seen if e.seq is not None]
    assert mine == [e.seq for e in stored.events], "every stored event once, in order"


def test_a_pairing_is_remembered_across_a_restart_with_its_token_only_in_the_keyring(
    make_controller: Any, remote: TlsBackend, qtbot: Any, test_keyring: MemoryKeyring,
) -> None:
    there = as_owner(qtbot, remote, SessionCreate(title="There")).session
    first = make_controller()
    made = as_owner(qtbot, remote, TokenCreate(scopes=["read"], label="desk"))
    target = RemoteTarget(remote.target_host, remote.port, made.token,
                          remote.info["tls_fingerprint"])
    link = drive(qtbot, first.add_remote(target, "build-box"))
    key = link.key
    settings = first.data_dir / pairings.SETTINGS
    assert test_keyring.store == {("turnkey", f"backend-{key}"): made.token}
    written = settings.read_text()
    assert made.token not in written, "the token is not in the settings file"
    assert json.loads(written)["backends"] == [{
        "key": key, "label": "build-box", "host": target.host, "port": target.port,
        "fingerprint": target.fingerprint}]
    # A window of the remote session open at quit: the layout says which backend it is on.
    popped = first.open_session(there.session_id, new_window=True, link=link)
    qtbot.waitUntil(lambda: popped.conversation.state.loaded, timeout=10_000)
    first.quit()
    qtbot.waitUntil(lambda: link.client.state == "closed", timeout=10_000)
    saved = settings.read_text()
    assert made.token not in saved, "nor after the layout is saved at quit"
    assert json.loads(saved)["sessions"][0]["backend"] == key

    # The next run: the pairing is back, with its sessions, connected with the keyring's token,
    # and the window reopens on it once it is connected.
    second = make_controller(restore=True)
    [again] = second.backends.remotes
    assert (again.key, again.title) == (key, f"build-box ({target.host})")
    qtbot.waitUntil(lambda: ("session", "There") in listing(second), timeout=15_000)
    assert second.main.sidebar.link_of(there.session_id) is again
    qtbot.waitUntil(lambda: len(second.windows) == 1, timeout=15_000)
    assert second.windows[0].conversation.link is again
    assert second.windows[0].session_id == there.session_id

    # The token revoked over there: the section says the backend refuses it, and why.
    as_owner(qtbot, remote, TokenRevoke(token_id=made.token_id))
    qtbot.waitUntil(lambda: header_state(second, 1) == "Refused: token revoked or unknown",
                    timeout=20_000)
    assert header_state(second, 0) == "Connected"

    # Removing the pairing (its header's menu, then the question's Remove) forgets both halves.
    sidebar = second.main.sidebar
    header = sidebar.model.index(sidebar.model.position(BackendHeader(1)), 0)
    sidebar._context_menu(sidebar.list.visualRect(header).center())
    [remove] = [a for a in sidebar.context_menu.actions() if a.text().startswith("Remove")]
    assert remove.text() == f"Remove build-box ({target.host})…"
    remove.trigger()
    box = second.forget_box
    [yes] = [b for b in box.buttons() if box.buttonRole(b) == QMessageBox.ButtonRole.DestructiveRole]
    yes.click()
    qtbot.waitUntil(lambda: second.backends.remotes == [], timeout=10_000)
    assert test_keyring.store == {}
    assert json.loads(settings.read_text())["backends"] == []
    assert ("backend", "This computer") not in listing(second), "one backend: no headers"


def test_a_wrong_certificate_is_shown_as_refused_and_sends_no_token(
    make_controller: Any, remote: TlsBackend, qtbot: Any, desk_backend: Any,
) -> None:
    """A remembered pairing whose backend now shows another certificate (someone in between,
    or a new certificate there): its section says so; the others carry on."""
    target = pairing(qtbot, remote, ["read"])
    stale = pairings.Pairing("bk_stale", "build-box", target.host, target.port, "0" * 64)
    assert pairings.remember(desk_backend.data_dir, stale, target.token)
    # And one whose token the keyring lost (another keyring, a wiped one).
    lost = pairings.Pairing("bk_lost", "laptop-2", target.host, target.port, target.fingerprint)
    pairings.write_settings(desk_backend.data_dir, {"backends": [
        *pairings.read_settings(desk_backend.data_dir)["backends"], lost._asdict()]})
    controller = make_controller()
    qtbot.waitUntil(lambda: header_state(controller, 1) == "Refused: wrong certificate",
                    timeout=15_000)
    assert header_state(controller, 0) == "Connected"
    assert header_state(controller, 2) == "Refused: no token in the keyring"
    assert listing(controller).count(("note", "Pair again to list its sessions")) == 2
