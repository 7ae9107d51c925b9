"""scripts/x11_libs.py: reading ldd's output (real output captured on Debian 12, three
libraries hidden) and naming the Debian packages, and checking a PyInstaller bundle."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

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
