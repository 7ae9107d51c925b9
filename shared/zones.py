"""Time zones by IANA name: which one this computer is in, and whether a name is one.

The backend and the desktop guess the same way, so a schedule made without a zone (the
backend's default) and the zone the app's form proposes are the same wall clock.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

LOCALTIME = Path("/etc/localtime")  # a link into the zoneinfo database on Linux and macOS


def local_zone_name(localtime: Path = LOCALTIME) -> str:
    """This computer's IANA zone: TZ (without a leading ':'), else the name `localtime`
    links to, else "UTC" (never a name ZoneInfo refuses)."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    with contextlib.suppress(OSError):
        target = str(localtime.resolve())
        candidates.append(target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else "")
    for name in candidates:
        if name and valid_zone(name):
            return name
    return "UTC"


def valid_zone(name: str) -> bool:
    """Whether ZoneInfo knows `name` (a path-like name such as "../x" is refused, not read)."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True
