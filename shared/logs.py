"""Logging set-up: one rotating file under DIR/logs plus stderr, a named logger per subsystem.

Every internal error carries an error id: `internal()` logs an exception under a fresh id and
returns it, so the message a person sees (an RPC error, a failed turn's reason, a tool's
result) can quote it, and `ErrorIds` stamps one on any other record logged at ERROR or above.
Searching the log for the id a person quotes finds the traceback.
"""

from __future__ import annotations

import asyncio
import logging
import logging.handlers
import sys
import uuid
from pathlib import Path
from typing import Any

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s%(error_tag)s"
LOG_BYTES = 5 * 1024 * 1024
LOG_BACKUPS = 5


def new_error_id() -> str:
    return uuid.uuid4().hex[:12]


def internal(log: logging.Logger, message: str, *args: object) -> str:
    """Logs the exception being handled under a new error id, and returns the id."""
    error_id = new_error_id()
    log.error(message, *args, exc_info=True, extra={"error_id": error_id})
    return error_id


class ErrorIds(logging.Filter):
    """Gives every ERROR-or-worse record an error id, shown at the end of its line."""

    def filter(self, record: logging.LogRecord) -> bool:
        error_id = getattr(record, "error_id", None)
        if error_id is None and record.levelno >= logging.ERROR:
            error_id = record.error_id = new_error_id()
        record.error_tag = f" [error_id={error_id}]" if error_id else ""
        return True


def setup(data_dir: Path, level: int = logging.INFO, name: str = "backend") -> Path:
    """Logs to DIR/logs/NAME.log (rotated at 5 MB, 5 kept) and warnings to stderr."""
    logs = data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = logs / f"{name}.log"
    file_handler = logging.handlers.RotatingFileHandler(
        # backslashreplace: a line quoting a client's lone surrogate (a method name, an
        # unknown param) is written escaped instead of failing with a logging traceback.
        path, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8",
        errors="backslashreplace",
    )
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(logging.WARNING)
    for handler in (file_handler, stderr):
        handler.setFormatter(logging.Formatter(FORMAT))
        handler.addFilter(ErrorIds())
    root = logging.getLogger()
    root.handlers[:] = [file_handler, stderr]
    root.setLevel(level)
    # websockets logs every refused handshake at ERROR with a traceback; ours say enough.
    logging.getLogger("websockets").setLevel(logging.CRITICAL)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return path


def asyncio_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Routes exceptions nobody retrieved (a task's, a callback's) to the log with an id."""
    log = logging.getLogger("asyncio")

    def handler(_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        log.error("%s", context.get("message", "unhandled error"),
                  exc_info=(type(exc), exc, exc.__traceback__) if exc is not None else None,
                  extra={"error_id": new_error_id()})

    loop.set_exception_handler(handler)
