"""A first run with nothing configured, against a real backend on a fresh data folder: the window
opens on a session to type in; without the offline model the provider form opens by itself (once)
and the message box waits for a provider; with it the welcome says the offline model answers.
And the background start: hidden with a tray until a later launch asks for the window."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QSystemTrayIcon

from desktop.qt.controller import Controller
from desktop.qt.conversation import Conversation
from desktop.qt.settings import SettingsDialog
from desktop.state.first_run import ADD_PROVIDER, NEEDS_PLACEHOLDER
from tests.desktop.conftest import drive
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.backend_proc import Backend

WAIT_MS = 20_000
NO_MODEL = Path(__file__).parents[1] / "fakes" / "no_offline_model"  # its sitecustomize hides it


def fresh_backend(folder: Path, offline_model: bool) -> Backend:
    """A backend on a data folder with no config.toml (a fresh install); without the offline
    model as the bundle is (`offline_model` False)."""
    env = {"TURNKEY_NO_KEYRING": "1"}
    if not offline_model:
        env["PYTHONPATH"] = os.pathsep.join(x for x in (str(NO_MODEL), os.environ.get(
            "PYTHONPATH", "")) if x)
    backend = Backend(folder, "http://127.0.0.1:9/unused", extra_env=env)
    (backend.data_dir / "config.toml").unlink()
    return backend


@pytest.fixture
def controllers(qloop: asyncio.AbstractEventLoop, qtbot: Any) -> Iterator[Callable[..., Controller]]:
    """``make(backend, hidden=False)``: the app wired to `backend` (started already), connected
    and through its first listing."""
    from desktop.qt.aio import settle

    made: list[Controller] = []

    def make(backend: Backend, hidden: bool = False) -> Controller:
        ctl = Controller(backend.data_dir, restart_after_s=None)
        ctl.exit_app = lambda: None
        made.append(ctl)
        with qtbot.waitSignal(ctl.ready, timeout=WAIT_MS):
            ctl.start(restore=True, hidden=hidden)
        return ctl

    yield make
    for ctl in made:
        if isinstance(ctl.settings, SettingsDialog):
            ctl.settings.close()
        for win in list(ctl.windows):
            win.close()
        ctl.main.close()
        drive(qtbot, settle())
        drive(qtbot, ctl.notifier.stop())
        drive(qtbot, ctl.link.close())


def _close(ctl: Controller, qtbot: Any) -> None:
    from desktop.qt.aio import settle

    if isinstance(ctl.settings, SettingsDialog):
        ctl.settings.close()
    ctl.save_layout()
    ctl.main.close()
    drive(qtbot, settle())
    drive(qtbot, ctl.link.close())


def _settled(qtbot: Any, d: SettingsDialog) -> None:
    qtbot.waitUntil(lambda: not d.busy, timeout=WAIT_MS)


def first_session(qtbot: Any, ctl: Controller) -> Conversation:
    """The session a first run opens on, once the main window shows it."""
    qtbot.waitUntil(lambda: ctl.main.current is not None, timeout=WAIT_MS)
    conv = ctl.main.current
    assert conv is not None
    return conv


def test_without_the_offline_model_the_provider_form_opens_once_and_a_saved_provider_answers(
    tmp_path: Path, qtbot: Any, controllers: Callable[..., Controller], fake_provider: FakeOpenAI,
) -> None:
    backend = fresh_backend(tmp_path / "data", offline_model=False)
    backend.start()
    try:
        ctl = controllers(backend)
        # The first session, to type in, and the settings at a new provider's form by themselves.
        conv = first_session(qtbot, ctl)
        d = ctl.settings
        assert isinstance(d, SettingsDialog)
        qtbot.waitUntil(lambda: d.state.draft == "main", timeout=WAIT_MS)
        assert d.isVisible()
        assert d.tabs.currentWidget() is d.providers_page
        assert d.name_edit.text() == "main"
        assert d.default_check.isChecked(), "the first provider is the default"
        assert d.test_button.isEnabled(), "the connection test is right there"
        # The window says a provider is needed, and the message box takes nothing meanwhile.
        qtbot.waitUntil(lambda: conv.empty.isVisible(), timeout=WAIT_MS)
        assert "A model provider is needed" in conv.empty.text()
        assert f"href='{ADD_PROVIDER}'" in conv.empty.text()
        assert not conv.composer.isEnabled()
        assert conv.composer.placeholderText() == NEEDS_PLACEHOLDER

        # A working provider, tested and saved: the window is ready to type in.
        d.kind_combo.setCurrentIndex(d.kind_combo.findData("openai"))
        d.fields["base_url"].setText(fake_provider.base_url)
        d.fields["model"].setText("fake-model")
        fake_provider.script(Reply(deltas=["ok"]))
        with qtbot.waitSignal(d.tested, timeout=WAIT_MS) as tested:
            d.test_button.click()
        assert tested.args[0].ok
        with qtbot.waitSignal(d.saved, timeout=WAIT_MS):
            d.save_provider()
        _settled(qtbot, d)
        qtbot.waitUntil(lambda: conv.composer.isEnabled(), timeout=WAIT_MS)
        assert conv.composer.placeholderText() != NEEDS_PLACEHOLDER
        qtbot.waitUntil(lambda: "A model provider is needed" not in conv.empty.text(),
                        timeout=WAIT_MS)
        assert "fake-model (main)" in conv.empty.text()
    finally:
        backend.close()


def test_the_provider_form_opens_once_even_while_nothing_can_answer(
    tmp_path: Path, qtbot: Any, controllers: Callable[..., Controller],
) -> None:
    backend = fresh_backend(tmp_path / "data", offline_model=False)
    backend.start()
    try:
        first = controllers(backend)
        qtbot.waitUntil(lambda: first.settings is not None, timeout=WAIT_MS)
        _close(first, qtbot)
        second = controllers(backend)  # (ready: past the point where the first run opens it)
        assert second.settings is None, "shown on the first run only"
        assert len(backend.query("SELECT session_id FROM sessions")) == 1, "one first session"
    finally:
        backend.close()


def test_with_the_offline_model_the_welcome_says_it_answers_here_and_offers_a_provider(
    tmp_path: Path, qtbot: Any, controllers: Callable[..., Controller],
) -> None:
    from backend.providers.local import BUNDLED_MODEL, local_available

    assert local_available(), "scripts/bootstrap dev,local installs the offline model"
    backend = fresh_backend(tmp_path / "data", offline_model=True)
    backend.start()
    try:
        ctl = controllers(backend)
        conv = first_session(qtbot, ctl)
        qtbot.waitUntil(lambda: conv.empty.isVisible() and "offline" in conv.empty.text(),
                        timeout=WAIT_MS)
        text = conv.empty.text()
        assert f"{BUNDLED_MODEL}, the small offline model built into Turnkey" in text
        assert "runs on this computer, with no account and no network" in text
        assert f"<a href='{ADD_PROVIDER}'>Add a provider</a>" in text
        assert ctl.settings is None, "nothing opens by itself: it can answer"
        assert conv.composer.isEnabled(), "typing just works"
        assert conv.composer.hasFocus() or ctl.main.isVisible()
        # Its link opens the provider form.
        conv.empty.linkActivated.emit(ADD_PROVIDER)
        d = ctl.settings
        assert isinstance(d, SettingsDialog)
        qtbot.waitUntil(lambda: d.state.draft == "main", timeout=WAIT_MS)
        assert d.tabs.currentWidget() is d.providers_page
    finally:
        backend.close()


# --- the background start ---------------------------------------------------------------------


@pytest.fixture
def tray(monkeypatch: pytest.MonkeyPatch) -> None:
    """A desktop with a system tray (QSystemTrayIcon says one exists)."""
    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))


def test_a_hidden_start_shows_no_window_until_a_later_launch_asks(
    tray: None, qtbot: Any, controllers: Callable[..., Controller], desk_backend: Backend,
) -> None:
    from desktop.app import serve
    from desktop.qt import instance

    ctl = controllers(desk_backend, hidden=True)
    assert ctl.notifier.tray is not None
    qtbot.wait(200)
    assert not ctl.main.isVisible(), "in the tray only"
    assert ctl.settings is None
    serve(ctl, instance.Request())  # what a second `turnkey` sends
    qtbot.waitUntil(ctl.main.isVisible, timeout=WAIT_MS)
    assert not ctl.hidden


def test_the_login_option_writes_and_removes_the_entry_and_reads_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, qtbot: Any,
    controllers: Callable[..., Controller], desk_backend: Backend,
) -> None:
    from desktop import autostart

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "conf"))
    path = tmp_path / "conf" / "autostart" / "turnkey.desktop"
    ctl = controllers(desk_backend)
    ctl.open_settings()
    d = ctl.settings
    assert isinstance(d, SettingsDialog)
    assert not d.autostart_check.isChecked(), "off by default"
    d.autostart_check.click()
    assert path.is_file()
    assert "--background" in path.read_text()
    assert f"--data-dir {desk_backend.data_dir.resolve()}" in path.read_text()
    d.autostart_check.click()
    assert not path.exists()
    autostart.enable(desk_backend.data_dir, path)  # added elsewhere meanwhile
    d.hide()
    d.show()
    assert d.autostart_check.isChecked(), "the box says what the file says"


def test_background_without_a_tray_starts_the_backend_alone_and_exits(tmp_path: Path) -> None:
    """The login entry's own command, run as a login would run it, where there is no tray (the
    offscreen platform has none): the backend runs, no app stays."""
    import subprocess

    from desktop import autostart
    from shared.launcher import running, stop_backend
    from tests.unit.desktop.test_autostart import entry, exec_argv

    data = tmp_path / "data"
    path = autostart.enable(data, tmp_path / "conf" / "autostart" / "turnkey.desktop")
    argv = exec_argv(entry(path)["Exec"])
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "TURNKEY_NO_KEYRING": "1",
           "XDG_CONFIG_HOME": str(tmp_path / "conf")}
    env.pop("TURNKEY_HOME", None)
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    info = running(data)
    try:
        assert done.returncode == 0, done.stderr
        assert info is not None, "the backend runs"
        again = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True,
                               timeout=120)
        assert again.returncode == 0, again.stderr
        assert running(data) == info, "the same backend: a second login start changes nothing"
        assert not list(data.glob("turnkey-*.lock")) or _unlocked(data), "no app stays behind"
    finally:
        if info is not None:
            assert stop_backend(info)


def _unlocked(data: Path) -> bool:
    from desktop.qt import instance

    lock = instance.claim(data)
    if lock is None:
        return False
    lock.release()
    return True
