"""The PySide6 work-arounds in desktop/qt/compat.py are still needed, and they work."""

from __future__ import annotations

import sys
from typing import Any

from PySide6.QtCore import QObject

from desktop.qt.compat import emit


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
