"""Windows stay on screen: the geometry arithmetic (desktop/qt/screens.py)."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect

from desktop.qt.screens import CASCADE_PX, cascaded, fitted

AREA = QRect(0, 32, 1280, 768)  # a screen with a top panel


def test_a_window_inside_the_area_stays_as_it_is() -> None:
    frame = QRect(100, 100, 600, 400)
    assert fitted(frame, AREA) == frame


def test_a_window_off_the_right_and_bottom_edges_is_moved_back_whole() -> None:
    assert fitted(QRect(1100, 700, 600, 400), AREA) == QRect(680, 400, 600, 400)


def test_a_window_above_the_panel_or_left_of_the_screen_is_moved_in() -> None:
    assert fitted(QRect(-300, 0, 600, 400), AREA) == QRect(0, 32, 600, 400)


def test_a_window_larger_than_the_screen_is_shrunk_to_it() -> None:
    assert fitted(QRect(50, 50, 3000, 2000), AREA) == AREA


def test_a_window_from_a_monitor_that_is_gone_comes_back() -> None:
    assert AREA.contains(fitted(QRect(2600, 300, 800, 600), AREA))


def test_new_windows_cascade_and_wrap_instead_of_leaving_the_screen() -> None:
    size = QRect(0, 0, 860, 720)
    at = QRect(AREA.x(), AREA.y(), size.width(), size.height())
    seen = []
    for _ in range(40):
        point = cascaded(at, size, AREA)
        at = QRect(point, at.size())
        seen.append(point)
        assert AREA.contains(at), f"window {len(seen)} at {point} leaves the screen"
    assert seen[0] == QPoint(AREA.x() + CASCADE_PX, AREA.y() + CASCADE_PX)
    assert len(set((p.x(), p.y()) for p in seen)) > 1
