"""Project files a person's own tools run code from without asking, kept out of a command's reach.

A sandboxed command may change everything in the session folder, but some of
what it holds is not data: git runs `.git/hooks/*` and what `.git/config` names
(`core.fsmonitor`, `core.hooksPath`, filters, aliases) on the person's next
`git status`, which shells and editors run on their own; direnv loads `.envrc`
on `cd`; editors run tasks and settings from `.vscode/` and `.idea/`.  A command
that planted code there would have it run later, outside the sandbox.

So inside the sandbox these are read-only (`mounts`), in the session folder and
in the git repositories and projects below it, found by a bounded walk; `.git`
itself is mounted onto itself, so it cannot be renamed or removed and replaced
by one the command wrote.  Everything else in `.git` stays writable: `git
commit`, `git checkout` and the rest work as before.  What a command creates
there from nothing (a new repository it made with `git init`) cannot be
protected in advance; `planted` compares two walks and names what appeared, so
the result can say so.  A file tool's change there asks (`why`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

IN_GIT = ("hooks", "info", "config", "config.worktree")  # inside a git folder
PROJECT_NAMES = (".envrc", ".vscode", ".idea")  # beside one, or anywhere in a project
_MADE_IF_MISSING = {"hooks": True, "info": True}  # folders git makes itself: made so they can be pinned
MAX_DEPTH = 3  # folders below the session folder looked into
MAX_FOLDERS = 400  # folders looked into in all; a walk past this stops (the rest is not protected)
MAX_REPOS = 64
_SKIP = frozenset({"node_modules", "__pycache__", "venv", "site-packages", "target", "dist", "build"})

REASON = ("it changes {what}, which {who} runs outside the sandbox without asking: code written "
          "there would run the next time you use {tool} in this folder")


@dataclass(frozen=True)
class Found:
    """What a walk found: git folders (real paths) and project files (real paths)."""

    root: str  # the session folder's real path
    git_dirs: tuple[str, ...]
    project: tuple[str, ...]

    def mounts(self) -> list[tuple[str, str]]:
        """bubblewrap's (option, path) pairs, in order: each git folder pinned, then its
        code-bearing parts and the project files read-only."""
        out: list[tuple[str, str]] = []
        for git in self.git_dirs:
            out.append(("--bind", git))
            for name in IN_GIT:
                path = os.path.join(git, name)
                if name in _MADE_IF_MISSING and not os.path.lexists(path):
                    try:
                        os.mkdir(path, 0o755)
                    except OSError:
                        continue
                real = os.path.realpath(path)
                if os.path.exists(real) and _under(real, self.root):
                    out.append(("--ro-bind", real))  # a link's target, if it is in the project
        out += [("--ro-bind", path) for path in self.project]
        return out


def scan(session_dir: Path, workdir: Path | None = None) -> Found:
    """The code-bearing places in the session folder and below it (and on the way to
    `workdir`), bounded: see MAX_DEPTH, MAX_FOLDERS, MAX_REPOS."""
    root = os.path.realpath(session_dir)
    gits: list[str] = []
    project: list[str] = []
    seen: set[str] = set()
    for folder in _folders(root, workdir):
        if folder in seen:
            continue
        seen.add(folder)
        for name in (".git", *PROJECT_NAMES):
            path = os.path.join(folder, name)
            if not os.path.lexists(path):
                continue
            real = os.path.realpath(path)
            if not _under(real, root):
                continue  # read-only anyway: the sandbox writes only in the session folder
            if name == ".git":
                for git in _git_dirs(real, root):
                    if git not in gits and len(gits) < MAX_REPOS:
                        gits.append(git)
                        hooks = _hooks_path(git, folder, root)
                        if hooks is not None and hooks not in project:
                            project.append(hooks)
            elif real not in project:
                project.append(real)
    return Found(root, tuple(gits), tuple(project))


def planted(before: Found, after: Found) -> list[str]:
    """What appeared between two walks that a person's tools would run: hooks (not git's
    `.sample` files) and config in new git folders, new project files.  Real paths."""
    out = [p for p in after.project if p not in before.project]
    for git in after.git_dirs:
        if git in before.git_dirs:
            continue
        hooks = os.path.join(git, "hooks")
        try:
            names = sorted(os.listdir(hooks))
        except OSError:
            names = []
        out += [os.path.join(hooks, n) for n in names if not n.endswith(".sample")]
        if _configures_programs(os.path.join(git, "config")):
            out.append(os.path.join(git, "config"))
    return out


def why(real: str, session_dir: Path) -> str | None:
    """Why a file tool's change at the real path `real` asks even in the session folder,
    or None.  Judged on the path's parts below the session folder."""
    root = os.path.realpath(session_dir)
    if not _under(real, root) or real == root:
        return None
    parts = Path(os.path.relpath(real, root)).parts
    for i, part in enumerate(parts):
        if part in PROJECT_NAMES:
            what, who, tool = {
                ".envrc": (".envrc", "direnv", "a shell with direnv"),
                ".vscode": (".vscode/", "VS Code", "VS Code"),
                ".idea": (".idea/", "a JetBrains IDE", "the IDE"),
            }[part]
            return REASON.format(what=what, who=who, tool=tool)
        if part == ".git" and i + 1 < len(parts) and _code_in_git(parts[i + 1:]):
            shown = "/".join(parts[i:i + 3])
            return REASON.format(what=shown, who="git", tool="git")
    return None


