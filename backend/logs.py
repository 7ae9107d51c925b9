"""Logging set-up: one rotating file under DIR/logs plus stderr, a named logger per subsystem."""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup(data_dir: Path, level: int = logging.INFO) -> Path:
    logs = data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = logs / "backend.log"
    file_handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=5 * 1024 * 1024, backupCount=5, encoding="utf-8"
    )
    file_handler.setFormatter(logging.Formatter(FORMAT))
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(logging.Formatter(FORMAT))
    stderr.setLevel(logging.WARNING)
    root = logging.getLogger()
    root.handlers[:] = [file_handler, stderr]
    root.setLevel(level)
    # websockets logs every refused handshake at ERROR with a traceback; ours say enough.
    logging.getLogger("websockets").setLevel(logging.CRITICAL)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return path
