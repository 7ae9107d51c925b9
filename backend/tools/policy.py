"""The approval policy: which calls never run, which ask a person, and what a stored rule allows.

Pure functions over a command line or a path (resolving a path opens folders
and reads symlinks, nothing else).  The terminal's verdict comes from judging
every simple command of the line on its own (see `shellwords`), hardline
beating dangerous; a rule
for a command prefix allows a call only when every part that needed approval
starts with that prefix, so a rule for `git push` never lets `git push; rm -rf x`
through.  File tools are judged by where the resolved path really lands (see
`landing`): never in the data folder, and a change asks outside the session
folder; the run resolves once more, into the fd it writes through, and
refuses if that lands anywhere else than what was judged.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from backend.tools import beneath, readonly
from backend.tools import shellwords as sw
from backend.tools.base import ApprovalMode, Guard, GuardKind
from backend.tools.landing import Landing, Seal, land

FILE_TOOLS = frozenset({"write_file", "patch"})
ASK_MODE_REASON = "every command asks in ask mode"

_MAX_DEPTH = 6
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "busybox"})
_INTERPRETERS = _SHELLS | frozenset(
    {"python", "python2", "python3", "perl", "ruby", "node", "php", "source", "."}
)
_DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c"})
_ESCALATORS = frozenset({"sudo", "doas", "pkexec", "run0"})
_SUDO_VALUES = frozenset({
    "-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user", "--group", "--host",
    "--prompt", "--close-from", "--chdir", "--role", "--type", "--other-user", "--command-timeout",
})
_SU_VALUES = frozenset(
    {"-s", "--shell", "-g", "--group", "-G", "--supp-group", "-w", "--whitelist-environment"}
)
_GIT_VALUES = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"}
)
_OPTIONS_BEFORE_SUBCOMMAND = {"git": _GIT_VALUES, "sudo": _SUDO_VALUES, "doas": _SUDO_VALUES}
_POWER = frozenset({"shutdown", "reboot", "halt", "poweroff"})
_SYSTEMCTL_POWER = frozenset({"poweroff", "reboot", "halt", "kexec", "soft-reboot"})
_KILLERS = frozenset({"kill", "pkill", "killall", "skill", "xkill"})
_SAFE_DEVICES = re.compile(
    r"/dev/(null|zero|full|random|urandom|tty|stdin|stdout|stderr|fd/.*|pts/.*|shm/.*)"
)
# Names and bodies are bounded so a long word or an unclosed brace never costs quadratic time.
_FORK_BOMB = re.compile(r"(?<![\w:.-])([\w:.-]{1,64})\s*(?:\(\s*\))?\s*\{([^{}]{0,300})\}")
_SUBCOMMAND = re.compile(r"[a-z][a-z0-9-]*|-{1,2}[A-Za-z0-9][A-Za-z0-9-]*")

Verdict = tuple[GuardKind, str] | None
# What a terminal call asks to leave the sandbox for; stored rules name it as "@network"...
Escape = Literal["network", "unsandboxed"] | None
ESCAPE_REASONS = {
    "network": "needs the network, which the sandbox cuts off",
    "unsandboxed": "runs outside the sandbox, where it can change any file you can and reach the network",
}
NO_SANDBOX_REASON = "commands run without a sandbox here, so every command that is not plainly read-only asks"


@dataclass(frozen=True)
class Segment:
    """One simple command as the policy sees it: wrappers peeled off, its verdict attached."""

    words: tuple[str, ...]
    kind: GuardKind | None = None
    reason: str = ""


# ---- public API ----------------------------------------------------------------------


def segments(command: str) -> list[Segment]:
    """Every simple command of the line, substitutions and `sh -c` scripts included."""
    return _analyze(command, 0)


def classify_command(command: str) -> Guard | None:
    """Hardline if any part must never run, else dangerous if any part needs approval."""
    parts = segments(command)
    found = next((p for p in parts if p.kind == "hardline"), None)
    found = found or next((p for p in parts if p.kind == "dangerous"), None)
    if found is None or found.kind is None:
        return None
    return Guard(found.kind, found.reason, _prefix(found.words))


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


def sandboxed_guard(command: str, mode: ApprovalMode, escape: Escape) -> Guard | None:
    """The terminal's guard inside the sandbox: the policy, plus a question for whatever the
    call asks to leave the sandbox for.  A call that needs both is keyed on its command (a
    rule for the command never covers an escape, so the escape is asked again next time)."""
    base = command_guard(command, mode)
    if (base is not None and base.kind == "hardline") or mode == "off":
        return base
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


def command_prefix(command: str) -> str:
    """The first simple command's program, plus its first argument when that is a subcommand
    word or a flag: `git push --force x` → `git push`, `rm -rf b/` → `rm -rf`, `ls` → `ls`."""
    parts = segments(command)
    return _prefix(parts[0].words) if parts else ""


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
        if rule_pattern.startswith("@"):  # a rule for an escape covers calls that need nothing else
            return (escape is not None and rule_pattern == f"@{escape}" and mode == "smart"
                    and classify_command(command) is None)
        return escape is None and _command_rule_allows(rule_pattern, command, mode)
    if tool in FILE_TOOLS and rule_pattern:
        if key is None:
            try:
                with locate(str(args.get("path", "")), cwd) as place:
                    key = place.folder
            except (BadPath, OSError):
                return False
        # Both are real paths already: compared as written, so nothing is resolved twice.
        return inside(Path(key), Path(os.path.abspath(rule_pattern)))
    return False


def _command_rule_allows(pattern: str, command: str, mode: ApprovalMode) -> bool:
    wanted = tuple(sw.words_of(pattern))
    parts = segments(command)
    if not wanted or not parts or any(p.kind == "hardline" for p in parts):
        return False
    needing = [p for p in parts if p.kind == "dangerous"]
    if mode == "ask" or not needing:
        needing = parts
    return all(p.words[: len(wanted)] == wanted for p in needing)


def _prefix(words: tuple[str, ...]) -> str:
    if not words:
        return ""
    takes_value = _OPTIONS_BEFORE_SUBCOMMAND.get(sw.program(list(words)))
    if takes_value is not None and len(words) > 1 and words[1].startswith("-"):
        rest = sw.skip_options(list(words[1:]), takes_value)
        if rest:  # `git -C repo push` → `git -C repo push`, not the far broader `git -C`
            return shlex.join(words[: len(words) - len(rest) + 1])
    head = list(words[:2]) if len(words) > 1 and _SUBCOMMAND.fullmatch(words[1]) else [words[0]]
    return shlex.join(head)


# ---- splitting a line into judged segments -----------------------------------------------


def _analyze(command: str, depth: int) -> list[Segment]:
    if depth > _MAX_DEPTH:
        return [Segment(tuple(command.split()), "dangerous", "too deeply nested to check")]
    out: list[Segment] = []
    if _is_fork_bomb(command):
        out.append(Segment(tuple(command.split()), "hardline", "fork bomb"))
    for pipeline in sw.split_pipelines(command):
        out.extend(_pipeline(pipeline, depth))
    return out


def _pipeline(stages: list[sw.Stage], depth: int) -> list[Segment]:
    """Each stage judged alone, plus the cross-stage dangers: a download fed to a shell, and
    a shell that runs whatever an earlier stage prints (`echo cm0g... | base64 -d | sh`)."""
    out: list[Segment] = []
    fed = False
    for n, stage in enumerate(stages):
        words, writes = sw.split_redirects(sw.words_of(stage.text))
        words = sw.unwrap(words)
        prog = sw.program(_escalated(words))
        pulls = any(sw.program(sw.unwrap(sw.words_of(t))) in _DOWNLOADERS for t in stage.nested)
        if prog in _INTERPRETERS and (fed or pulls):
            out.append(Segment(tuple(words), "dangerous", "pipes a download into a shell"))
        elif n > 0 and _reads_script_from_stdin(_escalated(words)):
            out.append(Segment(tuple(words), "dangerous",
                               "runs a script that an earlier command prints, which cannot be checked"))
        out.extend(_words(words, writes, depth))
        for text in stage.nested:
            out.extend(_analyze(text, depth + 1))
        fed = fed or prog in _DOWNLOADERS
    return out


def _words(words: list[str], writes: list[str], depth: int) -> list[Segment]:
    """Segments for one simple command; `sh -c SCRIPT` and `eval` are judged as their script."""
    device = _device_write(writes)
    script = _script(words)
    if script is not None:
        inner = _analyze(script, depth + 1)
        return [*inner, Segment(tuple(words), *device)] if device else inner
    if not words:
        return [Segment(tuple(writes), *device)] if device else []
    verdict = _worst(device, _verdict(words, depth))
    return [Segment(tuple(words), *verdict) if verdict else Segment(tuple(words))]


def _reads_script_from_stdin(words: list[str]) -> bool:
    """`sh`, `bash -s`, `python3 -`: an interpreter with no script of its own reads one from stdin."""
    prog = sw.program(words)
    if prog not in _INTERPRETERS or prog in ("source", "."):
        return False
    if _script(words) is not None:
        return False
    ops = sw.operands(words[1:])
    return not ops or ops[0] == "-" or "s" in sw.short_flags(words[1:])


def _computed(program: str) -> bool:
    """A program name the shell computes when the line runs (`$(printf rm)`, `$a`, `` `x` ``,
    `{rm,-rf,d}`, `/bin/r?`): what runs cannot be known from the text."""
    return any(c in program for c in "$`*?[{")


def _script(words: list[str]) -> str | None:
    """The script of `sh -c SCRIPT`/`bash -lc SCRIPT` or `eval ...`; None for anything else."""
    prog = sw.program(words)
    if prog == "eval":
        return " ".join(words[1:])
    if prog not in _SHELLS:
        return None
    args = words[2:] if prog == "busybox" else words[1:]
    i = 0
    while i < len(args) and args[i] != "--" and args[i][:1] in ("-", "+"):
        arg = args[i]
        if arg[0] == "-" and not arg.startswith("--") and "c" in arg[1:]:
            rest = sw.operands(args[i + 1 :])
            return rest[0] if rest else ""
        i += 2 if arg in ("-o", "+o", "-O", "+O") else 1
    return None


def _escalated(words: list[str]) -> list[str]:
    """The command that sudo/doas/... runs; the words themselves for anything else."""
    while sw.program(words) in _ESCALATORS:
        words = sw.unwrap(sw.skip_options(words[1:], _SUDO_VALUES))
    return words


def _worst(a: Verdict, b: Verdict) -> Verdict:
    if a is None or (b is not None and b[0] == "hardline" and a[0] != "hardline"):
        return b
    return a


def _is_fork_bomb(command: str) -> bool:
    """A shell function that starts itself twice (`f|f`) or in the background (`f&`)."""
    for match in _FORK_BOMB.finditer(command):
        name, body = re.escape(match.group(1)), match.group(2)
        edge = r"(?<![\w:.-])"
        if re.search(rf"{edge}{name}\s*\|\s*{name}", body) or re.search(rf"{edge}{name}\s*&(?!&)", body):
            return True
    return bool(re.search(r"fork\(\)\s*while\s*fork|while\s*(?:1|True)\s*:\s*os\.fork\(\)", command))


# ---- verdicts for one simple command ------------------------------------------------------


def _verdict(words: list[str], depth: int) -> Verdict:
    prog, args = sw.program(words), words[1:]
    if _computed(words[0]):
        # Judged as the worst it could be: `$(printf rm) -rf ~` is the never-run delete.
        as_rm = _rm(args)
        if as_rm is not None and as_rm[0] == "hardline":
            return ("hardline", f"{as_rm[1]}, with a program name computed at run time")
        return ("dangerous", "the program's name is computed when the line runs "
                "($(...), `...`, a variable or a pattern), so what runs cannot be checked")
    if prog in _ESCALATORS or prog == "su":
        return _escalation(prog, words, depth)
    if prog == "rm":
        return _rm(args)
    if prog == "find":
        return _find(args, depth)
    if prog == "git":
        return _git(args)
    if prog == "dd":
        return _dd(args)
    if prog.startswith("mkfs") or prog in ("mke2fs", "mkswap"):
        return ("hardline", f"formats a disk ({prog})")
    if _powers_off(prog, args):
        return ("hardline", "shuts down or restarts the machine")
    if prog in _KILLERS:
        return ("dangerous", f"kills processes ({prog})")
    if prog in ("chmod", "chown", "chgrp") and _recursive(args, "R"):
        what = "permissions" if prog == "chmod" else "ownership"
        return ("dangerous", f"changes {what} recursively ({prog} -R)")
    if prog == "truncate":
        return ("dangerous", "truncates files")
    if prog == "tee":
        return _device_write(sw.operands(args))
    return None


def _escalation(prog: str, words: list[str], depth: int) -> Verdict:
    own: Verdict = ("dangerous", f"runs as another user ({prog})")
    if prog == "su":
        script = _su_script(words[1:])
        inner = _analyze(script, depth + 1) if script else []
    else:
        inner_words = sw.unwrap(sw.skip_options(words[1:], _SUDO_VALUES))
        inner = _words(inner_words, [], depth + 1)
    for part in inner:
        if part.kind == "hardline":
            return ("hardline", part.reason)
    return own


def _su_script(args: list[str]) -> str | None:
    for i, arg in enumerate(args):
        if arg in ("-c", "--command") and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--command="):
            return arg.split("=", 1)[1]
        if arg in _SU_VALUES:
            continue
    return None


def _recursive(args: list[str], letters: str) -> bool:
    return "--recursive" in sw.long_flags(args) or any(c in sw.short_flags(args) for c in letters)


def _rm(args: list[str]) -> Verdict:
    if "--no-preserve-root" in sw.long_flags(args):
        return ("hardline", "deletes with --no-preserve-root")
    if not _recursive(args, "rR"):
        return None
    for target in sw.operands(args):
        if _critical(target):
            return ("hardline", f"deletes {target} recursively (the root or home folder)")
    return ("dangerous", "recursive delete")


def _critical(target: str) -> bool:
    """`/`, the home folder, a folder holding either of them, or all of their contents."""
    home = str(Path.home())
    for alias in ("~", "$HOME", "${HOME}"):
        if target == alias or target.startswith(alias + "/"):
            target = home + target[len(alias) :]
    if not target.startswith("/"):
        return False
    path = posixpath.normpath(re.sub("/+", "/", target))
    for suffix in ("/*", "/.*", "/**"):
        if path.endswith(suffix):
            path = path[: -len(suffix)] or "/"
    return PurePosixPath(home).is_relative_to(path)


def _find(args: list[str], depth: int) -> Verdict:
    verdict: Verdict = None
    if "-delete" in args:
        roots = [a for a in _find_roots(args) if _critical(a)]
        verdict = ("hardline", f"deletes everything under {roots[0]}") if roots else (
            "dangerous", "deletes the files find matches (-delete)")
    for i, arg in enumerate(args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            inner = args[i + 1 :]
            end = next((j for j, w in enumerate(inner) if w in (";", "+")), len(inner))
            for part in _words(sw.unwrap(inner[:end]), [], depth + 1):
                if part.kind:
                    verdict = _worst(verdict, (part.kind, part.reason))
    return verdict


def _find_roots(args: list[str]) -> list[str]:
    roots: list[str] = []
    for arg in args:
        if arg.startswith(("-", "(", "!")):
            break
        roots.append(arg)
    return roots


def _git(args: list[str]) -> Verdict:
    rest = sw.skip_options(args, _GIT_VALUES)
    sub, opts = (rest[0], rest[1:]) if rest else ("", [])
    if sub == "push":
        longs = sw.long_flags(opts)
        force = bool(longs & {"--force", "--force-with-lease", "--force-if-includes", "--mirror"})
        if force or "f" in sw.short_flags(opts) or any(o.startswith("+") for o in sw.operands(opts)):
            return ("dangerous", "force push (rewrites the remote's history)")
    if sub == "reset" and "--hard" in sw.long_flags(opts):
        return ("dangerous", "hard reset (discards uncommitted changes)")
    if sub == "clean" and ("--force" in sw.long_flags(opts) or "f" in sw.short_flags(opts)):
        return ("dangerous", "git clean -f (deletes untracked files)")
    return None


def _dd(args: list[str]) -> Verdict:
    targets = [a[3:] for a in args if a.startswith("of=")]
    if not targets:
        return None
    if any(t.startswith("/dev/") and not _SAFE_DEVICES.fullmatch(t) for t in targets):
        return ("hardline", f"writes onto a device with dd ({targets[0]})")
    return ("dangerous", "writes with dd (of=)")


def _device_write(targets: list[str]) -> Verdict:
    for target in targets:
        if target.startswith("/dev/") and not _SAFE_DEVICES.fullmatch(target):
            return ("dangerous", f"writes to a device ({target})")
    return None


def _powers_off(prog: str, args: list[str]) -> bool:
    if prog in _POWER:
        return True
    if prog in ("init", "telinit"):
        return bool(args) and args[0] in ("0", "6")
    if prog == "systemctl":
        ops = sw.operands(args)
        return bool(ops) and ops[0] in _SYSTEMCTL_POWER
    return False
