"""shared/folders.py: which session folders hold all of a person's files, judged as the command
policy judges them, and the words a session summary carries."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.tools import policy
from shared.folders import folder_warning, launch_folder, rooted_where


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME is tmp/people/me, reached through a symbolic link (as /home -> /usr/home is)."""
    real = tmp_path / "real" / "me"
    real.mkdir(parents=True)
    (real / "project").mkdir()
    (tmp_path / "people").symlink_to(tmp_path / "real")
    monkeypatch.setenv("HOME", str(tmp_path / "people" / "me"))
    return real


def test_the_command_policy_judges_by_it(home: Path) -> None:
    """In smart mode an interpreter asks where the session folder holds everything."""
    for folder in ("/", "//", str(home), f"{home}/", str(home.parent.parent / "people" / "me"),
                   str(home.parent)):
        assert policy.home_rooted_guard("python3 -c 'print(1)'", "smart", Path(folder)) is not None, folder
    assert policy.home_rooted_guard("python3 -c 'print(1)'", "smart", home / "project" / "..") is not None
    for ordinary in (home / "project", home.parent.parent / "elsewhere", Path("/usr")):
        assert policy.home_rooted_guard("python3 -c 'print(1)'", "smart", ordinary) is None, ordinary


def test_home_slash_and_what_holds_home_warn_and_other_folders_do_not(home: Path) -> None:
    assert rooted_where(str(home)) == rooted_where(home.parent.parent / "people" / "me") \
        == "your home folder"
    assert rooted_where("/") == "/ (the whole file system)"
    assert rooted_where(str(home.parent)) == f"{home.parent}, which holds your home folder"
    for ordinary in (home / "project", home.parent.parent / "elsewhere", Path(f"{home}2")):
        assert rooted_where(ordinary) is None, ordinary
        assert folder_warning(str(ordinary)) is None, ordinary
    assert folder_warning(str(home)) == (
        "This session's folder is your home folder: the sandbox lets the agent's commands change "
        "every file in it. Pick a project folder to keep the rest of your files out of reach.")


def test_a_new_session_starts_in_the_folder_the_app_was_launched_from(home: Path) -> None:
    """Launched in a project, the app offers it; launched in home, `/`, a folder holding home
    or its own data folder (a launcher's working directory), it offers home."""
    data = home / ".local" / "share" / "turnkey"
    (data / "logs").mkdir(parents=True)
    assert launch_folder(home / "project", data) == str(home / "project")
    assert launch_folder(home.parent.parent / "people" / "me" / "project", data) == str(home / "project")
    for launcher in (home, "/", home.parent, data, data / "logs"):
        assert launch_folder(launcher, data) == str(home.parent.parent / "people" / "me"), launcher
