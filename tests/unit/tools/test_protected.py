"""Where a person's own tools run code from (protected), sockets to cover, and approvals that
name the folders outside the session they open (policy.outside_targets)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from backend.tools import policy, protected, sockets

GIT_ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}


def _init(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True, env=GIT_ENV)


@pytest.mark.parametrize(("path", "kept"), [
    (".git/hooks/pre-commit", True),
    (".git/config", True),
    (".git/info/attributes", True),
    (".git/modules/lib/hooks/post-checkout", True),
    (".git/worktrees/w/config.worktree", True),
    ("sub/.git/hooks/x", True),
    (".envrc", True),
    ("app/.envrc", True),
    (".vscode/tasks.json", True),
    (".idea/workspace.xml", True),
    (".git/objects/ab/cdef", False),
    (".git/HEAD", False),
    (".git/index", False),
    ("src/hooks/config", False),
    ("notes/.gitignore", False),
])
def test_why_names_the_places_a_persons_tools_run_code_from(tmp_path: Path, path: str, kept: bool) -> None:
    reason = protected.why(os.path.join(os.path.realpath(tmp_path), path), tmp_path)
    assert (reason is not None) is kept, reason
    if reason is not None:
        assert "outside the sandbox" in reason


def test_a_file_tool_change_there_asks_and_a_folder_rule_does_not_cover_it(tmp_path: Path) -> None:
    _init(tmp_path)
    data = tmp_path / "data-elsewhere"
    guard = policy.file_guard("write_file", ".git/hooks/pre-commit", tmp_path, "smart", data)
    assert guard is not None
    assert guard.kind == "dangerous"
    assert "git" in guard.reason
    assert policy.file_guard("write_file", "src/main.py", tmp_path, "smart", data) is None
    assert policy.file_guard("write_file", ".vscode/tasks.json", tmp_path, "off", data) is None
    root = os.path.realpath(tmp_path)
    args = {"path": ".envrc"}
    assert not policy.rule_allows("write_file", root, "write_file", args, tmp_path, key=root)
    assert policy.rule_allows("write_file", root, "write_file", {"path": "a.txt"}, tmp_path, key=root)


def test_the_walk_finds_nested_repositories_worktrees_and_project_files(tmp_path: Path) -> None:
    _init(tmp_path / "a" / "b")
    _init(tmp_path / "main")
    subprocess.run(["git", "-C", str(tmp_path / "main"), "-c", "user.name=t", "-c", "user.email=t@e",
                    "commit", "-q", "--allow-empty", "-m", "x"], check=True, env=GIT_ENV)
    subprocess.run(["git", "-C", str(tmp_path / "main"), "worktree", "add", "-q",
                    str(tmp_path / "wt")], check=True, env=GIT_ENV)
    (tmp_path / "a" / ".envrc").write_text("")
    (tmp_path / "node_modules" / "x").mkdir(parents=True)
    _init(tmp_path / "node_modules" / "x")  # not walked into
    found = protected.scan(tmp_path)
    root = os.path.realpath(tmp_path)
    assert f"{root}/a/b/.git" in found.git_dirs
    assert f"{root}/main/.git" in found.git_dirs
    assert f"{root}/main/.git/worktrees/wt" in found.git_dirs  # from wt's `.git` file
    assert not any("node_modules" in g for g in found.git_dirs)
    assert found.project == (f"{root}/a/.envrc",)
    mounts = found.mounts()
    pinned = mounts.index(("--bind", f"{root}/a/b/.git"))
    assert mounts.index(("--ro-bind", f"{root}/a/b/.git/hooks")) > pinned
    assert ("--ro-bind", f"{root}/a/b/.git/config") in mounts


def test_hooks_path_in_the_project_is_protected_too(tmp_path: Path) -> None:
    _init(tmp_path)
    (tmp_path / ".husky").mkdir()
    subprocess.run(["git", "-C", str(tmp_path), "config", "core.hooksPath", ".husky"], check=True,
                   env=GIT_ENV)
    assert f"{os.path.realpath(tmp_path)}/.husky" in protected.scan(tmp_path).project


def test_planted_names_hooks_and_program_config_of_a_new_repository_only(tmp_path: Path) -> None:
    before = protected.scan(tmp_path)
    _init(tmp_path / "plain")
    assert protected.planted(before, protected.scan(tmp_path)) == []  # git init alone is fine
    _init(tmp_path / "bad")
    (tmp_path / "bad/.git/hooks").mkdir(exist_ok=True)
    (tmp_path / "bad/.git/hooks/post-checkout").write_text("#!/bin/sh\n")
    subprocess.run(["git", "-C", str(tmp_path / "bad"), "config", "core.fsmonitor", "evil"],
                   check=True, env=GIT_ENV)
    (tmp_path / ".vscode").mkdir()
    found = protected.planted(before, protected.scan(tmp_path))
    root = os.path.realpath(tmp_path)
    assert sorted(found) == sorted([f"{root}/bad/.git/hooks/post-checkout", f"{root}/bad/.git/config",
                                    f"{root}/.vscode"])


def test_outside_targets_are_the_folders_an_asking_part_changes(tmp_path: Path) -> None:
    session = tmp_path / "s"
    (session / "inner").mkdir(parents=True)
    (tmp_path / "old").mkdir()
    real = os.path.realpath(tmp_path)
    assert policy.outside_targets("rm -rf ../old", session) == (real,)
    assert policy.outside_targets("rm -rf inner", session) == ()
    assert policy.outside_targets("ls ../old", session) == ()  # asks nothing: no target
    assert policy.outside_targets("rm -rf /", session) == ()  # never writable
    guard = policy.sandboxed_guard("rm -rf ../old", "smart", None, session)
    assert guard is not None
    assert guard.writable == (real,)
    assert f"{real} writable" in guard.reason
    # A stored rule for `rm -rf` never covers a change outside the session folder.
    assert policy.rule_allows("terminal", "rm -rf", "terminal", {"command": "rm -rf inner"}, session)
    assert not policy.rule_allows("terminal", "rm -rf", "terminal", {"command": "rm -rf ../old"}, session)


def test_sockets_are_found_in_hidden_folders_of_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(sockets, "CACHE_S", 0.0)
    (tmp_path / ".ssh").mkdir()
    path = str(tmp_path / ".ssh" / "cm-me@server:22")
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(path)
        found = sockets.find()
        assert os.path.realpath(path) in found
        assert os.path.realpath(path) not in sockets.find(skip=[str(tmp_path / ".ssh")])
    finally:
        server.close()
