"""What the file tools share: argument schemas, results the model can act on, and the path
resolved once and judged (`Target`)."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.tools import fileio, policy
from backend.tools.base import ToolContext, ToolResult
from backend.tools.beneath import MagicLink, Place
from backend.tools.landing import LINKED_REASON, Landing, Seal, land

SEALED_NOTE = (
    "Turnkey's own data folder is never read or changed by any tool (its spill folder may be "
    "read), nor /proc/<pid>/environ or mem; links below /proc/<pid>/ are not followed."
)


def schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def text(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


PATH = text("File path, relative to the session folder or absolute.")
FOLDER = text("Folder, relative to the session folder or absolute (default: the session folder).")


def ok(content: str, summary: str, **meta: Any) -> ToolResult:
    return ToolResult("ok", content, summary, meta)


def error(message: str) -> ToolResult:
    return ToolResult("error", message, message)


def refused(label: str, why: str) -> ToolResult:
    return error(f"refused: {label}: {why}.")


def os_error(exc: OSError, label: str) -> ToolResult:
    """The failure in words the model can act on."""
    if isinstance(exc, MagicLink | Refused):
        return refused(label, exc.strerror or str(exc))
    if isinstance(exc, FileNotFoundError):
        return error(f"no such file or folder: {label}")
    if isinstance(exc, IsADirectoryError):
        return error(f"{label} is a folder, not a file (list_dir shows what it holds)")
    if isinstance(exc, NotADirectoryError):
        return error(f"{label}: a part of the path is a file, not a folder")
    if isinstance(exc, PermissionError):
        return error(f"permission denied: {label}")
    return error(f"{label}: {exc.strerror or exc}")


class Refused(OSError):
    """A file no tool may read, found out only once it was opened (a hard link)."""


@dataclass
class Target:
    """A path resolved once and judged.  Touch it only through `place`, and close that."""

    place: Place
    landing: Landing
    label: str  # for messages: relative to the session folder when inside it
    seal: Seal


def resolve(path: str, ctx: ToolContext, *, reading: bool) -> Target | ToolResult:
    """Blocking.  `path` resolved once and judged, or the error result: a NUL byte, a path
    that cannot be resolved, or a sealed place (see `landing`)."""
    try:
        place = policy.locate(path, ctx.cwd)
    except policy.BadPath as exc:
        return error(str(exc))
    except OSError as exc:
        return os_error(exc, fileio.display(Path(ctx.cwd, os.path.expanduser(path)), ctx.cwd))
    seal = Seal.of(ctx.data_dir)
    landing = land(place, ctx.cwd, seal, reading=reading)
    label = fileio.display(Path(landing.real), ctx.cwd)
    if landing.sealed is not None:
        place.close()
        return refused(label, landing.sealed)
    return Target(place, landing, label, seal)


def open_file(target: Target) -> int:
    """Opens the target for reading: a regular file (no device or pipe, so a read never
    blocks), and no hard link into the data folder."""
    fd = target.place.open(os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        fileio.check_regular(st, target.label)
        if target.seal.linked(st):
            raise Refused(errno.EACCES, LINKED_REASON, target.label)
    except BaseException:
        os.close(fd)
        raise
    return fd
