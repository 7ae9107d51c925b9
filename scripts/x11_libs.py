"""Which Debian packages Qt's X11 platform plugin still needs on this machine, found with ldd.

`python scripts/x11_libs.py` prints the missing packages on one line (nothing when none
is missing) and exits 0; an unknown missing library is printed to stderr and exits 1.
scripts/x11-libs installs what it prints.  Run it with the interpreter whose PySide6 is
meant (the venv's).

`python scripts/x11_libs.py --bundle dist/turnkey` checks a PyInstaller build instead: it
copies the xcb helper libraries only when the build machine has them (otherwise it warns
"could not resolve" and the app opens no window where they are missing), so the build
fails unless each of them is loaded from the bundle.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
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
_RESOLVED = re.compile(r"^\s*(\S+)\s+=>\s+(/\S+)", re.MULTILINE)
# What a build must carry: PyInstaller bundles these when found (libxcb.so.1 itself, libGL and
# libEGL it leaves to the system, see docs/PLATFORM-NOTES).
_BUNDLED = re.compile(r"^(libxcb-|libX11|libxkbcommon)")


def not_found(ldd_output: str) -> list[str]:
    """The sonames ldd reports as `not found`, each once, in the order first seen."""
    return list(dict.fromkeys(_NOT_FOUND.findall(ldd_output)))


def packages_for(sonames: list[str]) -> tuple[list[str], list[str]]:
    """(packages to install, sorted and each once; sonames no package is known for)."""
    known = sorted({PACKAGES[s] for s in sonames if s in PACKAGES})
    return known, [s for s in sonames if s not in PACKAGES]


def from_outside(ldd_output: str, bundle: Path) -> list[str]:
    """The libraries a bundle must carry that ldd found elsewhere, or not at all."""
    inside = str(bundle.resolve()) + "/"
    found = dict(_RESOLVED.findall(ldd_output))
    wanted = [s for s in PACKAGES if _BUNDLED.match(s)]
    return [s for s in wanted if s in found and not found[s].startswith(inside)] + [
        s for s in not_found(ldd_output) if _BUNDLED.match(s)]


def plugin_files() -> list[Path]:
    """The xcb platform plugin, the Qt library it loads and the GL integrations it loads
    next, from PySide6's wheel (not imported: importing it needs some of these libraries)."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or spec.origin is None:
        raise SystemExit("x11_libs: PySide6 is not installed for " + sys.executable)
    qt = Path(spec.origin).parent / "Qt"
    gl = qt / "plugins" / "xcbglintegrations"
    return [qt / "plugins" / "platforms" / "libqxcb.so", qt / "lib" / "libQt6XcbQpa.so.6",
            gl / "libqxcb-glx-integration.so", gl / "libqxcb-egl-integration.so"]


def missing() -> list[str]:
    """The sonames the plugin cannot load here."""
    output = ""
    for path in plugin_files():
        output += subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=False).stdout
    return not_found(output)


def check_bundle(app: Path) -> int:
    internal = app / "_internal"
    plugins = internal / "PySide6" / "Qt" / "plugins"
    output = ""
    for plugin in [plugins / "platforms" / "libqxcb.so", *plugins.glob("xcbglintegrations/*.so")]:
        # The bootloader puts _internal on the library path; ldd sees what the app will load.
        output += subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, check=True,
                                 env={"LD_LIBRARY_PATH": str(internal)}).stdout
    outside = from_outside(output, internal)
    if outside:
        print(f"x11_libs: the build does not carry {' '.join(outside)}; install "
              f"{' '.join(packages_for(outside)[0])} on the build machine (scripts/x11-libs) and "
              "build again", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--bundle"] and len(argv) == 2:
        return check_bundle(Path(argv[1]))
    packages, unknown = packages_for(missing())
    print(" ".join(packages))
    if unknown:
        print(f"x11_libs: no package known for {' '.join(unknown)} (add it to scripts/x11_libs.py)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
