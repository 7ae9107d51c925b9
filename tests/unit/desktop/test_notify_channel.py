"""Which way a notification reaches the person (tray, D-Bus, in-window), and what its buttons do."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before any QApplication exists

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QSystemTrayIcon

from desktop.qt.notify import DesktopNotifications
from desktop.qt.tray import APPROVAL_BUTTONS, Notifier, choose_channel


@pytest.mark.parametrize(("tray", "bus", "channel"), [
    (True, True, "tray"), (True, False, "tray"), (False, True, "dbus"), (False, False, "window"),
])
def test_the_tray_comes_first_then_desktop_notifications_then_the_windows(
    tray: bool, bus: bool, channel: str
) -> None:
    assert choose_channel(tray, bus) == channel


@pytest.fixture
def no_tray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: False))


async def test_without_a_bus_the_notifier_stays_in_the_windows_and_cannot_reach_anyone(
    qapp: Any, no_tray: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for address in (None, f"unix:path={tmp_path / 'no-such-bus'}"):
        if address is None:
            monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
        else:
            monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
        notifier = Notifier()
        await notifier.start()
        assert notifier.channel == "window"
        assert not notifier.available
        fallback: list[Any] = []
        notifier.fallback.connect(lambda *a, seen=fallback: seen.append(a))
        notifier.notify("Turnkey needs your approval", "terminal: rm", "s1", "a1")
        assert fallback == [("Turnkey needs your approval", "terminal: rm", "s1", "a1")]
        await notifier.stop()


async def test_with_a_tray_the_bus_is_not_asked(
    qapp: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))
    monkeypatch.setattr(QSystemTrayIcon, "showMessage", lambda *a: None)

    async def must_not_start(self: DesktopNotifications) -> bool:
        raise AssertionError("the tray was there")

    monkeypatch.setattr(DesktopNotifications, "start", must_not_start)
    notifier = Notifier()
    await notifier.start()
    assert notifier.channel == "tray"
    assert notifier.available


class Shown:
    def __init__(self) -> None:
        self.shown: list[tuple[Any, ...]] = []
        self.closed: list[str] = []


@pytest.fixture
def bus(monkeypatch: pytest.MonkeyPatch, no_tray: None) -> Shown:
    """A notification server with buttons, recorded instead of spoken to."""
    seen = Shown()

    async def start(self: DesktopNotifications) -> bool:
        self.actions = True
        return True

    def show(self: DesktopNotifications, key: str, title: str, body: str, actions: Any = (),
             urgency: str = "normal", timeout_ms: int = -1) -> None:
        self._ids[key] = len(seen.shown) + 1
        seen.shown.append((key, title, tuple(actions), urgency, timeout_ms))

    def close(self: DesktopNotifications, key: str) -> None:
        if self._ids.pop(key, None) is not None:
            seen.closed.append(key)

    monkeypatch.setattr(DesktopNotifications, "start", start)
    monkeypatch.setattr(DesktopNotifications, "show", show)
    monkeypatch.setattr(DesktopNotifications, "close", close)
    return seen


async def test_an_approval_notification_has_buttons_that_answer_it_or_open_it(qapp: Any, bus: Shown) -> None:
    notifier = Notifier()
    await notifier.start()
    assert notifier.channel == "dbus"
    assert notifier.available
    answered: list[tuple[str, str]] = []
    clicked: list[tuple[str, str]] = []
    notifier.answered.connect(lambda *a: answered.append(a))
    notifier.clicked.connect(lambda *a: clicked.append(a))
    notifier.notify("Turnkey needs your approval", "terminal: rm -rf x", "s1", "a1")
    notifier.notify("Turn finished", "Parser", "s2")
    assert bus.shown[0] == ("a1", "Turnkey needs your approval", APPROVAL_BUTTONS, "critical", 0)
    assert bus.shown[1][0] != "a1"
    assert bus.shown[1][2] == ()
    desktop = notifier.desktop
    assert desktop is not None
    desktop.invoked.emit("a1", "once")
    desktop.invoked.emit("a1", "deny")
    desktop.invoked.emit("a1", "open")
    desktop.invoked.emit("a1", "default")
    desktop.invoked.emit(bus.shown[1][0], "default")
    assert answered == [("a1", "once"), ("a1", "deny")]
    assert clicked == [("s1", "a1"), ("s1", "a1"), ("s2", "")]
    # Resolved anywhere: the approval's notification goes, the other stays.
    notifier.resolve("a1")
    assert bus.closed == ["a1"]
    # Quitting takes back the approvals still shown (their buttons would answer nothing).
    notifier.notify("Turnkey needs your approval", "terminal: ls", "s1", "a2")
    await notifier.stop()
    assert bus.closed == ["a1", "a2"]
