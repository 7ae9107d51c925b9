"""The dark palette shows disabled controls as disabled (they used to inherit the active
colours, so a disabled Stop button looked like an enabled one)."""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette

from desktop.qt.controller import _dark


def lightness(color: QColor) -> float:
    return color.lightnessF()


def test_disabled_text_is_dimmer_than_active_text_in_the_dark_palette() -> None:
    p = _dark()
    role, group = QPalette.ColorRole, QPalette.ColorGroup
    for r in (role.WindowText, role.Text, role.ButtonText):
        active, disabled = p.color(group.Active, r), p.color(group.Disabled, r)
        assert lightness(active) - lightness(disabled) > 0.25, f"{r}: {active.name()} vs {disabled.name()}"
        # ... and still readable on its background.
        assert lightness(disabled) - lightness(p.color(group.Disabled, role.Button)) > 0.2
