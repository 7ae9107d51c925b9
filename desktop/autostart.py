"""Start at login: the XDG autostart entry (`$XDG_CONFIG_HOME/autostart/turnkey.desktop`) that
starts this install with `--background`, written, read and removed.  Qt-free.

The entry names the program that runs now (a bundle's own executable; a source checkout's
Python with `-m desktop.cli` and the checkout on PYTHONPATH, so the checkout that wrote it is the
one that starts), and the data folder when it is not the platform's default.  The Exec line is
quoted by the Desktop Entry specification's rules, so a folder with spaces, quotes or `%` in its
name starts as it is.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import platformdirs

import desktop

FILE_NAME = "turnkey.desktop"
BACKGROUND_FLAG = "--background"
# Characters that make an Exec argument need quoting (the specification's reserved set).
_RESERVED = frozenset(" \t\"'\\><~|&;$*?#()`")
_ESCAPED_IN_QUOTES = frozenset('"`$\\')


def entry_path(env: Mapping[str, str] | None = None) -> Path:
    """Where the entry goes: $XDG_CONFIG_HOME/autostart (an absolute one; the specification
    ignores a relative one), else ~/.config/autostart."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "autostart" / FILE_NAME


def launch_command(data_dir: Path) -> list[str]:
    """The command that starts this install in the background on `data_dir`."""
    if getattr(sys, "frozen", False):  # the bundle: its own executable is the app
        argv = [sys.executable]
    else:
        # Not resolved: a venv's python is a link, and the venv is what must start.
        checkout = Path(desktop.__file__).resolve().parent.parent
        argv = ["env", f"PYTHONPATH={checkout}", sys.executable, "-m", "desktop.cli"]
    default = Path(platformdirs.user_data_dir("turnkey", appauthor=False))
    if data_dir.expanduser().resolve() != default.expanduser().resolve():
        argv += ["--data-dir", str(data_dir.expanduser().resolve())]
    return [*argv, BACKGROUND_FLAG]


def exec_line(argv: list[str]) -> str:
    """`argv` as a Desktop Entry's Exec value (quoted, `%` doubled, backslashes escaped for the
    string type).  Raises ValueError for an argument with a control character in it."""
    if any(ch < " " for arg in argv for ch in arg):
        raise ValueError("a control character in the command line: " + repr(argv))
    return " ".join(_quoted(arg) for arg in argv).replace("\\", "\\\\")


def _quoted(arg: str) -> str:
    arg = arg.replace("%", "%%")
    if arg and not any(ch in _RESERVED for ch in arg):
        return arg
    return '"' + "".join("\\" + ch if ch in _ESCAPED_IN_QUOTES else ch for ch in arg) + '"'


def _program(argv: list[str]) -> str:
    """The executable the entry runs: the bundle's, or the venv's Python behind `env`."""
    return next(arg for arg in argv[1:] if not arg.startswith("PYTHONPATH=")) \
        if argv[0] == "env" else argv[0]


def entry_text(argv: list[str]) -> str:
    """The whole entry: hidden from menus, started at login."""
    return ("[Desktop Entry]\n"
            "Type=Application\n"
            "Version=1.4\n"
            "Name=Turnkey\n"
            "Comment=Starts Turnkey in the background when you log in\n"
            f"Exec={exec_line(argv)}\n"
            # Once the program is gone (the package removed, the venv deleted), the session
            # skips the entry instead of failing at every login.
            f"TryExec={exec_line([_program(argv)])}\n"
            "Icon=turnkey\n"
            "Terminal=false\n"
            "NoDisplay=true\n"
            "X-GNOME-Autostart-enabled=true\n")


def enabled(path: Path | None = None) -> bool:
    """Whether Turnkey starts at login: the entry is there, and not switched off (Hidden=true,
    or GNOME's X-GNOME-Autostart-enabled=false, as a session's own settings write it)."""
    path = path or entry_path()
    try:
        lines = {line.strip().replace(" ", "") for line in path.read_text().splitlines()}
    except (OSError, UnicodeDecodeError):
        return False
    return not ({"Hidden=true", "X-GNOME-Autostart-enabled=false"} & lines)


def enable(data_dir: Path, path: Path | None = None) -> Path:
    """Writes the entry (replacing what is there, a link included: it is never followed)."""
    path = path or entry_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    text = entry_text(launch_command(data_dir))
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temp.write_text(text)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    return path


def disable(path: Path | None = None) -> None:
    """Removes the entry (nothing to do when there is none)."""
    (path or entry_path()).unlink(missing_ok=True)


def set_enabled(on: bool, data_dir: Path, path: Path | None = None) -> bool:
    """The option as the person set it; returns what the file says afterwards."""
    path = path or entry_path()
    if on:
        enable(data_dir, path)
    else:
        disable(path)
    return enabled(path)
