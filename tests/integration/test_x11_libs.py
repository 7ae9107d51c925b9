"""scripts/x11-libs on this machine: afterwards the xcb plugin loads every library, the map
agrees with dpkg, and with libraries hidden it names exactly their packages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MULTIARCH = Path("/usr/lib/x86_64-linux-gnu")
HIDDEN = ("libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not shutil.which("ldd"),
                                reason="ldd on Linux")


def script_env() -> dict[str, str]:
    return {**os.environ, "TURNKEY_PYTHON": sys.executable}


def plugin() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("PySide6")
    assert spec is not None
    assert spec.origin is not None
    return Path(spec.origin).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"


def test_after_x11_libs_the_xcb_plugin_finds_every_library() -> None:
    done = subprocess.run([ROOT / "scripts" / "x11-libs"], env=script_env(), capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    ldd = subprocess.run(["ldd", plugin()], capture_output=True, text=True, check=True).stdout
    assert "not found" not in ldd
    assert "libxcb-icccm.so.4 =>" in ldd


@pytest.mark.skipif(not shutil.which("dpkg"), reason="a Debian system")
def test_the_map_agrees_with_dpkg() -> None:
    from tests.unit.test_x11_libs import x11

    wrong = {}
    for soname, package in x11.PACKAGES.items():
        found = subprocess.run(["dpkg", "-S", f"*/{soname}"], capture_output=True, text=True, check=False)
        owners = {line.split(":")[0] for line in found.stdout.splitlines()}
        if found.returncode == 0 and package not in owners:
            wrong[soname] = (package, owners)
    assert not wrong


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not MULTIARCH.is_dir(),
                    reason="hides libraries in a private mount namespace: root and unshare")
def test_with_libraries_hidden_it_names_their_packages(tmp_path: Path) -> None:
    # A hard-linked copy of the library folder without three libraries, mounted over the real
    # one in a mount namespace only this command sees: ldd's genuine "not found".
    copy = tmp_path / "lib"
    if subprocess.run(["cp", "-al", MULTIARCH, copy], capture_output=True, check=False).returncode:
        pytest.skip("the library folder is on another file system than the temp folder")
    for pattern in HIDDEN:
        for f in copy.glob(pattern + "*"):
            f.unlink()
    # As a user who is not root (an `id` that says 1000): the exact line to run, and a failure.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").write_text("#!/bin/sh\necho 1000\n")
    (bin_dir / "id").chmod(0o755)
    check = f"{sys.executable} {ROOT / 'scripts' / 'x11_libs.py'}"
    as_user = f"PATH={bin_dir}:$PATH {ROOT / 'scripts' / 'x11-libs'}"
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", f"mount --bind {copy} {MULTIARCH} && {check} && {as_user}"],
        env=script_env(), capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.splitlines()[0] == "libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1", done
    assert done.returncode == 1, done
    assert "run: sudo apt-get install libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1" in done.stderr
