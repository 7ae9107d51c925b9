"""Splitting a shell command line into pipelines, simple commands and words, without running it.

This is not a shell parser.  It is a conservative reader for the approval
policy: it cuts at every control operator outside quotes (`;`, `&&`, `||`,
`|`, `&`, newlines, parentheses), lifts out command substitutions
(`$(...)`, backticks, `<(...)`, `>(...)`, also inside double quotes) so they
are judged as commands of their own, and peels off the wrappers that only
change *how* a program runs (`FOO=1`, `env`, `nohup`, `time`, `xargs`, ...).
When in doubt it produces more segments, never fewer.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

# Stands in for a lifted substitution inside the outer command's words.
SUBSTITUTION = "$(...)"

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_REDIRECT = re.compile(r"^(\d*|&)(>>|>\||>&|&>|>|<<<|<<-|<<|<>|<&|<)(.*)$", re.S)
_WRITE_OPERATORS = frozenset({">>", ">|", ">", "<>", "&>"})

# Words that only start or group a command: `if x; then rm -rf y; fi` must judge `rm`.
_KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{", "}", "fi", "done"})

# Wrappers that run the rest of the line as a command: the options that take a value,
# and how many positional words come before the command (timeout's DURATION).
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "nohup": (frozenset(), 0),
    "setsid": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "time": (frozenset({"-o", "-f", "--output", "--format"}), 0),
    "env": (frozenset({"-u", "--unset", "-C", "--chdir"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "ionice": (frozenset({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"}), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e"}), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "xargs": (
        frozenset({"-I", "-n", "-P", "-L", "-d", "-E", "-s", "-a", "--max-args", "--max-procs",
                   "--delimiter", "--arg-file", "--max-lines", "--eof", "--max-chars"}),
        0,
    ),
}


@dataclass
class Stage:
    """One simple command of a pipeline, as written, and the substitutions lifted out of it."""

    text: str
    nested: list[str] = field(default_factory=list)


def program(words: list[str]) -> str:
    """The program's name without its folder (`/bin/rm` → `rm`); empty for no words."""
    return os.path.basename(words[0]) if words else ""


def words_of(text: str) -> list[str]:
    """Shell words with quotes removed; plain whitespace split when the quoting is broken."""
    try:
        return shlex.split(text, posix=True)
    except ValueError:
        return text.split()


def split_pipelines(command: str) -> list[list[Stage]]:
    """The command's pipelines, each a list of stages joined by `|`."""
    return _Splitter(command).run()


def closing_paren(text: str, start: int) -> int:
    """Index of the `)` that closes a group opened just before `start` (len(text) when unclosed)."""
    depth, quote, i = 1, "", start
    while i < len(text):
        c = text[i]
        if c == "\\" and quote != "'":
            i += 2
            continue
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(text)


def closing_backtick(text: str, start: int) -> int:
    i = start
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "`":
            return i
        i += 1
    return len(text)


class _Splitter:
    """One left-to-right pass over a command line; see the module docstring."""

    def __init__(self, command: str) -> None:
        self.text = command
        self.pipelines: list[list[Stage]] = [[]]
        self.buf: list[str] = []
        self.nested: list[str] = []
        self.quote = ""

    def run(self) -> list[list[Stage]]:
        i = 0
        while i < len(self.text):
            i = self._step(i)
        self._end_pipeline()
        return [p for p in self.pipelines if p]

    def _step(self, i: int) -> int:
        text, c = self.text, self.text[i]
        if self.quote == "'":
            self.buf.append(c)
            self.quote = "" if c == "'" else self.quote
            return i + 1
        if c == "\\":
            self.buf.append(text[i : i + 2])
            return i + 2
        if c in "$<>" and text.startswith("(", i + 1) and not (c in "<>" and self.quote):
            end = closing_paren(text, i + 2)
            return self._lift(text[i + 2 : end], end + 1)
        if c == "`":
            end = closing_backtick(text, i + 1)
            return self._lift(text[i + 1 : end], end + 1)
        if self.quote == '"' or c in "'\"":
            self.buf.append(c)
            self.quote = "" if self.quote == c else (self.quote or c)
            return i + 1
        return self._operator(i)

    def _operator(self, i: int) -> int:
        text, c = self.text, self.text[i]
        after = text[i + 1] if i + 1 < len(text) else ""
        before = self.buf[-1][-1:] if self.buf else ""
        if c == "#" and (not before or before.isspace()):
            end = text.find("\n", i)  # a comment runs to the end of the line
            return len(text) if end < 0 else end
        if c in ";\n" or text.startswith(("&&", "||"), i):
            self._end_pipeline()
            return i + (2 if c in "&|" else 1)
        if c == "&" and before not in ("<", ">") and after != ">":
            self._end_pipeline()
        elif c == "|" and before != ">":
            self._end_stage()
            return i + (2 if after == "&" else 1)
        elif c in "()":
            self._end_stage()
        else:
            self.buf.append(c)
        return i + 1

    def _lift(self, inner: str, resume: int) -> int:
        self.nested.append(inner)
        self.buf.append(SUBSTITUTION)
        return resume

    def _end_stage(self) -> None:
        text = "".join(self.buf).strip()
        if text or self.nested:
            self.pipelines[-1].append(Stage(text, self.nested))
        self.buf, self.nested = [], []

    def _end_pipeline(self) -> None:
        self._end_stage()
        if self.pipelines[-1]:
            self.pipelines.append([])


def split_redirects(words: list[str]) -> tuple[list[str], list[str]]:
    """The words without redirections, and the targets the command writes to (`> f`, `2>>f`)."""
    kept: list[str] = []
    writes: list[str] = []
    i = 0
    while i < len(words):
        match = _REDIRECT.match(words[i])
        if match is None:
            kept.append(words[i])
            i += 1
            continue
        _fd, op, target = match.groups()
        if not target and i + 1 < len(words):
            target = words[i + 1]
            i += 1
        if op in _WRITE_OPERATORS or (op == ">&" and not target.isdigit() and target != "-"):
            writes.append(target)
        i += 1
    return kept, writes


def unwrap(words: list[str]) -> list[str]:
    """The words of the command that really runs: assignments, keywords and wrappers peeled off."""
    while words:
        first = words[0]
        if first in _KEYWORDS or _ASSIGNMENT.match(first):
            words = words[1:]
        elif program(words) in _WRAPPERS:
            takes_value, positional = _WRAPPERS[program(words)]
            words = skip_options(words[1:], takes_value)[positional:]
        else:
            break
    return words


def skip_options(words: list[str], takes_value: frozenset[str]) -> list[str]:
    """The words after the leading options (and `--`); `takes_value` options eat the next word."""
    i = 0
    while i < len(words) and words[i].startswith("-") and len(words[i]) > 1:
        if words[i] == "--":
            return words[i + 1 :]
        i += 2 if words[i] in takes_value else 1
    return words[i:]


def short_flags(args: list[str]) -> str:
    """The letters of every short option cluster before `--` (`-rf -v` → `rfv`)."""
    letters: list[str] = []
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("-") and not arg.startswith("--"):
            letters.append(arg[1:])
    return "".join(letters)


def long_flags(args: list[str]) -> set[str]:
    """Long options before `--`, without their `=value`."""
    found: set[str] = set()
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("--"):
            found.add(arg.split("=", 1)[0])
    return found


def operands(args: list[str]) -> list[str]:
    """The arguments that are not options (everything after `--` counts)."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i + 1 :]
        if not arg.startswith("-") or arg == "-":
            out.append(arg)
    return out
