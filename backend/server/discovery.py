"""How clients find the backend: DIR/backend.json, and the lock that allows one backend per DIR."""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.config import write_atomic

LOCK_NAME = "backend.lock"
INFO_NAME = "backend.json"


@dataclass(frozen=True)
class Running:
    pid: int | None
    port: int | None


class AlreadyRunning(Exception):
    def __init__(self, running: Running) -> None:
        super().__init__(f"a backend is already running for this folder (pid {running.pid}, "
                         f"port {running.port})")
        self.running = running


SHARE_DIR_ENV = "TURNKEY_UNSAFE_SHARE_DIR"


def acquire(data_dir: Path) -> int:
    """Takes the DIR's exclusive lock for this process's lifetime; returns its fd.

    The lock, not backend.json, decides: a crashed backend's lock dies with
    it, so a stale backend.json is simply replaced.
    """
    fd = os.open(data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    if os.environ.get(SHARE_DIR_ENV) == "1":
        # Tests force two backends onto one folder to prove the turn lease alone keeps a
        # session's turns apart; nothing else should ever set this.
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        info = read(data_dir) or {}
        raise AlreadyRunning(Running(info.get("pid"), info.get("port"))) from None
    return fd


def publish(data_dir: Path, info: dict[str, Any]) -> None:
    write_atomic(data_dir / INFO_NAME, json.dumps(info, indent=2).encode() + b"\n", 0o600)


def withdraw(data_dir: Path, pid: int) -> None:
    info = read(data_dir)
    if info and info.get("pid") == pid:
        (data_dir / INFO_NAME).unlink(missing_ok=True)


def read(data_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((data_dir / INFO_NAME).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None

