"""`turnkey` with no arguments: the desktop app on a qasync loop."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

import qasync
from PySide6.QtWidgets import QApplication  # PySide6 before qasync: it picks the binding

from desktop.qt.controller import Controller, apply_palette
from desktop.qt.tray import app_icon


def run(data_dir: Path, restore: bool = True) -> int:
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or os.environ.get("QT_QPA_PLATFORM")
    ):
        # Qt would abort with a misleading message about xcb libraries.
        print("turnkey: no display to open a window on (DISPLAY is not set). Use `turnkey chat` "
              "for the terminal, or run the app from a desktop session.", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    app.setApplicationName("Turnkey")
    app.setApplicationDisplayName("Turnkey")
    app.setDesktopFileName("turnkey")
    app.setWindowIcon(app_icon())
    apply_palette(app)

    async def main() -> None:
        controller = Controller(data_dir)
        # With a tray icon, closing the last window leaves the app in the tray; without one
        # there would be no way back, so the app ends (the backend goes on either way).
        app.setQuitOnLastWindowClosed(not controller.notifier.available)
        done = asyncio.get_running_loop().create_future()
        def finish() -> None:
            if not done.done():
                done.set_result(None)

        app.aboutToQuit.connect(finish)
        signal.signal(signal.SIGINT, lambda *_: controller.quit())
        controller.start(restore)
        await done

    try:
        qasync.run(main())
    except asyncio.CancelledError:
        pass
    return 0
