"""Where Turnkey keeps its data: $TURNKEY_HOME, else the platform's user data folder."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def default_data_dir() -> Path:
    home = os.environ.get("TURNKEY_HOME")
    if home:
        return Path(home).expanduser()
    return Path(platformdirs.user_data_dir("turnkey", appauthor=False))
