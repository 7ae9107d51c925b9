"""scripts/x11-libs on this machine: afterwards the xcb plugin loads every library, the map
agrees with dpkg, and with libraries hidden it names exactly their packages.  And `turnkey`
itself: with a library of the xcb plugin missing it says which, and what to install, and
exits 1 before Qt (which would abort with a core dump) and before any backend starts."""

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


def library_copy_without(tmp_path: Path, hidden: tuple[str, ...]) -> Path:
    """A hard-linked copy of the library folder without `hidden`, to mount over the real one in
    a mount namespace only one command sees: ldd's (and the loader's) genuine "not found"."""
    copy = tmp_path / "lib"
    if subprocess.run(["cp", "-al", MULTIARCH, copy], capture_output=True, check=False).returncode:
        pytest.skip("the library folder is on another file system than the temp folder")
    for pattern in hidden:
        for f in copy.glob(pattern + "*"):
            f.unlink()
    return copy


def window_env(**extra: str) -> dict[str, str]:
    """The environment of a desktop session on X11 (the display need not exist: nothing may
    get as far as connecting to it)."""
    gone = ("QT_QPA_PLATFORM", "QT_QPA_PLATFORM_PLUGIN_PATH", "XDG_SESSION_TYPE",
            "WAYLAND_DISPLAY", "TURNKEY_REMOTE")
    return {**{k: v for k, v in os.environ.items() if k not in gone}, "DISPLAY": ":77", **extra}


def assert_refused_before_qt(done: subprocess.CompletedProcess[str], data_dir: Path) -> None:
    """Exit 1 of its own: not Qt's abort (a signal, a core dump), and no backend started (it
    would have made the data folder, with backend.json and its log)."""
    assert done.returncode == 1, done
    assert "Qt platform plugin" not in done.stderr, done.stderr
    assert "core dumped" not in done.stderr.lower(), done.stderr
    assert not data_dir.exists(), sorted(data_dir.rglob("*"))


def stub_plugin(folder: Path, needs: str) -> None:
    """A libqxcb.so in `folder` that needs a library `needs` names: linked against a throwaway
    one with that soname, which is then deleted."""
    source = folder / "src"
    source.mkdir()
    (source / "stub.c").write_text("int turnkey_stub(void) { return 1; }\n")
    (source / "plugin.c").write_text("extern int turnkey_stub(void);\n"
                                     "int plugin_entry(void) { return turnkey_stub(); }\n")
    library = source / needs
    gcc = ["gcc", "-shared", "-fPIC"]
    subprocess.run([*gcc, "-o", library, f"-Wl,-soname,{needs}", source / "stub.c"], check=True)
    subprocess.run([*gcc, "-o", folder / "libqxcb.so", source / "plugin.c", f"-L{source}",
                    f"-l:{needs}"], check=True)
    shutil.rmtree(source)


@pytest.mark.skipif(not shutil.which("gcc"), reason="builds a stub platform plugin with gcc")
def test_turnkey_names_a_missing_library_of_the_plugin_qt_would_load(tmp_path: Path) -> None:
    plugins = tmp_path / "platforms"
    plugins.mkdir()
    stub_plugin(plugins, "libturnkey-stub.so.1")
    data_dir = tmp_path / "data"
    done = subprocess.run([sys.executable, "-m", "desktop.cli", "--data-dir", str(data_dir)],
                          env=window_env(QT_QPA_PLATFORM_PLUGIN_PATH=str(plugins)), cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.stderr == ("turnkey: cannot open the window: libturnkey-stub.so.1 is missing. "
                           "No package is known for libturnkey-stub.so.1: install the one that "
                           "provides it (`apt-file search NAME` finds it).\n")
    assert_refused_before_qt(done, data_dir)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not MULTIARCH.is_dir(),
                    reason="hides a library in a private mount namespace: root and unshare")
def test_turnkey_says_which_package_to_install_for_a_hidden_library(tmp_path: Path) -> None:
    # Every library of the table is installed here, so a stub needing one would find it: the
    # real plugin, with libxcb-cursor hidden from this one command instead.
    copy = library_copy_without(tmp_path, ("libxcb-cursor.so.0",))
    data_dir = tmp_path / "data"
    command = f"mount --bind {copy} {MULTIARCH} && exec {sys.executable} -m desktop.cli " \
              f"--data-dir {data_dir}"
    done = subprocess.run(["unshare", "-m", "sh", "-c", command], env=window_env(), cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.stderr == ("turnkey: cannot open the window: libxcb-cursor.so.0 is missing. "
                           "Install it with: sudo apt-get install libxcb-cursor0\n")
    assert_refused_before_qt(done, data_dir)


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
    copy = library_copy_without(tmp_path, HIDDEN)
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
