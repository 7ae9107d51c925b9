"""Process groups of running tool calls, recorded on disk so a crash cannot leave them working.

A terminal call's shell leads its own process group.  While the call runs, a
small file under DIR/run/tools/ names the group, its leader's start time and
the backend that started it.  The shell itself dies with the backend (a
parent-death signal), but what it forked would live on; at start-up the next
backend kills every recorded group whose backend is gone, after checking the
leader is still the process that was recorded (a pid may have been reused).
A call that ends normally removes its file: what it left running in the
background on purpose is the user's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from pathlib import Path

from backend.host import process_start

log = logging.getLogger("tools")


class ProcessTable:
    def __init__(self, data_dir: Path) -> None:
        self.dir = data_dir / "run" / "tools"

    def spawned(self, pgid: int) -> None:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        record = {"pgid": pgid, "start": process_start(pgid), "backend": os.getpid(),
                  "backend_start": process_start(os.getpid())}
        (self.dir / str(pgid)).write_text(json.dumps(record))

    def reaped(self, pgid: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.dir / str(pgid)).unlink()

    def groups(self) -> set[int]:
        """The process groups recorded as running tool calls (this backend's or another's)."""
        found = set()
        with contextlib.suppress(FileNotFoundError):
            for path in self.dir.iterdir():
                with contextlib.suppress(ValueError):
                    found.add(int(path.name))
        return found

    def kill_orphans(self) -> int:
        """Kills the groups of calls that were running when an earlier backend died."""
        killed = 0
        if not self.dir.is_dir():
            return 0
        for path in self.dir.iterdir():
            try:
                record = json.loads(path.read_text())
                pgid = int(record["pgid"])
            except (OSError, ValueError, KeyError, TypeError):
                path.unlink(missing_ok=True)
                continue
            if process_start(int(record["backend"])) == record.get("backend_start"):
                continue  # its backend still lives (another process on this folder)
            if record.get("start") and process_start(pgid) == record["start"]:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                    killed += 1
            elif _group_alive(pgid) and not process_start(pgid):
                # The leader is gone but its group lives on: the same group id cannot have
                # been handed out again while members remain.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                    killed += 1
            path.unlink(missing_ok=True)
        if killed:
            log.warning("killed %d process groups left running by a crashed turn", killed)
        return killed


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
