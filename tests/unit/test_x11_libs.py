"""scripts/x11_libs.py and desktop/x11_libs.py: reading ldd's output (real output captured on
Debian 12, three libraries hidden) and naming the Debian packages, checking a PyInstaller
bundle, and what `turnkey` says when a library is missing."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from desktop import x11_libs as words

ROOT = Path(__file__).resolve().parents[2]
CAPTURED = Path(__file__).parent / "ldd"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("x11_libs", ROOT / "scripts" / "x11_libs.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


x11 = load()


def test_missing_libraries_are_read_once_each_from_real_ldd_output() -> None:
    # libqxcb.so with libxcb-cursor, -icccm and -keysyms hidden: ldd names each twice (the
    # plugin and libQt6XcbQpa.so.6 both need them).
    output = (CAPTURED / "libqxcb-missing-three.txt").read_text()
    assert output.count("not found") == 6
    missing = x11.not_found(output)
    assert missing == ["libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1"]
    assert x11.packages_for(missing) == (["libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1"], [])


def test_nothing_is_missing_when_ldd_resolved_everything() -> None:
    assert x11.not_found((CAPTURED / "libqxcb-complete.txt").read_text()) == []
    assert x11.packages_for([]) == ([], [])


def test_every_system_library_of_the_captured_plugin_has_a_package_or_is_base_system() -> None:
    output = (CAPTURED / "libqxcb-complete.txt").read_text()
    system = [line.split()[0] for line in output.splitlines()
              if "=> /lib/" in line or "=> /usr/lib/" in line]
    assert "libxcb-icccm.so.4" in system
    unmapped = {s for s in system if s not in x11.PACKAGES}
    # Essential or priority-required on Debian 12: there on every installation.
    base = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libz.so.1", "libzstd.so.1",
            "libpcre2-8.so.0", "libpng16.so.16", "libbrotlidec.so.1", "libbrotlicommon.so.1",
            "libexpat.so.1", "libpthread.so.0", "libdl.so.2", "libbsd.so.0", "libmd.so.0",
            "libsystemd.so.0", "libcap.so.2", "libgcrypt.so.20", "libgpg-error.so.0", "liblzma.so.5",
            "liblz4.so.1"}
    assert unmapped <= base, sorted(unmapped - base)


def test_a_library_without_a_known_package_is_reported_not_dropped() -> None:
    output = "\tlibxcb-icccm.so.4 => not found\n\tlibxcb-new.so.9 => not found\n"
    assert x11.packages_for(x11.not_found(output)) == (["libxcb-icccm4"], ["libxcb-new.so.9"])


def test_a_bundle_that_loads_xcb_libraries_from_the_system_is_caught() -> None:
    # A real build with the two libraries removed from _internal, as when the build machine
    # lacked them: ldd (LD_LIBRARY_PATH=_internal) finds them on this system instead.
    bundle = Path("/tmp/tkfake/turnkey/_internal")
    output = (CAPTURED / "bundle-libqxcb-two-from-system.txt").read_text()
    assert x11.from_outside(output, bundle) == ["libxcb-icccm.so.4", "libxcb-keysyms.so.1"]
    complete = (CAPTURED / "bundle-libqxcb-complete.txt").read_text()
    assert x11.from_outside(complete, Path("/tmp/tkdist/turnkey/_internal")) == []
    # Where the target lacks them altogether, ldd says so.
    assert x11.from_outside("\tlibxcb-keysyms.so.1 => not found\n", bundle) == ["libxcb-keysyms.so.1"]


def test_the_words_name_every_missing_library_and_the_packages_to_install() -> None:
    assert words.missing_in_words(["libxcb-cursor.so.0"]) == (
        "cannot open the window: libxcb-cursor.so.0 is missing. "
        "Install it with: sudo apt-get install libxcb-cursor0")
    assert words.missing_in_words(["libxcb-icccm.so.4", "libxcb-cursor.so.0"]) == (
        "cannot open the window: libxcb-icccm.so.4, libxcb-cursor.so.0 are missing. "
        "Install them with: sudo apt-get install libxcb-cursor0 libxcb-icccm4")
    # One without a known package: named as such, the other still installable.
    assert words.missing_in_words(["libxcb-cursor.so.0", "libxcb-new.so.9"]) == (
        "cannot open the window: libxcb-cursor.so.0, libxcb-new.so.9 are missing. "
        "Install it with: sudo apt-get install libxcb-cursor0. No package is known for "
        "libxcb-new.so.9: install the one that provides it (`apt-file search NAME` finds it).")


def test_only_a_start_on_x11_is_checked() -> None:
    assert words.opens_on_x11({"DISPLAY": ":0"})
    assert words.opens_on_x11({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb"})
    assert words.opens_on_x11({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb:dpi=96;wayland"})
    assert not words.opens_on_x11({})
    assert not words.opens_on_x11({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"})
    assert not words.opens_on_x11({"DISPLAY": ":0", "QT_QPA_PLATFORM": "wayland;xcb"})
    # A Wayland session with XWayland: Qt tries Wayland first.
    assert not words.opens_on_x11({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0",
                                   "XDG_SESSION_TYPE": "wayland"})
    assert words.window_problem({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}) is None


def test_without_ldd_the_start_goes_on(tmp_path: Path) -> None:
    # The check must never be what stops a start: no ldd on PATH, no words.
    (tmp_path / "libqxcb.so").write_bytes(b"")
    assert words.window_problem({"DISPLAY": ":0", "PATH": str(tmp_path),
                                 "QT_QPA_PLATFORM_PLUGIN_PATH": str(tmp_path)}) is None
