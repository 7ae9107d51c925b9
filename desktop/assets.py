"""Where the app's bundled files are: `assets/` in a checkout, or inside a frozen bundle.

Icons come as PNGs rendered from the SVG sources in `assets/icons/` by
`assets/render_icons.py`; the app reads only the PNGs, so a bundle needs no SVG
image plugin.  Three kinds: the application icon ("app"), the tray's states
("tray-<state>"), and the interface's monochrome line icons ("ui-<name>", drawn
black on transparent and tinted to the theme by `desktop.qt.theme.icon`).
"""

from __future__ import annotations

import sys
from pathlib import Path

APP_ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
TRAY_ICON_SIZES = (16, 22, 24, 32, 48, 64)
TRAY_STATES = ("idle", "working", "approval", "offline")
UI_ICON_SIZES = (16, 20, 24, 32, 48)  # 48: a 24 px icon on a 2x screen
UI_ICONS = ("new", "search", "send", "stop", "settings", "pop-out", "sidebar", "allow", "deny",
            "folder", "trash", "rename", "more", "jump-down", "queue", "warning", "tool", "copy",
            "chevron-down", "schedule", "paperclip")


# Resolved once: a window's icons ask for it dozens of times while the app starts.
_CHECKOUT_ASSETS = Path(__file__).resolve().parents[1] / "assets"


def assets_dir() -> Path:
    """`assets/` beside the code: the repository's, or the one PyInstaller unpacks."""
    if getattr(sys, "frozen", False):
        return Path(getattr(sys, "_MEIPASS", Path(sys.executable).parent)) / "assets"
    return _CHECKOUT_ASSETS


def icons_dir() -> Path:
    return assets_dir() / "icons"


def svg_source(kind: str) -> Path:
    """The SVG a kind of icon is rendered from: "app", "tray-<state>" or "ui-<name>"."""
    if kind.startswith("ui-"):
        return icons_dir() / "ui" / f"{kind.removeprefix('ui-')}.svg"
    return icons_dir() / ("turnkey.svg" if kind == "app" else f"{kind}.svg")


def icon_kinds() -> list[str]:
    """The product's own marks: the app icon and the tray's states."""
    return ["app", *(f"tray-{state}" for state in TRAY_STATES)]


def ui_icon_kinds() -> list[str]:
    """The interface's line icons, "ui-<name>" for each of `UI_ICONS`."""
    return [f"ui-{name}" for name in UI_ICONS]


def icon_files(kind: str) -> list[tuple[int, Path]]:
    """Every (size, PNG path) of one kind of icon, smallest first, whether or not the files exist.

    "app": the application icon in the freedesktop layout, hicolor/NxN/apps/turnkey.png;
    "tray-<state>" (idle, working, approval, offline): tray/<state>-N.png;
    "ui-<name>" (one of `UI_ICONS`): ui/<name>-N.png.
    """
    if kind == "app":
        return [(n, icons_dir() / "hicolor" / f"{n}x{n}" / "apps" / "turnkey.png") for n in APP_ICON_SIZES]
    name = kind.removeprefix("ui-")
    if kind != name and name in UI_ICONS:
        return [(n, icons_dir() / "ui" / f"{name}-{n}.png") for n in UI_ICON_SIZES]
    state = kind.removeprefix("tray-")
    if kind == state or state not in TRAY_STATES:
        raise ValueError(f"unknown icon kind {kind!r}; expected 'app', 'tray-<state>' ({TRAY_STATES}) "
                         f"or 'ui-<name>' ({UI_ICONS})")
    return [(n, icons_dir() / "tray" / f"{state}-{n}.png") for n in TRAY_ICON_SIZES]
