"""Session probe for packaging/unloaded: on PYTHONPATH with TURNKEY_PROBE_DIR set, every Python
process started from the source tree records which modules it imported and which files it
mapped (shared libraries, Qt plugins) in TURNKEY_PROBE_DIR/PID.json.

Written every second and at exit: a process that is killed, or never exits on its own (the
llama.cpp server), still leaves what it had loaded by then.  Not part of the app or the bundle.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from pathlib import Path


def _mapped() -> list[str]:
    try:
        lines = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return []
    return sorted({line.split(None, 5)[5] for line in lines
                   if len(line.split(None, 5)) == 6 and line.split(None, 5)[5].startswith("/")})


def _dump(folder: Path) -> None:
    record = {"argv": sys.argv, "path": sys.path, "modules": sorted(sys.modules),
              "mapped": _mapped()}
    partial = folder / f"{os.getpid()}.tmp"
    try:
        partial.write_text(json.dumps(record))
        partial.replace(folder / f"{os.getpid()}.json")
    except OSError:
        pass  # a probe must never break the process it watches


def _every_second(folder: Path) -> None:
    while True:
        time.sleep(1.0)
        _dump(folder)


def _start() -> None:
    where = os.environ.get("TURNKEY_PROBE_DIR")
    if not where:
        return
    folder = Path(where)
    folder.mkdir(parents=True, exist_ok=True)
    atexit.register(_dump, folder)
    threading.Thread(target=_every_second, args=(folder,), daemon=True, name="probe").start()


_start()
