"""Makes the Debian package (turnkey_VERSION_ARCH.deb) from a built bundle with dpkg-deb.

    python packaging/deb.py [--bundle dist/turnkey] [--out dist] [--version V] [--compress xz]

The package puts the bundle in /opt/turnkey with /usr/bin/turnkey, the launcher entry, the
icons at every size, AppStream metainfo, a changelog and a copyright file.  Its `Depends:` is
computed from the bundle: every shared library an ELF file in it names (DT_NEEDED) that the
bundle does not carry itself, found with `ldconfig -p` and mapped to its package with
`dpkg -S`, plus bubblewrap for the sandbox.  A library the build machine lacks stops the build:
the package would otherwise install and then fail to open a window.
The maintainer scripts are in packaging/debian/.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEBIAN = ROOT / "packaging" / "debian"
PACKAGE = "turnkey"
APP_ID = "dev.turnkey.Turnkey"  # the AppStream id; the launcher stays turnkey.desktop
PREFIX = Path("opt") / PACKAGE
ALWAYS = ("bubblewrap",)  # the sandbox (bwrap), found on PATH at run time, not linked
DT_NULL, DT_NEEDED, DT_RPATH, DT_RUNPATH = 0, 1, 15, 29
SHT_DYNAMIC = 6


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    bundle = args.bundle.resolve()
    if not (bundle / PACKAGE).is_file():
        print(f"deb: no bundle at {bundle}; run packaging/build first", file=sys.stderr)
        return 1
    version = args.version or project_version()
    try:
        depends = [*ALWAYS, *library_packages(bundle)]
    except MissingLibrary as exc:
        print(f"deb: {exc}", file=sys.stderr)
        return 1
    arch = _run(["dpkg", "--print-architecture"]).strip()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    deb = out / f"{PACKAGE}_{version}_{arch}.deb"
    with tempfile.TemporaryDirectory(prefix="turnkey-deb-", dir=out) as staging:
        tree = Path(staging)
        lay_out(tree, bundle, version)
        write_control(tree, version, arch, depends)
        subprocess.run(["dpkg-deb", "--root-owner-group", f"-Z{args.compress}", "--build",
                        str(tree), str(deb)], check=True, stdout=subprocess.DEVNULL)
    size = deb.stat().st_size / 2**20
    print(f"built {deb}: {size:.1f} MiB; Depends: {', '.join(depends)}")
    return 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="packaging/deb.py", description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=ROOT / "dist" / PACKAGE)
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    parser.add_argument("--version", default=None, help="default: pyproject.toml's")
    parser.add_argument("--compress", choices=["xz", "gzip", "zstd"], default="xz",
                        help="xz is the smallest download; gzip builds in a fraction of the time")
    return parser.parse_args(argv)


def project_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


# --- Depends: what the bundle loads from the system ---------------------------------------

class MissingLibrary(Exception):
    """A library the bundle needs that this machine has no package for."""


def library_packages(bundle: Path) -> list[str]:
    """The packages of the system libraries the bundle's ELF files name and do not carry."""
    carried = {path.name for path in bundle.rglob("*.so*")}
    needed: set[str] = set()
    for path in elf_files(bundle):
        needed.update(name for name in needed_libraries(path) if name not in carried)
    paths = system_libraries()
    if not needed <= paths.keys() and install_missing(sorted(needed - paths.keys())):
        paths = system_libraries()
    packages = set()
    for soname in sorted(needed):
        if soname.startswith("ld-linux"):
            soname_path = paths.get(soname, "")
            packages.add(owner(soname_path) if soname_path else "libc6")
            continue
        if soname not in paths:
            raise MissingLibrary(f"the bundle needs {soname}, which this machine does not have; "
                                 "install its package and build again")
        packages.add(owner(paths[soname]))
    return sorted(packages)


