"""Work-arounds for bugs of the pinned PySide6, each with the test that shows it."""

from __future__ import annotations

import ctypes
import sys
from typing import Any

from PySide6.QtWidgets import QPlainTextEdit


def keep_none_alive() -> None:
    """PySide6 6.12 returns `None` from every wrapped C++ `void` method (`setText`, `update`,
    `QPainter.save`, `QTextDocument.setMarkdown`, ...) without a reference of its own, so
    each such call takes one reference from `None`; `emit` does the same to `True`.  On
    Python 3.11 these start with a few thousand, and after that many calls the process
    aborts ("deallocating None") — a session window painting and paging a long transcript
    gets there within seconds.  Python 3.12+ makes them immortal; here each gets 2**40 extra
    references once, which no process can use up.  Called when this module is imported
    (every Qt module of the app imports it).
    """
    if sys.version_info < (3, 12) and sys.implementation.name == "cpython":
        for singleton in (None, True, False):
            ctypes.c_ssize_t.from_address(id(singleton)).value += 1 << 40


keep_none_alive()


def emit(signal: Any, *args: Any) -> None:
    """Emits a signal Qt itself declares (dataChanged, ...) from Python.

    PySide6 6.12's `emit` of a C++ signal returns `True` without owning a
    reference to it; each call then drops one reference Python never gave, and
    after enough of them the interpreter aborts ("deallocating True or False")
    at exit.  Signals declared in Python with `Signal()` do the same.  (`keep_none_alive`
    already makes that harmless; this keeps the count honest anyway.)
    tests/desktop/test_compat.py fails when a PySide6 release fixes this (then
    this function should become a plain `signal.emit(*args)`).
    """
    result = signal.emit(*args)
    if isinstance(result, bool):
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(result))


def set_placeholder(edit: QPlainTextEdit, text: str) -> None:
    """Sets an editor's placeholder text, and shows it.

    Qt 6.12's `QPlainTextEdit.setPlaceholderText` repaints only when the placeholder appears
    or goes (`updatePlaceholderVisibility`), so a new text over an empty box stays unseen,
    the old one on the screen, until something else repaints it: the message box went on
    saying "Steer the running turn…" after the turn had ended.
    tests/desktop/test_compat.py fails when a release repaints it itself.
    """
    edit.setPlaceholderText(text)
    edit.viewport().update()
