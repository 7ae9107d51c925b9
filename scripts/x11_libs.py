"""Which Debian packages Qt's X11 platform plugin still needs on this machine, found with ldd
(desktop/x11_libs.py holds the table and the check; `turnkey` runs it before opening a window).

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

import re
import subprocess
import sys
from pathlib import Path

# This checkout's desktop package, not an installed copy's: the table is there, once.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from desktop.x11_libs import PACKAGES, missing, not_found, packages_for

__all__ = ["PACKAGES", "check_bundle", "from_outside", "main", "missing", "not_found",
           "packages_for"]

_RESOLVED = re.compile(r"^\s*(\S+)\s+=>\s+(/\S+)", re.MULTILINE)
# What a build must carry: PyInstaller bundles these when found (libxcb.so.1 itself, libGL and
# libEGL it leaves to the system, see docs/PLATFORM-NOTES).
_BUNDLED = re.compile(r"^(libxcb-|libX11|libxkbcommon)")


def from_outside(ldd_output: str, bundle: Path) -> list[str]:
    """The libraries a bundle must carry that ldd found elsewhere, or not at all."""
    inside = str(bundle.resolve()) + "/"
    found = dict(_RESOLVED.findall(ldd_output))
    wanted = [s for s in PACKAGES if _BUNDLED.match(s)]
    return [s for s in wanted if s in found and not found[s].startswith(inside)] + [
        s for s in not_found(ldd_output) if _BUNDLED.match(s)]


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
        print(f"x11_libs: no package known for {' '.join(unknown)} (add it to desktop/x11_libs.py)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