def install_missing(sonames: list[str]) -> bool:
    """As root with apt: installs the packages Debian's naming policy gives these libraries
    (libwayland-egl.so.1 in libwayland-egl1), so `dpkg -S` can then name them for certain.
    Whether anything was installed."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return False
    names = [policy_package(soname) for soname in sonames]
    print(f"deb: installing what the bundle links and this machine lacks: {' '.join(names)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *names],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:  # the lists may be stale or absent on a fresh machine
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
        done = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *names],
                              env=env, capture_output=True, text=True)
    return done.returncode == 0


def policy_package(soname: str) -> str:
    """The package name Debian policy 8.1 gives a shared library: libfoo.so.1 -> libfoo1,
    libfoo2.so.1 -> libfoo2-1."""
    name, _, version = soname.partition(".so.")
    version = version.split(".")[0]
    return f"{name}-{version}" if name[-1:].isdigit() else f"{name}{version}"


def elf_files(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as f:
                if f.read(4) == b"\x7fELF":
                    yield path


def needed_libraries(path: Path) -> list[str]:
    """DT_NEEDED of a 64-bit little-endian ELF file."""
    data = path.read_bytes()
    return [text for _, tag, text in dynamic_entries(data) if tag == DT_NEEDED]


def dynamic_entries(data: bytes) -> Iterator[tuple[int, int, str]]:
    """(file offset, tag, string) of each entry of the dynamic section up to DT_NULL, found
    from the section headers; the string is "" for a tag whose value is not one."""
    if data[4] != 2 or data[5] != 1:  # ELFCLASS64, ELFDATA2LSB: what this package builds for
        return
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    for _, kind, _, _, offset, size, link, _, _, _ in sections:
        if kind != SHT_DYNAMIC:
            continue
        strtab = sections[link][4]
        for at in range(offset, offset + size, 16):
            tag, value = struct.unpack_from("<qQ", data, at)
            if tag == DT_NULL:
                break
            text = ""
            if tag in (DT_NEEDED, DT_RPATH, DT_RUNPATH):
                text = data[strtab + value:data.index(b"\0", strtab + value)].decode()
            yield at, tag, text


def drop_build_paths(folder: Path) -> int:
    """Removes library search paths that point outside the bundle (Python's extension modules
    carry the build machine's, e.g. /root/.pyenv/.../lib): on a person's machine that folder
    is someone else's to fill.  The entry is deleted the way `chrpath -d` does, by moving the
    entries after it up one.  How many files changed."""
    changed = 0
    for path in elf_files(folder):
        data = bytearray(path.read_bytes())
        entries = list(dynamic_entries(bytes(data)))
        foreign = [at for at, tag, text in entries if tag in (DT_RPATH, DT_RUNPATH)
                   and any(not part.startswith("$ORIGIN") for part in text.split(":"))]
        if not foreign:
            continue
        kept = [data[at:at + 16] for at, _, _ in entries if at not in foreign]
        start = entries[0][0]
        data[start:start + 16 * (len(entries) + 1)] = b"".join(kept) + bytes(16 * (len(foreign) + 1))
        path.write_bytes(bytes(data))
        changed += 1
    return changed


def system_libraries() -> dict[str, str]:
    """soname -> path of this machine's 64-bit libraries, from the loader's cache."""
    found: dict[str, str] = {}
    for line in _run(["ldconfig", "-p"]).splitlines()[1:]:
        name, _, rest = line.strip().partition(" (")
        flags, _, path = rest.partition(") => ")
        if "x86-64" in flags or "64bit" in flags:
            found.setdefault(name, path)
    return found


def owner(path: str) -> str:
    """The package a library file belongs to (its /lib or /usr/lib spelling, as dpkg has it)."""
    for candidate in _spellings(path):
        done = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if done.returncode == 0:
            return done.stdout.split(":", 1)[0].split(",")[0].strip()
    raise MissingLibrary(f"no package owns {path}; install the library from a package and "
                         "build again")


def _spellings(path: str) -> Iterable[str]:
    real = os.path.realpath(path)
    for p in dict.fromkeys([path, real]):
        yield p
        if p.startswith("/usr/lib/"):
            yield p.removeprefix("/usr")
        elif p.startswith("/lib/"):
            yield "/usr" + p


# --- the package's tree -----------------------------------------------------------------

def strip(folder: Path) -> None:
    """Strips what the spec left unstripped (the extension modules the bootloader itself
    needs, collected outside its strip step).  Not the executable, whose archive is appended
    and would be cut off, nor an auditwheel FOO.libs/ folder, whose layout strip breaks."""
    libraries = [str(p) for p in elf_files(folder) if p != folder / PACKAGE
                 and not any(part.endswith(".libs") for part in p.relative_to(folder).parts[:-1])]
    for start in range(0, len(libraries), 200):
        subprocess.run(["strip", "--strip-unneeded", *libraries[start:start + 200]], check=True)


def lay_out(tree: Path, bundle: Path, version: str) -> None:
    shutil.copytree(bundle, tree / PREFIX, symlinks=True)
    drop_build_paths(tree / PREFIX)
    strip(tree / PREFIX)
    usr = tree / "usr"
    (usr / "bin").mkdir(parents=True)
    (usr / "bin" / PACKAGE).symlink_to(f"/{PREFIX}/{PACKAGE}")
    share = usr / "share"
    _copy(ROOT / "packaging" / "turnkey.desktop", share / "applications" / "turnkey.desktop")
    for png in sorted((ROOT / "assets" / "icons" / "hicolor").glob("*/apps/turnkey.png")):
        _copy(png, share / "icons" / "hicolor" / png.relative_to(ROOT / "assets/icons/hicolor"))
    _copy(ROOT / "assets" / "icons" / "turnkey.svg", share / "icons/hicolor/scalable/apps/turnkey.svg")
    metainfo = (DEBIAN / "metainfo.xml").read_text().format(
        version=version, date=time.strftime("%Y-%m-%d", time.gmtime(_release_time())))
    _write(share / "metainfo" / f"{APP_ID}.metainfo.xml", metainfo)
    doc = share / "doc" / PACKAGE
    _copy(DEBIAN / "copyright", doc / "copyright")
    _gzip(_changelog(version), doc / "changelog.gz")
    _copy(DEBIAN / "lintian-overrides", share / "lintian" / "overrides" / PACKAGE)
    _gzip((DEBIAN / "turnkey.1").read_text().replace("@VERSION@", version),
          share / "man" / "man1" / "turnkey.1.gz")
    _normalise(tree)


def write_control(tree: Path, version: str, arch: str, depends: list[str]) -> None:
    meta = tree / "DEBIAN"
    meta.mkdir()
    size = sum(p.stat().st_size for p in tree.rglob("*") if p.is_file() and not p.is_symlink())
    control = (DEBIAN / "control").read_text().format(
        version=version, arch=arch, depends=", ".join(depends), size=size // 1024 + 1)  # KiB
    _write(meta / "control", control)
    for script in ("prerm",):
        _copy(DEBIAN / script, meta / script)
        (meta / script).chmod(0o755)
    sums = []
    for path in sorted(tree.rglob("*")):
        if path.is_file() and not path.is_symlink() and meta not in path.parents:
            sums.append(f"{_md5(path)}  {path.relative_to(tree)}\n")
    _write(meta / "md5sums", "".join(sums))


def _changelog(version: str) -> str:
    """A native package's changelog: one entry for this build."""
    stamp = time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime(_release_time()))
    return (f"{PACKAGE} ({version}) unstable; urgency=medium\n\n"
            f"  * Turnkey {version}; see https://turnkey.dev for what changed.\n\n"
            f" -- Turnkey developers <packages@turnkey.dev>  {stamp}\n")


def _release_time() -> float:
    """The last commit's time (reproducible builds honour SOURCE_DATE_EPOCH), else now."""
    if "SOURCE_DATE_EPOCH" in os.environ:
        return float(os.environ["SOURCE_DATE_EPOCH"])
    done = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%ct"],
                          capture_output=True, text=True)
    return float(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else time.time()


def _normalise(tree: Path) -> None:
    """Folders 0755, programs 0755, other files 0644: what dpkg and lintian expect."""
    for path in [tree, *tree.rglob("*")]:
        if path.is_symlink():
            continue
        if path.is_dir():
            path.chmod(0o755)
        elif ".so" in path.name or not path.stat().st_mode & 0o111:
            path.chmod(0o644)  # a shared library is mapped, not run: no execute bit
        else:
            path.chmod(0o755)


def _copy(source: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)


def _write(dest: Path, text: str) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text)


def _gzip(text: str, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with dest.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0,
                                               filename="") as f:
        f.write(text.encode())


def _md5(path: Path) -> str:
    digest = hashlib.md5()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _run(argv: list[str]) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


if __name__ == "__main__":
    sys.exit(main())
