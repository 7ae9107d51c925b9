"""The real app launched from a test as a person starts it: the environment it runs in, and a
data folder whose saved layout opens on a seeded session (tests/desktop/, tests/bench/)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from tests.desktop.seed import seed_long_session_info
from tests.integration.backend_proc import Backend

ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1,localhost"
OFFSCREEN = {"QT_QPA_PLATFORM": "offscreen"}
# What chooses where Qt puts windows: each launch says it again (`display`), so nothing of
# this process's own session (a Wayland one, say) decides it instead.
DISPLAY_VARS = ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")


def app_env(repo: Path = ROOT, display: Mapping[str, str] = OFFSCREEN) -> dict[str, str]:
    """This process's environment for the app of `repo` (this checkout, or another tree a
    bench compares it with): `repo` importable, its windows on `display` (Qt's offscreen
    platform unless an X display is given), keys in DIR/secrets.json instead of the user's
    keyring, and loopback never sent through a proxy."""
    env = {k: v for k, v in os.environ.items() if k not in (*DISPLAY_VARS, "PYTHONPATH")}
    env.update(display)
    env.update(PYTHONPATH=str(repo), TURNKEY_NO_KEYRING="1", NO_PROXY=LOOPBACK,
               no_proxy=LOOPBACK)
    return env


def seeded_folder(data_dir: Path, messages: int) -> Backend:
    """A data folder with a provider configured, a session of `messages` messages and a saved
    layout showing it beside the sidebar; its backend started (the caller closes it)."""
    backend = Backend(data_dir, "http://127.0.0.1:9/v1")  # never asked: nothing is sent
    backend.start()  # (its first start makes the store the seed writes into)
    assert backend.terminate() == 0
    session = seed_long_session_info(data_dir, messages)
    (data_dir / "desktop.json").write_text(json.dumps({"current": session.session_id}))
    backend.start()
    return backend
