"""Approvals through a real notification server (dunst on a private session bus) when there is no tray:
the app stays in the background, the approval's "Allow once" button answers it, and a resolved
approval's notification is closed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from shared.methods import ApprovalRespond, PromptSubmit, SessionCreate
from tests.fakes.openai_server import FakeOpenAI, Reply

from .conftest import drive
from .test_main_window import approval_turn

TOOLS = ("dbus-daemon", "dbus-monitor", "dbus-send", "dunst", "dunstctl", "Xvfb")


@dataclass
class NotificationServer:
    """dunst on its own session bus and X display, and what dbus-monitor saw on that bus."""

    address: str
    env: dict[str, str]
    monitor_log: Path
    menu_log: Path

    def dunstctl(self, *args: str) -> str:
        return subprocess.run(["dunstctl", *args], env=self.env, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()

    def displayed(self) -> int:
        return int(self.dunstctl("count", "displayed").split()[-1])

    def traffic(self) -> str:
        return self.monitor_log.read_text(errors="replace")

    def notify_calls(self) -> list[str]:
        """The Notify calls on the bus, each as dbus-monitor printed it."""
        blocks = self.traffic().split("\nmethod call ")
        return [b for b in blocks if "member=Notify" in b.splitlines()[0]]


def _start(argv: list[str], env: dict[str, str], procs: list[subprocess.Popen[str]],
           stdout: Any = subprocess.DEVNULL) -> subprocess.Popen[str]:
    proc = subprocess.Popen(argv, env=env, stdout=stdout, stderr=subprocess.DEVNULL, text=True)
    procs.append(proc)
    return proc


@pytest.fixture
def notification_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[NotificationServer]:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (Debian: dunst dbus dbus-x11 xvfb; scripts/bootstrap "
                    "dev installs them as root)")
    procs: list[subprocess.Popen[str]] = []
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    try:
        xvfb = _start(["Xvfb", "-displayfd", "1", "-nolisten", "tcp", "-screen", "0", "800x600x24"],
                      env, procs, stdout=subprocess.PIPE)
        assert xvfb.stdout is not None
        env["DISPLAY"] = ":" + xvfb.stdout.readline().strip()
        bus = _start(["dbus-daemon", "--session", "--nofork", "--print-address=1"], env, procs,
                     stdout=subprocess.PIPE)
        assert bus.stdout is not None
        address = bus.stdout.readline().strip()
        assert address, "dbus-daemon printed no address"
        env["DBUS_SESSION_BUS_ADDRESS"] = address
        # dunst's context menu runs a dmenu-like program with one line per button
        # ("#Allow once (summary) [id,once]"); this one records them and picks "Allow once".
        menu_log = tmp_path / "menu.txt"
        picker = tmp_path / "pick-allow-once"
        picker.write_text(f"#!/bin/sh\ntee -a {menu_log} | grep -m1 '^#Allow once'\n")
        picker.chmod(0o755)
        config = tmp_path / "dunstrc"
        config.write_text(f"[global]\n    dmenu = {picker}\n")
        monitor_log = tmp_path / "bus.log"
        with monitor_log.open("w") as out:
            _start(["dbus-monitor", "--address", address, "interface='org.freedesktop.Notifications'"],
                   env, procs, stdout=out)
        _start(["dunst", "-config", str(config)], env, procs)
        server = NotificationServer(address, env, monitor_log, menu_log)
        deadline = time.monotonic() + 10
        while True:
            try:
                server.displayed()
                break
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
        yield server
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_without_a_tray_an_approval_reaches_a_notification_server_whose_button_answers_it(
    qtbot: Any, notification_server: NotificationServer, make_controller: Any,
    fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    server = notification_server
    controller = make_controller()
    notifier = controller.notifier
    qtbot.waitUntil(lambda: notifier.channel == "dbus", timeout=10_000)
    assert notifier.tray is None
    assert notifier.desktop.actions, "dunst shows buttons"
    sid = drive(qtbot, controller.link.call(SessionCreate(cwd=str(tmp_path)))).session.session_id

    # The last window closes: the app stays, and says so once.
    controller.main.close()
    controller.last_window_closed()
    qtbot.waitUntil(lambda: any("keeps running in the background" in c for c in server.notify_calls()),
                    timeout=10_000)
    assert json.loads((controller.data_dir / "desktop.json").read_text())["background_told"] is True
    controller.last_window_closed()
    assert controller._quitting is False

    # An approval arrives with no window open: a notification with buttons.
    victim = approval_turn(fake_provider, tmp_path)
    drive(qtbot, controller.link.call(PromptSubmit(session_id=sid, request_id="r1", text="clean up")))
    qtbot.waitUntil(lambda: any("Turnkey needs your approval" in c for c in server.notify_calls()),
                    timeout=15_000)
    call = next(c for c in server.notify_calls() if "Turnkey needs your approval" in c)
    for label in ("Allow once", "Deny", "Open", "rm -rf"):
        assert label in call
    qtbot.waitUntil(lambda: server.displayed() >= 1, timeout=5_000)

    # The person picks "Allow once" in dunst's menu: the backend gets the answer, the turn goes on.
    server.dunstctl("context")
    qtbot.waitUntil(lambda: not victim.exists(), timeout=15_000)
    assert "#Allow once" in server.menu_log.read_text()
    qtbot.waitUntil(lambda: controller.statuses.get(sid) == "idle", timeout=15_000)
    assert not controller.windows, "answered without opening a window"
    assert controller.main.current is None

    # Another approval, answered elsewhere (the CLI): its notification is closed.
    closes_before = server.traffic().count("member=CloseNotification")
    second = tmp_path / "second"
    second.mkdir()
    fake_provider.script(Reply.calls({"name": "terminal", "arguments": {"command": f"rm -rf {second}"}}),
                         Reply(deltas=["Kept."]))
    drive(qtbot, controller.link.call(PromptSubmit(session_id=sid, request_id="r2", text="and that")))

    def approval_shown() -> list[str]:
        return [k for k in notifier.desktop.shown() if notifier._targets.get(k, ("", ""))[1]]

    qtbot.waitUntil(lambda: bool(approval_shown()), timeout=15_000)
    (approval_id,) = approval_shown()
    shown_before = server.displayed()
    drive(qtbot, controller.link.call(ApprovalRespond(approval_id=approval_id, decision="deny")))
    qtbot.waitUntil(lambda: server.traffic().count("member=CloseNotification") > closes_before,
                    timeout=10_000)
    qtbot.waitUntil(lambda: server.displayed() < shown_before, timeout=5_000)
    qtbot.waitUntil(lambda: controller.statuses.get(sid) == "idle", timeout=15_000)
    assert second.exists()

    # Quit while a turn runs: no question, a notice that it goes on (sent before the app is gone).
    fake_provider.script(Reply(deltas=[f"w{i} " for i in range(30)], delay=0.1))
    drive(qtbot, controller.link.call(PromptSubmit(session_id=sid, request_id="r3", text="explain")))
    qtbot.waitUntil(lambda: controller.statuses.get(sid) == "running", timeout=10_000)
    ended: list[bool] = []
    controller.exit_app = lambda: ended.append(True)
    controller.quit()
    qtbot.waitUntil(lambda: bool(ended), timeout=10_000)
    closing = [c for c in server.notify_calls() if "Turnkey closed" in c]
    assert len(closing) == 1
    assert "1 running turn keeps going in the background" in closing[0]


def test_with_no_way_to_reach_the_person_closing_the_last_window_quits(
    qtbot: Any, controller: Any
) -> None:
    assert controller.notifier.channel == "window"
    ended: list[bool] = []
    controller.exit_app = lambda: ended.append(True)
    controller.main.close()
    controller.last_window_closed()
    qtbot.waitUntil(lambda: bool(ended), timeout=10_000)
    assert not controller.background_told
