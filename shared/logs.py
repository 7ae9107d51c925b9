"""Logging set-up: one rotating file under DIR/logs plus stderr, a named logger per subsystem.

Every internal error carries an error id: `internal()` logs an exception under a fresh id and
returns it, so the message a person sees (an RPC error, a failed turn's reason, a tool's
result) can quote it, and `ErrorIds` stamps one on any other record logged at ERROR or above.
Searching the log for the id a person quotes finds the traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import logging.handlers
import os
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
    """Logs to DIR/logs/NAME.log (rotated at 5 MB, 5 kept) and warnings to stderr.

    A record logged with `extra={"stderr": False}` goes to the file only (the caller has
    said it on stderr in its own words)."""
    logs = data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = logs / f"{name}.log"
    # backslashreplace: a line quoting a client's lone surrogate (a method name, an
    # unknown param) is written escaped instead of failing with a logging traceback.
    file_handler = LogFile(path, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8",
                           errors="backslashreplace")
    stderr = Stderr(sys.stderr)
    stderr.setLevel(logging.WARNING)
    stderr.addFilter(lambda record: getattr(record, "stderr", True))
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


class LogFile(logging.handlers.RotatingFileHandler):
    """The log file, which must never take the process down with it.

    A record that cannot be written (the disk is full: the log usually shares the
    folder of the database that just failed) is dropped and counted, never reported
    with a traceback on stderr; the next record that can be written is preceded by a
    line saying how many are missing and why.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lost = 0
        self.lost_why = ""

    def emit(self, record: logging.LogRecord) -> None:
        if self.lost:
            lost, self.lost = self.lost, 0
            self._end_partial_line()
            super().emit(_note(f"{lost} log records could not be written ({self.lost_why}) "
                               "and are missing here"))
            if self.lost:  # still failing: the note is not one of the missing records
                self.lost = lost
        super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        exc = sys.exc_info()[1]
        if not isinstance(exc, OSError):
            super().handleError(record)
            return
        self.lost += 1
        self.lost_why = exc.strerror or str(exc)
        # What the stream still buffers would land later as half a line: drop it with the
        # stream; the next record reopens the file.
        stream, self.stream = self.stream, None
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()

    def _end_partial_line(self) -> None:
        """A write the disk cut short may have left half a line: end it first."""
        try:
            with open(self.baseFilename, "rb") as f:
                f.seek(-1, os.SEEK_END)
                partial = f.read(1) != b"\n"
            if partial:
                with open(self.baseFilename, "ab") as f:
                    f.write(b"\n")
        except OSError:
            pass  # an empty or missing file, or still no room: the note's own write will tell


class Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Warnings on stderr; a stderr that cannot be written (a full disk under the file it
    was sent to) drops them rather than report the failure on itself."""

    def handleError(self, record: logging.LogRecord) -> None:
        if not isinstance(sys.exc_info()[1], OSError):
            super().handleError(record)


def _note(message: str) -> logging.LogRecord:
    record = logging.LogRecord("logs", logging.WARNING, __file__, 0, message, None, None)
    record.error_tag = ""  # the format expects it (set by ErrorIds, which this skips)
    return record


def asyncio_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Routes exceptions nobody retrieved (a task's, a callback's) to the log with an id."""
    log = logging.getLogger("asyncio")

    def handler(_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        log.error("%s", context.get("message", "unhandled error"),
                  exc_info=(type(exc), exc, exc.__traceback__) if exc is not None else None,
                  extra={"error_id": new_error_id()})

    loop.set_exception_handler(handler)
