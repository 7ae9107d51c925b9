"""The approval policy: which calls never run, which ask a person, and what a stored rule allows.

Pure functions over a command line or a path (resolving a path opens folders
and reads symlinks, nothing else).  The terminal's verdict comes from judging
every simple command of the line on its own (see `commands`), then from what
the call asks to leave the sandbox for, or, where there is none, from whether
it plainly only reads (see `readonly`).  A rule
for a command prefix allows a call only when every part that needed approval
starts with that prefix, so a rule for `git push` never lets `git push; rm -rf x`
through.  File tools are judged by where the resolved path really lands (see
`landing`): never in the data folder, and a change asks outside the session
folder; the run resolves once more, into the fd it writes through, and
refuses if that lands anywhere else than what was judged.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any, Literal

from backend.tools import beneath, protected, readonly
from backend.tools import shellwords as sw
from backend.tools.base import Guard
from backend.tools.commands import classify_command, command_prefix, segments
from backend.tools.landing import Landing, Seal, land
from backend.tools.skills import project_file
from shared.config import ApprovalMode
from shared.folders import rooted_where

FILE_TOOLS = frozenset({"write_file", "patch"})
# Tools whose rule names the folder a change lands in: the file tools, and `skill_manage`
# writing a project's skill (a file change: an `always` answer to it must cover the next one).
FOLDER_RULED = FILE_TOOLS | {"skill_manage"}
ASK_MODE_REASON = "every command asks in ask mode"

# What a terminal call asks to leave the sandbox for; stored rules name it as "@network"...
Escape = Literal["network", "unsandboxed"] | None
ESCAPE_REASONS = {
    "network": "needs the network, which the sandbox cuts off",
    "unsandboxed": "runs outside the sandbox, where it can change any file you can and reach the network",
}
NO_SANDBOX_REASON = "commands run without a sandbox here, so every command that is not plainly read-only asks"


# ---- public API ----------------------------------------------------------------------


def command_guard(command: str, mode: ApprovalMode) -> Guard | None:
    """The policy alone: hardline in every mode; smart asks for dangerous; ask asks always."""
    verdict = classify_command(command)
    if verdict is not None and verdict.kind == "hardline":
        return verdict
    if mode == "off":
        return None
    if mode == "smart":
        return verdict
    if verdict is not None:  # keyed on the dangerous part, so an `always` rule can match it again
        return verdict
    return Guard("dangerous", ASK_MODE_REASON, command_prefix(command))


# Programs that run code given to them: a one-liner or a script can do anything a shell can,
# and none of it is visible to the policy.
INTERPRETERS = frozenset({
    "python", "python2", "python3", "perl", "ruby", "node", "nodejs", "deno", "bun", "php",
    "lua", "tclsh", "Rscript", "julia", "osascript", "pwsh", "awk", "gawk", "mawk",
})
HOME_ROOTED_REASON = ("runs {prog}, an interpreter, in a session whose folder is {where}: the "
                      "sandbox protects nothing here, since every file of yours is inside it")


def home_rooted_guard(command: str, mode: ApprovalMode, cwd: Path) -> Guard | None:
    """In `smart` mode, a session rooted at the home folder or / asks before any interpreter
    runs (destructive commands ask anyway): `python3 -c 'shutil.rmtree(...)'` is a plain
    command to the policy."""
    where = rooted_where(cwd) if mode == "smart" else None
    if where is None:
        return None
    for part in segments(command):
        prog = sw.program(list(part.words)) if part.words else ""
        if prog in INTERPRETERS:
            return Guard("dangerous", HOME_ROOTED_REASON.format(prog=prog, where=where),
                         command_prefix(shlex.join(part.words)))
    return None


MAX_WRITABLE = 16
_NEVER_WRITABLE = ("/", "/proc", "/sys", "/dev")


def outside_targets(command: str, cwd: Path, workdir: Path | None = None) -> tuple[str, ...]:
    """Paths outside the session folder `cwd` that a part of the command needing approval
    names (`rm -rf ../old`, `mv build ~/Desktop/`): the real folder that holds each, since
    deleting, renaming or creating a file changes its folder.  Once a person allows the
    call, the sandbox lets it change exactly these folders, and the question names them."""
    root = os.path.realpath(cwd)
    base = os.fspath(workdir or cwd)
    out: list[str] = []
    for part in segments(command):
        if part.kind != "dangerous":
            continue
        for word in part.words[1:]:
            if not word or word.startswith("-") or "\0" in word or "://" in word:
                continue
            real = os.path.realpath(os.path.join(base, os.path.expanduser(word)))
            if inside(Path(real), Path(root)):
                continue
            target = os.path.dirname(real)  # removing, renaming or making it changes its folder
            if target in _NEVER_WRITABLE or not os.path.isdir(target) or target in out:
                continue
            out.append(target)
    return tuple(out[:MAX_WRITABLE])


def shown_path(path: str) -> str:
    """A path for people: the home folder as ~."""
    home = os.path.realpath(Path.home())
    return "~" + path[len(home):] if inside(Path(path), Path(home)) and home != "/" else path


def sandboxed_guard(
    command: str, mode: ApprovalMode, escape: Escape, cwd: Path | None = None,
    workdir: Path | None = None,
) -> Guard | None:
    """The terminal's guard inside the sandbox: the policy, plus a question for whatever the
    call asks to leave the sandbox for.  A call that needs both is keyed on its command (a
    rule for the command never covers an escape, so the escape is asked again next time).
    `cwd`: the session folder; rooted at home or /, interpreters ask too.  A part that asks
    anyway and names paths outside the session folder (`outside_targets`) is allowed, once,
    to change them: the question says so."""
    base = command_guard(command, mode)
    if base is None and cwd is not None:
        base = home_rooted_guard(command, mode, cwd)
    if (base is not None and base.kind == "hardline") or mode == "off":
        return base
    if base is not None and cwd is not None and escape is None:
        targets = outside_targets(command, cwd, workdir)
        if targets:
            shown = ", ".join(shown_path(t) for t in targets)
            return Guard("dangerous", f"{base.reason}; once allowed, it runs with {shown} writable "
                         "(outside the session folder, which the sandbox otherwise keeps read-only; "
                         "asked every time)", base.rule_key, targets)
    if escape is None:
        return base
    need = ESCAPE_REASONS[escape]
    if base is None:
        return Guard("dangerous", f"{need[0].upper()}{need[1:]}", f"@{escape}")
    return Guard("dangerous", f"{base.reason}; and it {need}", base.rule_key)


def unsandboxed_guard(command: str, mode: ApprovalMode, cwd: Path, data_dir: Path) -> Guard | None:
    """The terminal's guard where no sandbox exists: `smart` asks for every command that is
    not plainly read-only (see `readonly`), since nothing else stands between it and the disk."""
    base = command_guard(command, mode)
    if base is not None or mode != "smart":
        return base
    why = readonly.why_not_read_only(command, cwd, data_dir)
    if why is None:
        return None
    return Guard("dangerous", f"{NO_SANDBOX_REASON} ({why})", command_prefix(command))


class BadPath(ValueError):
    """A path no file can have (it holds a NUL byte); the message says so."""


def resolve_path(path: str, cwd: Path) -> Path:
    """`~` expanded, relative to cwd, symlinks and `..` resolved.  Never raises for a path
    a file could have: an unknown `~user` stays a literal name (as in the shell) and a symlink
    loop is left unresolved (opening it fails later); raises BadPath for a NUL byte."""
    if "\0" in path:
        raise BadPath(f"invalid path {path!r}: it holds a NUL byte, which no file name can")
    return Path(os.path.realpath(os.path.join(cwd, os.path.expanduser(path))))


def inside(path: Path, folder: Path) -> bool:
    """True when path is folder or below it (both already resolved)."""
    return path == folder or path.is_relative_to(folder)


def locate(path: str, cwd: Path) -> beneath.Place:
    """`path` (`~` expanded, relative to cwd) resolved once, into an open folder (close it).
    Raises BadPath for a NUL byte and OSError when the path cannot be resolved."""
    if "\0" in path:
        raise BadPath(f"invalid path {path!r}: it holds a NUL byte, which no file name can")
    return beneath.locate(os.path.expanduser(path), str(cwd))


def landing_of(path: str, cwd: Path, data_dir: Path, *, reading: bool) -> Landing | None:
    """Where `path` lands now; None when it cannot be resolved (the tool's run says why)."""
    try:
        with locate(path, cwd) as place:
            return land(place, cwd, Seal.of(data_dir), reading=reading)
    except (BadPath, OSError):
        return None


def file_guard(
    tool_name: str, path: str, cwd: Path, mode: ApprovalMode, data_dir: Path
) -> Guard | None:
    """File changes: never in a sealed place; off never asks; ask always asks; smart asks
    outside the session folder.  The run judges its own resolution again (`still_allowed`)."""
    landing = landing_of(path, cwd, data_dir, reading=False)
    return None if landing is None else change_guard(tool_name, landing, mode)


def change_guard(tool_name: str, landing: Landing, mode: ApprovalMode) -> Guard | None:
    """The guard of a change that lands at `landing`; its rule key is the real folder."""
    if landing.sealed is not None:
        return Guard("hardline", landing.sealed, landing.folder)
    if mode == "off":
        return None
    if mode == "ask":
        return Guard("dangerous", f"every file change asks in ask mode ({tool_name})", landing.folder)
    if not landing.inside:
        how = ": the path leads there through a symlink" if landing.linked_out else ""
        return Guard("dangerous", f"changes a file outside the session folder{how}", landing.folder)
    if landing.protected is not None:
        return Guard("dangerous", landing.protected, landing.folder)
    return None


def read_guard(path: str, cwd: Path, data_dir: Path) -> Guard | None:
    """Reading never asks, inside the session folder or not; it never runs in a sealed place."""
    landing = landing_of(path, cwd, data_dir, reading=True)
    if landing is not None and landing.sealed is not None:
        return Guard("hardline", landing.sealed, landing.folder)
    return None


def still_allowed(now: Guard | None, approved: Guard | None) -> bool:
    """Whether a change may go ahead where the run's own resolution lands (`now`, its guard),
    given what was allowed before it ran (`approved`: the guard a person or a rule allowed,
    None when it needed no approval).  A path that now leads anywhere else is refused: a
    symlink changed between the check and the run."""
    if now is None:
        return True
    if now.kind == "hardline" or approved is None:
        return False
    return (now.kind, now.rule_key) == (approved.kind, approved.rule_key)


def rule_allows(
    rule_tool: str, rule_pattern: str, tool: str, args: dict[str, Any], cwd: Path,
    *, mode: ApprovalMode = "smart", key: str | None = None,
) -> bool:
    """Whether a stored rule covers this call.  Terminal: every part that needs approval
    (in ask mode: every part) starts with the rule's words; never for hardline.  File
    tools: the folder the call lands in is inside the rule's folder; `key` is that folder as
    the call's guard resolved it (so the rule and the run judge that one resolution; without
    it the path is resolved here).  Rules match their own tool only."""
    if rule_tool != tool:
        return False
    if tool == "terminal":
        escape: Escape = ("unsandboxed" if args.get("sandbox") is False
                          else "network" if args.get("network") else None)
        command = str(args.get("command", ""))
        workdir = args.get("workdir")
        try:
            where = resolve_path(str(workdir), cwd) if workdir else cwd
        except BadPath:
            return False
        if escape is None and outside_targets(command, cwd, where):
            return False  # a change outside the session folder is allowed once, by a person
        if rule_pattern.startswith("@"):  # a rule for an escape covers calls that need nothing else
            return (escape is not None and rule_pattern == f"@{escape}" and mode == "smart"
                    and classify_command(command) is None)
        return escape is None and _command_rule_allows(rule_pattern, command, mode)
    if tool.startswith("mcp__"):  # an MCP tool's rule names the tool: it allows that tool's calls
        return rule_pattern == tool
    if tool in FOLDER_RULED and rule_pattern:
        path = changed_path(tool, args)
        if path is None:
            return False
        if key is None:
            try:
                with locate(path, cwd) as place:
                    key = place.folder
            except (BadPath, OSError):
                return False
        # Both are real paths already: compared as written, so nothing is resolved twice.
        folder = os.path.abspath(rule_pattern)
        target = os.path.join(key, os.path.basename(path))
        if protected.why(target, cwd) and not protected.why(folder, cwd):
            return False  # a rule for a folder never covers its .git/hooks or .vscode/
        return inside(Path(key), Path(folder))
    return False


def changed_path(tool: str, args: dict[str, Any]) -> str | None:
    """The path a folder-ruled call changes, as the model gave it (relative to the session
    folder); None for a call that changes no project file (a skill of the person's own)."""
    if tool in FILE_TOOLS:
        return str(args.get("path", ""))
    if tool == "skill_manage" and args.get("scope") == "project":
        return project_file(str(args.get("name", "")))
    return None


def _command_rule_allows(pattern: str, command: str, mode: ApprovalMode) -> bool:
    wanted = tuple(sw.words_of(pattern))
    parts = segments(command)
    if not wanted or not parts or any(p.kind == "hardline" for p in parts):
        return False
    needing = [p for p in parts if p.kind == "dangerous"]
    if mode == "ask" or not needing:
        needing = parts
    return all(p.words[: len(wanted)] == wanted for p in needing)

