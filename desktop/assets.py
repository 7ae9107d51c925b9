"""Where the app's bundled files are: `assets/` in a checkout, or inside a frozen bundle.

Icons come as PNGs rendered from the SVG sources in `assets/icons/` by
`assets/render_icons.py`; the app reads only the PNGs, so a bundle needs no SVG
image plugin.
"""

from __future__ import annotations

import sys
from pathlib import Path

APP_ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
TRAY_ICON_SIZES = (16, 22, 24, 32, 48, 64)
TRAY_STATES = ("idle", "working", "approval", "offline")


def assets_dir() -> Path:
    """`assets/` beside the code: the repository's, or the one PyInstaller unpacks."""
    if getattr(sys, "frozen", False):
        return Path(getattr(sys, "_MEIPASS", Path(sys.executable).parent)) / "assets"
    return Path(__file__).resolve().parents[1] / "assets"


def icons_dir() -> Path:
    return assets_dir() / "icons"


def svg_source(kind: str) -> Path:
    """The SVG a kind of icon is rendered from: "app" or "tray-<state>"."""
    return icons_dir() / ("turnkey.svg" if kind == "app" else f"{kind}.svg")


def icon_kinds() -> list[str]:
    return ["app", *(f"tray-{state}" for state in TRAY_STATES)]


def icon_files(kind: str) -> list[tuple[int, Path]]:
    """Every (size, PNG path) of one kind of icon, smallest first, whether or not the files exist.

    "app": the application icon in the freedesktop layout, hicolor/NxN/apps/turnkey.png;
    "tray-<state>" (idle, working, approval, offline): tray/<state>-N.png.
    """
    if kind == "app":
        return [(n, icons_dir() / "hicolor" / f"{n}x{n}" / "apps" / "turnkey.png") for n in APP_ICON_SIZES]
    state = kind.removeprefix("tray-")
    if kind == state or state not in TRAY_STATES:
        raise ValueError(f"unknown icon kind {kind!r}; expected 'app' or 'tray-<state>' ({TRAY_STATES})")
    return [(n, icons_dir() / "tray" / f"{state}-{n}.png") for n in TRAY_ICON_SIZES]
