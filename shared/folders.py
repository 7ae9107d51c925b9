"""Session folders that hold all of a person's files (home, `/`, a folder above home), in words.

The sandbox's one writable folder is the session's, so in such a folder it protects nothing.
The backend puts `folder_warning` in every session summary (`Session.folder_warning`); the
desktop's new-session dialog says the same before a session exists.
"""

from __future__ import annotations

import os
from pathlib import Path


def rooted_where(cwd: str | Path) -> str | None:
    """"your home folder" or "/" when the session folder is one of them (or holds your home
    folder), where the sandbox's one writable folder is everything; None otherwise.  The
    command policy asks before interpreters there (`backend.tools.policy.home_rooted_guard`)."""
    real = os.path.realpath(cwd)
    home = os.path.realpath(os.path.expanduser("~"))
    if real == "/":
        return "/ (the whole file system)"
    if home == real:
        return "your home folder"
    if home.startswith(real + "/"):
        return f"{real}, which holds your home folder"
    return None


def folder_warning(cwd: str) -> str | None:
    """What to tell a person about a session in `cwd` (an absolute path on this computer), or
    None when the folder is an ordinary one.  Two `realpath` calls: cheap enough for every
    summary."""
    where = rooted_where(cwd)
    if where is None:
        return None
    return (f"This session's folder is {where}: the sandbox lets the agent's commands change "
            "every file in it. Pick a project folder to keep the rest of your files out of reach.")


def launch_folder(launched_in: str | Path, data_dir: str | Path) -> str:
    """Where a new session's folder starts: the folder the app was launched from (`turnkey`
    typed in a project), unless that is one of the folders above (home, `/`) or the app's data
    folder (or inside it); else the home folder."""
    real, data = os.path.realpath(launched_in), os.path.realpath(data_dir)
    if rooted_where(real) is not None or real == data or real.startswith(data + "/"):
        return os.path.expanduser("~")
    return real
