"""Starting the backend as a detached process and waiting for its READY line.

Detached means its own session and process group: closing the front-end
that started it (a terminal, the desktop app) never takes the backend and
its running turns down with it.

It imports neither asyncio nor the WebSocket client, so a command line can
start the backend first and load those while the backend starts (`spawn`,
then `wait_ready`).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

READY = "TURNKEY_BACKEND_READY"


class BackendNotFound(Exception):
    """No backend answers for this data folder."""


class BackendInfo(NamedTuple):  # not a dataclass: `dataclasses` costs the CLI ~8 ms to load
    pid: int
    port: int
    token: str
    host: str = "127.0.0.1"  # where it listens ("0.0.0.0" and "::" listen on loopback too)
    tls_fingerprint: str = ""  # its certificate's SHA-256 when it serves wss

    @classmethod
    def read(cls, data_dir: Path) -> BackendInfo | None:
        try:
            raw = json.loads((data_dir / "backend.json").read_text())
            return cls(int(raw["pid"]), int(raw["port"]), str(raw["token"]),
                       str(raw.get("host", "127.0.0.1")), str(raw.get("tls_fingerprint", "")))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    @property
    def local_host(self) -> str:
        """The address this computer reaches it at: its own, or loopback for a wildcard."""
        return "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host


def backend_command(data_dir: Path) -> list[str]:
    if getattr(sys, "frozen", False):  # a bundled app re-invokes its own executable
        return [sys.executable, "backend", "serve", "--data-dir", str(data_dir)]
    return [sys.executable, "-m", "backend", "serve", "--data-dir", str(data_dir)]


async def start_backend(data_dir: Path, timeout: float = 20.0) -> BackendInfo:
    """Starts a detached backend for `data_dir` (or finds the one that won the race)."""
    import asyncio  # loaded already: this runs on its loop (see the module's docstring)

    return await asyncio.to_thread(start_backend_sync, data_dir, timeout)


def start_backend_sync(data_dir: Path, timeout: float = 20.0) -> BackendInfo:
    return wait_ready(spawn(data_dir), data_dir, timeout)


def spawn(data_dir: Path) -> subprocess.Popen[bytes]:
    """Starts a detached backend for `data_dir` and returns at once; the caller must then
    `wait_ready` for it (which also reaps it)."""
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    logs = data_dir / "logs"
    logs.mkdir(exist_ok=True, mode=0o700)
    with open(logs / "backend.stderr", "ab") as err:
        return subprocess.Popen(
            backend_command(data_dir), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=err, start_new_session=True, close_fds=True,
        )


def wait_ready(proc: subprocess.Popen[bytes], data_dir: Path, timeout: float = 20.0) -> BackendInfo:
    """Blocks until the backend `spawn` started says READY (or the one that won a race to
    start first answers); raises BackendNotFound when neither happens within `timeout`."""
    assert proc.stdout is not None
    ready = select.select([proc.stdout], [], [], timeout)[0]
    line = proc.stdout.readline() if ready else b""
    proc.stdout.close()
    if not ready:
        proc.kill()
        raise BackendNotFound(f"the backend did not start within {timeout:.0f} s")
    if not line.startswith(READY.encode()):
        code = proc.wait()
        info = BackendInfo.read(data_dir)
        if code == 3 and info is not None:  # another front-end started it first
            return info
        raise BackendNotFound(
            f"the backend exited with status {code}; see {data_dir / 'logs' / 'backend.stderr'}"
        )
    info = BackendInfo.read(data_dir)
    if info is None:
        raise BackendNotFound("the backend started but wrote no backend.json")
    # It is our child until it exits: reap it then, or it lingers as a zombie that looks alive.
    threading.Thread(target=proc.wait, name="backend-reaper", daemon=True).start()
    return info


def stop_signal(info: BackendInfo) -> bool:
    """Asks the backend to stop with SIGTERM; False if it was not running."""
    try:
        os.kill(info.pid, 15)
    except ProcessLookupError:
        return False
    return True


def running(data_dir: Path) -> BackendInfo | None:
    """The folder's backend, from its backend.json, if that process is alive."""
    info = BackendInfo.read(data_dir)
    return info if info is not None and alive(info.pid) else None


def stop_backend(info: BackendInfo, timeout: float = 15.0) -> bool:
    """SIGTERM, then waits (blocking) until the backend has settled its turns and exited;
    False if it is still alive after `timeout` seconds."""
    stop_signal(info)
    deadline = time.monotonic() + timeout
    while alive(info.pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def alive(pid: int) -> bool:
    """Whether `pid` is a running process.  A zombie or dead task (exited, not yet reaped by
    its parent) answers kill(0) but will never do anything again: it is not alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, it is just not ours
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no procfs here (or gone in between): trust the signal
    return stat.rpartition(")")[2].split()[:1] not in (["Z"], ["X"])
