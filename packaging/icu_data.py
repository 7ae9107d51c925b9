"""A smaller ICU data library for the bundle: Qt's libicudata.so.73 (31 MiB) with only the parts
Qt reads through ICU (9 MiB).

QtCore links ICU, and ICU's data library holds all of CLDR.  Qt keeps its own locale data
(QLocale's formats and names do not come from ICU); through ICU it reads collation (QCollator,
which QFileSystemModel sorts with) and the legacy text codecs (QStringConverter).  So the
collation tree (coll/), the converters (*.cnv, cnvalias.icu) and the small top-level
Unicode tables are kept; the locale trees Qt never opens through ICU (main locale data,
currencies, units, zones, languages, regions, break iterators, transliteration, spelled-out
numbers) are dropped.  tests/integration/test_bundle.py checks that the bundled app still
sorts with a German collator and decodes ISO-8859-15.

The data is ICU's "common data" package (format CmnD): a header, a table of contents of
(name offset, data offset) pairs relative to its start, sorted by name, then the items.  The
library is that package as one exported symbol, icudt73_dat, assembled and linked with
binutils (`as`, `ld`), which PyInstaller needs anyway (objdump).
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from pathlib import Path

# The items kept, by name inside the package ("coll/de.res", "ibm-850_P100-1995.cnv").
KEEP = re.compile(r"^(coll/.*|[^/]+\.(cnv|icu|nrm|spp|cfu))$")
_ALIGN = 16  # ICU reads items in place: each starts 16-byte aligned


def items(package: bytes) -> tuple[bytes, str, list[tuple[str, bytes]]]:
    """The package's header, its item-name prefix ("icudt73l/") and its (name, bytes) items."""
    header_size, magic1, magic2 = struct.unpack_from("<HBB", package, 0)
    if (magic1, magic2) != (0xDA, 0x27) or package[12:16] != b"CmnD":
        raise ValueError("not an ICU common data package")
    toc = package[header_size:]
    (count,) = struct.unpack_from("<I", toc, 0)
    entries = [struct.unpack_from("<II", toc, 4 + 8 * i) for i in range(count)]
    ends = sorted({offset for _, offset in entries} | {len(toc)})
    following = {start: ends[ends.index(start) + 1] for start in ends[:-1]}
    found = []
    for name_offset, data_offset in entries:
        name = toc[name_offset:toc.index(b"\0", name_offset)].decode("ascii")
        found.append((name, toc[data_offset:following[data_offset]]))
    prefix = found[0][0].split("/", 1)[0] + "/" if found else ""
    return package[:header_size], prefix, [(n.removeprefix(prefix), d) for n, d in found]


def package(header: bytes, prefix: str, kept: list[tuple[str, bytes]]) -> bytes:
    """A common data package of `kept` (in the order given: sorted, as ICU searches it)."""
    names = b"".join((prefix + name).encode("ascii") + b"\0" for name, _ in kept)
    toc_size = 4 + 8 * len(kept)
    data_start = _aligned(toc_size + len(names))
    offsets, name_at, body = [], toc_size, b""
    for name, data in kept:
        offsets.append((name_at, data_start + len(body)))
        name_at += len(prefix + name) + 1
        body += data + b"\0" * (_aligned(len(data)) - len(data))
    toc = struct.pack("<I", len(kept)) + b"".join(struct.pack("<II", *o) for o in offsets)
    return header + toc + names + b"\0" * (data_start - toc_size - len(names)) + body


def _aligned(size: int) -> int:
    return (size + _ALIGN - 1) // _ALIGN * _ALIGN


def exported_data(library: Path) -> tuple[str, bytes]:
    """The data symbol's name and bytes (the library's only exported object)."""
    symbols = subprocess.run(["readelf", "-sW", "--dyn-syms", str(library)], capture_output=True,
                             text=True, check=True).stdout
    found = re.search(r"\s0*([0-9a-f]+)\s+(0x[0-9a-f]+|\d+)\s+OBJECT\s+GLOBAL\s+\S+\s+\S+\s+"
                      r"(icudt\d+_dat)\s*$", symbols, re.MULTILINE)
    if found is None:
        raise ValueError(f"{library}: no icudtNN_dat symbol")
    address, size, name = int(found[1], 16), int(found[2], 0), found[3]
    sections = subprocess.run(["readelf", "-SW", str(library)], capture_output=True, text=True,
                              check=True).stdout
    for line in sections.splitlines():
        fields = line.replace("[ ", "[").split()
        if len(fields) > 5 and fields[1] == ".rodata":
            start, offset = int(fields[3], 16), int(fields[4], 16)
            with library.open("rb") as f:
                f.seek(offset + address - start)
                return name, f.read(size)
    raise ValueError(f"{library}: no .rodata section")


def smaller_library(library: Path, work: Path) -> Path:
    """WORK/libicudata.so.NN: `library` with only the KEEP items (soname and symbol kept)."""
    symbol, data = exported_data(library)
    header, prefix, found = items(data)
    kept = [(name, item) for name, item in found if KEEP.match(name)]
    work.mkdir(parents=True, exist_ok=True)
    (work / "icudata.bin").write_bytes(package(header, prefix, kept))
    (work / "icudata.s").write_text(
        f".section .rodata\n.globl {symbol}\n.type {symbol},@object\n.balign {_ALIGN}\n"
        f'{symbol}:\n.incbin "{work / "icudata.bin"}"\n.size {symbol}, .-{symbol}\n'
        '.section .note.GNU-stack,"",@progbits\n')
    out = work / library.name
    subprocess.run(["as", "-o", str(work / "icudata.o"), str(work / "icudata.s")], check=True)
    subprocess.run(["ld", "-shared", "-soname", library.name, "-o", str(out),
                    str(work / "icudata.o")], check=True)
    return out


if __name__ == "__main__":
    built = smaller_library(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"{built}: {built.stat().st_size / 2**20:.1f} MiB")
