"""Plainly read-only commands: what the fallback policy lets run unasked where no sandbox exists.

Without a sandbox nothing stops a command from writing anywhere the user can,
so `smart` mode asks for every command except the ones this module can show
only read: every simple command is a known reader (`ls`, `cat`, `grep`,
`git status`, ...), nothing is written except to /dev/null, no word is
computed when the line runs (`$x`, `$(...)`, backticks: their value cannot
be known here), and no path it names reaches Turnkey's data folder (the
owner token, the database, secrets) or another process's environment or
memory under /proc.  When in doubt the answer is "not read-only": a person
is asked, which is the safe mistake.
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path

from backend.tools import shellwords as sw

_READERS = frozenset({
    "ls", "cat", "head", "tail", "grep", "egrep", "fgrep", "rg", "wc", "pwd", "echo", "printf",
    "true", "false", "test", "[", "stat", "file", "du", "df", "which", "whoami", "id", "uname",
    "date", "basename", "dirname", "realpath", "readlink", "cut", "tr", "diff", "cmp", "md5sum",
    "sha1sum", "sha256sum", "sha512sum", "tree", "nl", "od", "hexdump", "find", "sort", "uniq",
    "git", "type", "hostname", "nproc", "free", "uptime", "tac", "rev", "column", "jq", "less",
    "more", "seq", "sleep", "printenv", "locale", "getconf", "lsb_release", "python3", "python",
    "node", "go", "cargo", "rustc", "gcc", "npm", "pip", "pip3",
})
# Programs that are read-only only for these first arguments (`python --version`).
_VERSION_ONLY = frozenset({"python3", "python", "node", "go", "cargo", "rustc", "gcc", "npm", "pip", "pip3"})
_VERSION_FLAGS = frozenset({"--version", "-V", "version", "-version"})
_GIT_READERS = frozenset({
    "status", "log", "diff", "show", "rev-parse", "ls-files", "blame", "describe", "shortlog",
    "grep", "cat-file", "ls-tree", "reflog", "whatchanged",
})
_FIND_WRITERS = frozenset({"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0",
                           "-fprintf", "-fls"})
_RECURSIVE = frozenset({"rg", "find", "tree", "du"})
_PATTERN_FIRST = frozenset({"grep", "egrep", "fgrep", "rg"})  # their first operand is no path
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_PROC_SECRET = re.compile(
    r"/proc/[^/]+/(?:task/[^/]+/)?(environ|mem|maps|smaps|auxv|pagemap|fd|map_files|root|cwd)(/|$)")
_GLOB = re.compile(r"[*?\[]")
_MAX_GLOB = 2_000
_MAX_DEPTH = 4


def why_not_read_only(command: str, cwd: Path, data_dir: Path, depth: int = 0) -> str | None:
    """None when the command plainly only reads; else why not, in words for the approval."""
    if depth > _MAX_DEPTH:
        return "too deeply nested to check"
    if not command.strip():
        return None
    data = Path(os.path.realpath(data_dir))
    for pipeline in sw.split_pipelines(command):
        for stage in pipeline:
            for inner in stage.nested:
                why = why_not_read_only(inner, cwd, data_dir, depth + 1)
                if why:
                    return why
            why = _stage(stage.text, cwd, data)
            if why:
                return why
    return None


def _stage(text: str, cwd: Path, data: Path) -> str | None:
    if "$" in text or "`" in text:
        return "a word of it is computed when it runs ($, `...`), so what it touches cannot be checked"
    words, writes = sw.split_redirects(sw.words_of(text))
    for target in writes:
        if target not in _HARMLESS_TARGETS:
            return f"writes to {target}"
    reads = _read_redirects(sw.words_of(text))
    words = sw.unwrap(words)
    if not words:
        return _paths(reads, cwd, data, recursive=False)
    prog, args = sw.program(words), words[1:]
    if prog not in _READERS or (os.sep in words[0] and not os.path.isabs(words[0])):
        return f"{prog} is not a command known to only read"
    why = _program(prog, args)
    if why:
        return why
    recursive = prog in _RECURSIVE or (prog in ("grep", "egrep", "fgrep", "ls") and _recursive_flag(args))
    operands = [a.split("=", 1)[1] if a.startswith("--") and "=" in a else a for a in args]
    paths = [a for a in operands if not a.startswith("-")] + reads
    if recursive and not sw.operands(args)[1 if prog in _PATTERN_FIRST else 0:]:
        paths.append(".")  # rg, grep -r and find read the working folder by default
    return _paths(paths, cwd, data, recursive)


def _program(prog: str, args: list[str]) -> str | None:
    if prog in _VERSION_ONLY and not (args and args[0] in _VERSION_FLAGS):
        return f"{prog} runs code"
    if prog == "git":
        rest = sw.skip_options(args, frozenset({"-C", "-c", "--git-dir", "--work-tree"}))
        if any(a in ("-c", "--exec-path") or a.startswith("--config-env") for a in args):
            return "git with configuration on the command line can run programs"
        if not rest or rest[0] not in _GIT_READERS:
            return f"git {rest[0] if rest else ''} is not a read-only git command".replace("  ", " ")
        if any(a.startswith(("--output", "--ext-diff", "--textconv")) for a in rest):
            return "git with an output file or an external diff program"
    if prog == "find" and any(a in _FIND_WRITERS for a in args):
        return "find that deletes, writes or runs commands"
    if prog == "sort" and any(a in ("-o", "--compress-program") or a.startswith(("-o", "--output"))
                              for a in args):
        return "sort that writes a file"
    if prog == "uniq" and len(sw.operands(args)) > 1:
        return "uniq that writes a file"
    return None


def _recursive_flag(args: list[str]) -> bool:
    return bool({"--recursive", "--dereference-recursive"} & sw.long_flags(args)) or any(
        c in sw.short_flags(args) for c in "rR")


def _read_redirects(words: list[str]) -> list[str]:
    out: list[str] = []
    for i, word in enumerate(words):
        op = re.match(r"^\d*(<)(?![<&(])(.*)$", word)
        if op:
            target = op.group(2) or (words[i + 1] if i + 1 < len(words) else "")
            if target:
                out.append(target)
    return out


def _paths(words: list[str], cwd: Path, data: Path, recursive: bool) -> str | None:
    for word in words:
        for path in _expand(word, cwd):
            real = Path(os.path.realpath(path))
            if real == data or real.is_relative_to(data):
                return "reads Turnkey's data folder (its token, database and secrets)"
            if recursive and data.is_relative_to(real):
                return "reads a folder that holds Turnkey's data folder"
            if _PROC_SECRET.match(str(real)) or _PROC_SECRET.match(os.path.normpath(path)):
                return "reads a process's environment, memory or files under /proc"
    return None


def _expand(word: str, cwd: Path) -> list[str]:
    path = os.path.join(cwd, os.path.expanduser(word))
    if not _GLOB.search(word):
        return [path]
    found: list[str] = []
    for match in glob.iglob(path, include_hidden=True):
        found.append(match)
        if len(found) >= _MAX_GLOB:
            break
    return found or [path]
