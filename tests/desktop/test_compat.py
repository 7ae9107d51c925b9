"""The PySide6 work-arounds in desktop/qt/compat.py are still needed, and they work."""

from __future__ import annotations

import sys
from typing import Any

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QPlainTextEdit

from desktop.qt.compat import emit, set_placeholder


def test_emitting_a_qt_signal_from_python_drops_a_reference_to_true(qapp: Any) -> None:
    obj = QObject()
    before = sys.getrefcount(True)
    for _ in range(10):
        obj.objectNameChanged.emit("x")
    lost = before - sys.getrefcount(True)
    # Give the references back so this test itself does not harm the interpreter.
    for _ in range(lost):
        emit_fix_one()
    assert lost == 10, "PySide6 no longer loses references on emit: make compat.emit a plain emit"


def emit_fix_one() -> None:
    import ctypes

    ctypes.pythonapi.Py_IncRef(ctypes.py_object(True))


def test_compat_emit_keeps_the_count(qapp: Any) -> None:
    obj = QObject()
    seen: list[str] = []
    obj.objectNameChanged.connect(seen.append)
    before = sys.getrefcount(True)
    for _ in range(10):
        emit(obj.objectNameChanged, "x")
    after = sys.getrefcount(True)
    assert before <= after <= before + 2  # nothing lost per call (one may be cached by a slot)
    assert seen == ["x"] * 10


class Paints(QObject):
    """Counts the paint events of the widget it watches."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.count += 1
        return False


def test_a_new_placeholder_over_an_empty_box_is_painted_only_through_compat(qtbot: Any) -> None:
    edit = QPlainTextEdit()
    qtbot.addWidget(edit)
    edit.setPlaceholderText("Steer the running turn…")
    edit.show()
    qtbot.waitExposed(edit)
    paints = Paints()
    edit.viewport().installEventFilter(paints)
    qtbot.wait(100)  # (its first paints are done)
    paints.count = 0
    edit.setPlaceholderText("Message Turnkey…")
    qtbot.wait(100)
    assert paints.count == 0, \
        "Qt now repaints a changed placeholder: make compat.set_placeholder a plain setPlaceholderText"
    set_placeholder(edit, "Steer the running turn…")
    qtbot.waitUntil(lambda: paints.count > 0, timeout=2_000)
    assert edit.placeholderText() == "Steer the running turn…"