# ---- the walk -----------------------------------------------------------------------------


def _folders(root: str, workdir: Path | None) -> Iterator[str]:
    """The session folder, the folders on the way to `workdir`, then the tree below the
    session folder breadth first (no hidden folders, no symlinks, bounded)."""
    yield root
    if workdir is not None:
        here = os.path.realpath(workdir)
        chain = []
        while _under(here, root) and here != root:
            chain.append(here)
            here = os.path.dirname(here)
        yield from reversed(chain)
    level, visited = [root], 0
    for _ in range(MAX_DEPTH):
        below = []
        for folder in level:
            try:
                entries = os.scandir(folder)
            except OSError:
                continue
            with entries:
                for entry in entries:
                    if entry.name.startswith(".") or entry.name in _SKIP:
                        continue
                    try:
                        if not entry.is_dir(follow_symlinks=False):
                            continue
                    except OSError:
                        continue
                    visited += 1
                    if visited > MAX_FOLDERS:
                        return
                    yield entry.path
                    below.append(entry.path)
        level = below


def _git_dirs(dot_git: str, root: str) -> list[str]:
    """The git folders a `.git` entry stands for: itself (a folder) or the one its `gitdir:`
    line names (a worktree, a submodule), the common folder a worktree shares, and the
    folders of the submodules kept inside it; only those in the session folder."""
    first = dot_git
    if os.path.isfile(dot_git):
        try:
            line = Path(dot_git).read_text(errors="replace").strip()
        except OSError:
            return []
        if not line.startswith("gitdir:"):
            return []
        first = os.path.realpath(os.path.join(os.path.dirname(dot_git), line[7:].strip()))
    found = [first]
    try:
        common = Path(first, "commondir").read_text().strip()
        found.append(os.path.realpath(os.path.join(first, common)))
    except OSError:
        pass
    modules = os.path.join(first, "modules")
    for current, dirs, _files in os.walk(modules):
        if os.path.exists(os.path.join(current, "HEAD")):
            found.append(os.path.realpath(current))
        if current.count(os.sep) - modules.count(os.sep) >= MAX_DEPTH:
            dirs.clear()
    return [g for g in dict.fromkeys(found) if _under(g, root) and os.path.isdir(g)]


def _hooks_path(git: str, top: str, root: str) -> str | None:
    """The folder `core.hooksPath` names (husky's `.husky`, say), when it is in the session
    folder: git runs what is there as it would `.git/hooks`."""
    try:
        text = Path(git, "config").read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip().lower() == "hookspath" and value.strip():
            path = os.path.expanduser(value.strip().strip('"'))
            real = os.path.realpath(os.path.join(top, path))
            return real if _under(real, root) and os.path.exists(real) else None
    return None


def _code_in_git(rest: tuple[str, ...]) -> bool:
    """Whether a path below a `.git` folder is one git runs code from (or is told to)."""
    if rest[0] in IN_GIT:
        return True
    if rest[0] == "modules":  # a submodule's own git folder: modules/<name>/.../hooks
        return any(p in IN_GIT for p in rest[1:])
    if rest[0] == "worktrees" and len(rest) >= 3:
        return rest[2] in IN_GIT
    return False


_PROGRAM_KEYS = ("fsmonitor", "hookspath", "sshcommand", "pager", "editor", "askpass", "textconv",
                 "gitproxy", "external", "driver", "clean", "smudge", "process", "helper", "program",
                 "include", "path", "cmd", "!")


def _configures_programs(config: str) -> bool:
    """Whether a git config file sets something git runs (a rough reading: any key or
    value naming a program, an include, or a shell alias); a new repository's config
    from `git init` does not."""
    try:
        text = Path(config).read_text(errors="replace").lower()
    except OSError:
        return False
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and ("include" in line or "filter" in line or "alias" in line):
            return True
        key = line.split("=", 1)[0].strip()
        if any(word in key for word in _PROGRAM_KEYS) or "!" in line:
            return True
    return False


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")
