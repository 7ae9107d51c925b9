"""Which system libraries Qt's X11 platform plugin cannot load here, found with ldd, and the
Debian package that holds each: what `turnkey` says instead of letting Qt abort.

Qt-free on purpose: importing PySide6's Qt modules already needs some of these libraries
(libGL, libxkbcommon), and a plugin Qt cannot load makes it abort with a core dump.
scripts/x11_libs.py (what scripts/x11-libs installs, the bundle's check) uses this table.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

# soname -> the Debian 12 package holding it (checked with `dpkg -S` on Debian 12): every
# library outside Qt's own and the base system that libqxcb.so, libQt6XcbQpa.so.6 and the
# xcb GL integration plugins load, directly or not.
PACKAGES = {
    "libxcb.so.1": "libxcb1",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-glx.so.0": "libxcb-glx0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libX11.so.6": "libx11-6",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libXau.so.6": "libxau6",
    "libXdmcp.so.6": "libxdmcp6",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libGL.so.1": "libgl1",
    "libEGL.so.1": "libegl1",
    "libGLX.so.0": "libglx0",
    "libGLdispatch.so.0": "libglvnd0",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3",
}

_NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found\s*$", re.MULTILINE)


def not_found(ldd_output: str) -> list[str]:
    """The sonames ldd reports as `not found`, each once, in the order first seen."""
    return list(dict.fromkeys(_NOT_FOUND.findall(ldd_output)))


def packages_for(sonames: list[str]) -> tuple[list[str], list[str]]:
    """(packages to install, sorted and each once; sonames no package is known for)."""
    known = sorted({PACKAGES[s] for s in sonames if s in PACKAGES})
    return known, [s for s in sonames if s not in PACKAGES]


def qt_folder() -> Path | None:
    """PySide6's Qt folder (plugins/, lib/): in the PyInstaller bundle under sys._MEIPASS,
    else the wheel's, found without importing PySide6 (that would load Qt's libraries)."""
    bundle = getattr(sys, "_MEIPASS", None)
    if getattr(sys, "frozen", False) and bundle:
        return Path(bundle) / "PySide6" / "Qt"
    spec = importlib.util.find_spec("PySide6")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "Qt"


def platform_plugin(env: Mapping[str, str]) -> Path | None:
    """The libqxcb.so Qt will load: from $QT_QPA_PLATFORM_PLUGIN_PATH when set (Qt looks
    there first), else PySide6's own; None when there is none."""
    chosen = env.get("QT_QPA_PLATFORM_PLUGIN_PATH", "")
    if chosen and (Path(chosen) / "libqxcb.so").is_file():
        return Path(chosen) / "libqxcb.so"
    qt = qt_folder()
    if qt is None or not (qt / "plugins" / "platforms" / "libqxcb.so").is_file():
        return None
    return qt / "plugins" / "platforms" / "libqxcb.so"


def plugin_files() -> list[Path]:
    """The xcb platform plugin, the Qt library it loads and the GL integrations it loads
    next, from PySide6's wheel: all that scripts/x11-libs installs libraries for."""
    qt = qt_folder()
    if qt is None:
        raise SystemExit("x11_libs: PySide6 is not installed for " + sys.executable)
    gl = qt / "plugins" / "xcbglintegrations"
    return [qt / "plugins" / "platforms" / "libqxcb.so", qt / "lib" / "libQt6XcbQpa.so.6",
            gl / "libqxcb-glx-integration.so", gl / "libqxcb-egl-integration.so"]


def ldd(paths: list[Path], env: Mapping[str, str] | None = None) -> str:
    """ldd's output for each of `paths`, joined; it lists every library loaded, not only
    the direct ones.  Raises OSError when ldd cannot run."""
    return "".join(subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=False,
                                  env=env, timeout=30).stdout for path in paths)


def missing() -> list[str]:
    """The sonames PySide6's xcb plugin or its GL integrations cannot load here."""
    return not_found(ldd(plugin_files()))


def opens_on_x11(env: Mapping[str, str]) -> bool:
    """Whether Qt would pick its xcb plugin: a DISPLAY, and QT_QPA_PLATFORM unset or naming
    xcb first.  Unset on a Wayland session, Qt tries Wayland first: not ours to block."""
    if not env.get("DISPLAY"):
        return False
    chosen = env.get("QT_QPA_PLATFORM", "")
    if chosen:
        return chosen.split(";")[0].split(":")[0] == "xcb"
    return not (env.get("XDG_SESSION_TYPE") == "wayland" and env.get("WAYLAND_DISPLAY"))


def window_problem(env: Mapping[str, str] = os.environ) -> str | None:
    """What keeps Qt from opening a window on X11 here, in words with the packages to
    install; None when nothing does, when Qt would not use X11, or when the check itself
    cannot run (no ldd, no plugin): a start is never blocked on the check."""
    if not opens_on_x11(env):
        return None
    plugin = platform_plugin(env)
    if plugin is None:
        return None
    try:
        absent = not_found(ldd([plugin], env))
    except (OSError, subprocess.SubprocessError):
        return None
    return missing_in_words(absent) if absent else None


def missing_in_words(sonames: list[str]) -> str:
    """`sonames` missing, for a person: the packages to install, and which no package is
    known for (named, so it can be looked up)."""
    packages, unknown = packages_for(sonames)
    are = "is" if len(sonames) == 1 else "are"
    words = f"cannot open the window: {', '.join(sonames)} {are} missing."
    if packages:
        them = "it" if len(sonames) - len(unknown) == 1 else "them"
        words += f" Install {them} with: sudo apt-get install {' '.join(packages)}"
        words += "." if unknown else ""
    if unknown:
        words += (f" No package is known for {', '.join(unknown)}: install the one that "
                  "provides it (`apt-file search NAME` finds it).")
    return words
