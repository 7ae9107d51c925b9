"""Reading a shell command line for the approval policy: every simple command judged alone.

Pure functions over the text (see `shellwords` for the splitting): each
simple command of the line, substitutions and `sh -c` scripts included, gets a
verdict, hardline (never runs) beating dangerous (asks a person).  A program
whose name is computed when the line runs (`$(printf rm)`, `$a`) is judged as
the worst it could be.  `command_prefix` names a command the way a stored rule
does: `git push --force x` is `git push`.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from backend.tools import shellwords as sw
from backend.tools.base import Guard, GuardKind

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


@dataclass(frozen=True)
class Segment:
    """One simple command as the policy sees it: wrappers peeled off, its verdict attached."""

    words: tuple[str, ...]
    kind: GuardKind | None = None
    reason: str = ""


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


def command_prefix(command: str) -> str:
    """The first simple command's program, plus its first argument when that is a subcommand
    word or a flag: `git push --force x` → `git push`, `rm -rf b/` → `rm -rf`, `ls` → `ls`."""
    parts = segments(command)
    return _prefix(parts[0].words) if parts else ""


def _prefix(words: tuple[str, ...]) -> str:
    """What a stored rule for this simple command names (see `command_prefix`)."""
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
    if prog in ("systemctl", "loginctl"):
        ops = sw.operands(args)
        return bool(ops) and ops[0] in _SYSTEMCTL_POWER
    return False
