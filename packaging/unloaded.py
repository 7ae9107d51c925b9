"""What the bundle holds but a real session never loads (packaging/measure-session runs it).

    python packaging/unloaded.py dist/turnkey PROBE_DIR [--all]

PROBE_DIR holds one PID.json per Python process of a session run from the source tree under
packaging/probe/ (its sitecustomize records sys.modules and /proc/self/maps); only those that
import from this virtualenv count (run it with .venv/bin/python).  Printed, largest
first: the bundle's shared libraries no process mapped, and the top-level Python packages of its
archive no process imported, with their sizes.  A file listed here is a candidate to leave out,
not a verdict: a path the session did not walk (an encrypted Matrix room, Wayland) may need it.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

MIB = 1024 * 1024
_VERSION = re.compile(r"\.so(\.\d+)*$")


@dataclass(frozen=True)
class Session:
    """The union over a session's processes: modules imported and files mapped."""

    modules: frozenset[str]
    mapped: frozenset[str]

    @classmethod
    def read(cls, probe_dir: Path) -> Session:
        modules: set[str] = set()
        mapped: set[str] = set()
        records = sorted(probe_dir.glob("*.json"))
        if not records:
            raise SystemExit(f"unloaded: no PID.json in {probe_dir}: run packaging/measure-session")
        ours = {Path(entry).resolve() for entry in sys.path if entry.endswith("site-packages")}
        for record in records:
            data = json.loads(record.read_text())
            if not ours & {Path(entry).resolve() for entry in data["path"]}:
                continue  # another environment's Python (the test homeserver's): not the app's
            modules.update(data["modules"])
            mapped.update(data["mapped"])
        return cls(frozenset(modules), frozenset(mapped))

    def loaded(self, relative: str) -> bool:
        """Whether a bundle file (path under _internal/) was mapped: the same path under
        site-packages or lib/python3.11, or for a system library copied to the top level,
        the same name whatever its version suffix (maps show libX11.so.6.4.0)."""
        if any(path.endswith("/" + relative) for path in self.mapped):
            return True
        if "/" in relative:
            return False
        stem = _VERSION.sub("", relative)
        return any(_VERSION.sub("", path.rsplit("/", 1)[1]) == stem for path in self.mapped)


def shared_libraries(internal: Path) -> list[tuple[int, str]]:
    """(size, path under _internal/) of each ELF file, links left out (they cost nothing)."""
    found = []
    for path in internal.rglob("*"):
        if path.is_symlink() or not path.is_file():
            continue
        with path.open("rb") as f:
            if f.read(4) != b"\x7fELF":
                continue
        found.append((path.stat().st_size, path.relative_to(internal).as_posix()))
    return found


def archived_packages(executable: Path) -> dict[str, int]:
    """Compressed bytes per top-level package in the executable's module archive (PYZ)."""
    # PyInstaller is a packaging-only dependency, without type information
    readers = importlib.import_module("PyInstaller.archive.readers")
    sizes: dict[str, int] = {}
    outer = readers.CArchiveReader(str(executable))
    for name, entry in outer.toc.items():
        if entry[-1] != "z":
            continue
        for module, (_kind, _offset, length) in outer.open_embedded_archive(name).toc.items():
            top = module.split(".", 1)[0]
            sizes[top] = sizes.get(top, 0) + length
    return sizes


def report(bundle: Path, session: Session, show_all: bool) -> int:
    """Prints the unloaded parts; returns their total size in bytes."""
    total = 0
    libs = [(size, rel) for size, rel in shared_libraries(bundle / "_internal")
            if not session.loaded(rel)]
    print("shared libraries no process of the session mapped:")
    for size, rel in sorted(libs, reverse=True):
        total += size
        if show_all or size >= MIB // 10:
            print(f"  {size / MIB:6.1f} MiB  {rel}")
    imported = {module.split(".", 1)[0] for module in session.modules}
    packages = [(size, top) for top, size in archived_packages(bundle / "turnkey").items()
                if top not in imported]
    print("archived Python packages no process imported (compressed size):")
    for size, top in sorted(packages, reverse=True):
        total += size
        if show_all or size >= 20 * 1024:
            print(f"  {size / MIB:6.2f} MiB  {top}")
    return total


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    bundle, probe_dir = Path(argv[0]), Path(argv[1])
    total = report(bundle, Session.read(probe_dir), "--all" in argv[2:])
    print(f"in all {total / MIB:.1f} MiB of the bundle was never loaded by the session")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
