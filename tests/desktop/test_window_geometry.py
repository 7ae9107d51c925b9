"""Windows always fully on screen: many new windows, and a layout saved on a larger or
another screen (desktop/qt/screens.py, wired in the controller)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRect

from desktop.qt.controller import Controller
from desktop.qt.screens import available

from .test_session_window import new_session


def on_screen(widget: Any) -> bool:
    return bool(available(widget).contains(widget.frameGeometry()))


def test_new_windows_never_cascade_off_the_screen(qtbot: Any, controller: Controller) -> None:
    sid = new_session(qtbot, controller)
    for _ in range(25):
        win = controller.open_session(sid, new_window=True)
        qtbot.waitExposed(win)
        qtbot.waitUntil(lambda w=win: on_screen(w), timeout=2_000)


def test_a_restored_window_from_a_bigger_screen_comes_back_on_screen(
    qtbot: Any, make_controller: Any
) -> None:
    first = make_controller()
    sid = new_session(qtbot, first)
    win = first.open_session(sid, new_window=True)
    qtbot.waitExposed(win)
    area = available(win)
    # As if saved on a wide monitor to the right that is gone now.
    win.setGeometry(QRect(area.right() + 400, area.bottom() - 100, area.width() + 300, 500))
    first.save_layout()
    first.quit()
    qtbot.waitUntil(lambda: first.link.client.state == "closed", timeout=10_000)
    again = make_controller(restore=True)
    qtbot.waitUntil(lambda: len(again.windows) == 1, timeout=15_000)
    restored = again.windows[0]
    qtbot.waitExposed(restored)
    qtbot.waitUntil(lambda: on_screen(restored), timeout=2_000)
    qtbot.waitUntil(lambda: on_screen(again.main), timeout=2_000)


def test_the_saved_session_is_the_windows_first_frame_not_the_start_page(
    qtbot: Any, make_controller: Any, desk_backend: Any
) -> None:
    """At start-up the session saved beside the sidebar is opened before the window shows (its
    page follows once connected), so the first frame is its conversation, and the empty list
    does not say "No sessions yet" before the listing has come."""
    from desktop.qt.aio import settle

    from .conftest import drive

    first = make_controller()
    sid = new_session(qtbot, first)
    first.main.show_session(sid)
    first.save_layout()
    first.quit()
    qtbot.waitUntil(lambda: first.link.client.state == "closed", timeout=10_000)

    again = Controller(desk_backend.data_dir, restart_after_s=None)
    again.exit_app = lambda: None
    try:
        again.start(restore=True)
        assert again.link.current != "connected"  # nothing has been awaited yet
        assert again.main.isVisible()
        shown = again.main.current
        assert shown is not None
        assert shown.session_id == sid
        assert again.main.stack.currentWidget() is shown
        assert not again.main.sidebar.empty.isVisible()
        assert shown.state.title == ""
        qtbot.waitUntil(lambda: shown.state.loaded, timeout=15_000)
        assert again.main.current is shown, "the same conversation, filled in"
        qtbot.waitUntil(lambda: again.main.sidebar.selected_id() == sid, timeout=15_000)
    finally:
        again.main.close()
        drive(qtbot, settle())
        drive(qtbot, again.notifier.stop())
        drive(qtbot, again.link.close())
