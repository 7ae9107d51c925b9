"""Work-arounds for bugs of the pinned PySide6, each with the test that shows it."""

from __future__ import annotations

import ctypes
from typing import Any


def emit(signal: Any, *args: Any) -> None:
    """Emits a signal Qt itself declares (dataChanged, ...) from Python.

    PySide6 6.12's `emit` of a C++ signal returns `True` without owning a
    reference to it; each call then drops one reference Python never gave, and
    after enough of them the interpreter aborts ("deallocating True or False")
    at exit.  Signals declared in Python with `Signal()` are not affected.
    tests/desktop/test_compat.py fails when a PySide6 release fixes this (then
    this function should become a plain `signal.emit(*args)`).
    """
    result = signal.emit(*args)
    if isinstance(result, bool):
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(result))
