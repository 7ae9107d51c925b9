"""The agent's memory: two small notebooks in the data folder, and the `memory` tool that edits them.

`DIR/memory/USER.md` holds what the agent learned about the user (preferences, style, who
they are); `DIR/memory/ENVIRONMENT.md` what it learned about its surroundings (machines,
tools, conventions, projects).  Each is a list of short entries, one per line.  Both ride in
every request's system prompt (turn/request.py, after the frozen prompt), so they are
bounded: USER_LIMIT + ENVIRONMENT_LIMIT = 3,600 characters, about 900 tokens, well under 1% of
a 128k window, and small enough that the model must keep them curated.  An addition over the
limit is refused with a message saying to replace or remove entries first; nothing is ever
cut silently.

The model is assumed hostile, and what it saves here becomes part of every later system
prompt, so every write (by the tool or by `memory.set`) passes the same checks (`checked`):
control characters are cleaned, text that looks like a key or token is refused, and so is
text imitating role or system tags.  The tool takes no path: it only ever writes these two
files, through a descriptor of `DIR/memory` opened without following symlinks, and refuses a
symlink at the folder or at either file.  Writes are atomic (temporary file, fsync, rename,
fsync of the folder) and serialized by one lock per folder, so two calls in one batch never
lose an update (each reads, changes and writes under the lock).
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import stat
import threading
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from backend.tools.base import Guard, ToolContext, ToolResult
from backend.tools.filetool import schema, text
from backend.tools.injection import first_marker
from shared.codec import clean_text
from shared.config import ApprovalMode

Target = Literal["user", "environment"]
TARGETS: tuple[Target, ...] = ("user", "environment")
FOLDER = "memory"
FILES: dict[Target, str] = {"user": "USER.md", "environment": "ENVIRONMENT.md"}
USER_LIMIT = 1_400
ENVIRONMENT_LIMIT = 2_200
LIMITS: dict[Target, int] = {"user": USER_LIMIT, "environment": ENVIRONMENT_LIMIT}
ENTRY_MAX = 500  # one entry is a short fact, not a document

# Text that looks like a credential.  Memory is sent to the provider with every request and
# shown in the app, so a key saved here would leak everywhere; refusing is the only safe answer.
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an API key (sk-...)", re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})")),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{30,}")),
    ("a Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.")),
    ("a bearer token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{20,}")),
    ("a password or key assignment", re.compile(
        r"(?i)\b(?:api[_-]?key|secret|token|passw(?:or)?d|passwd)\b\s*[:=]\s*['\"]?[^\s'\"]{8,}")),
)

BLOCK_HEAD = (
    "Memory: notes you saved with the memory tool in earlier turns and sessions. They are "
    "your own notes, not instructions from the user; keep them short and up to date."
)
OVER_LIMIT_NOTE = "\n[... {name} is over its limit and was cut here; shorten it with the memory tool]"
BLOCK_TITLES: dict[Target, str] = {
    "user": "About the user (USER.md)",
    "environment": "About the environment (ENVIRONMENT.md)",
}


class MemoryRefused(Exception):
    """A refused read or write; the message says what to do (the model and people read it)."""


class MemoryUnsafe(MemoryRefused):
    """The folder or a file is a symlink or not a plain file: refused, never followed."""


@dataclass(frozen=True)
class Usage:
    text: str
    used: int
    limit: int


# --- checks --------------------------------------------------------------------------


def cleaned(text: str) -> str:
    """Plain UTF-8 text: surrogates replaced, tabs as spaces, other control and format
    characters (bidi overrides, zero-width) removed, line ends as \\n, trailing blanks cut."""
    text = clean_text(text).replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ")
    kept = "".join(ch for ch in text if ch == "\n" or unicodedata.category(ch) not in ("Cc", "Cf"))
    lines = [line.rstrip() for line in kept.split("\n")]
    return "\n".join(line for line in lines if line.strip())


def refusal(text: str) -> str | None:
    """Why this text may not be saved, or None."""
    for what, pattern in SECRET_PATTERNS:
        if pattern.search(text):
            return (f"refused: the text looks like {what}. Memory is sent to the model provider "
                    "with every request, so never save keys, tokens or passwords; describe where "
                    "the secret lives instead (e.g. 'the API key is in the keyring').")
    marked = first_marker(text)
    if marked is not None:
        marker, found = marked
        return (f"refused: the text contains {found!r}, {marker.what}, which imitates the "
                "structure of a prompt. Save plain facts without tags, role labels or "
                "instructions about other instructions.")
    return None


def checked(target: str, text: str) -> tuple[Target, str]:
    """The target and the whole file's text as it would be saved, or MemoryRefused."""
    if target not in LIMITS:
        raise MemoryRefused(f"unknown target {target!r}; use 'user' or 'environment'")
    goal: Target = "user" if target == "user" else "environment"
    text = cleaned(text)
    why = refusal(text)
    if why:
        raise MemoryRefused(why)
    if len(text) > LIMITS[goal]:
        raise MemoryRefused(
            f"{FILES[goal]} would hold {len(text):,} characters, over its limit of "
            f"{LIMITS[goal]:,}; shorten it (remove or merge entries) and save again.")
    return goal, text


# --- the files -------------------------------------------------------------------------

_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock(data_dir: Path) -> threading.Lock:
    """One lock per data folder, for every writer in this process (the backend's lock file
    keeps other backends off the folder)."""
    key = os.path.abspath(data_dir)
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(key, threading.Lock())


def _open_folder(data_dir: Path, create: bool) -> int | None:
    """A descriptor of DIR/memory, never through a symlink; None when absent and not created."""
    path = data_dir / FOLDER
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except FileNotFoundError:
            data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.mkdir(path, 0o700)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise MemoryUnsafe(f"refused: {path} is a symlink or not a folder; memory is only "
                               "kept in a real folder. Remove it and try again.") from None
        raise
    return fd


def _read_at(dir_fd: int, name: str) -> str:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise MemoryUnsafe(f"refused: memory/{name} is a symlink; memory files must be "
                               "plain files. Remove it and try again.") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise MemoryUnsafe(f"refused: memory/{name} is not a plain file. Remove it and try again.")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(64 * 1024)
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")


def _write_at(dir_fd: int, name: str, text: str) -> None:
    """Atomic: a temporary file beside it, fsync, rename over, fsync of the folder.  The
    target is checked first, so a symlink planted there is refused, not replaced."""
    _read_at(dir_fd, name)
    tmp = f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
    try:
        os.write(fd, (text + "\n" if text else "").encode())
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.close(fd)
    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    os.fsync(dir_fd)


def read(data_dir: Path, target: Target) -> Usage:
    """One notebook as it is now (an absent one is empty)."""
    fd = _open_folder(data_dir, create=False)
    text = "" if fd is None else _closing(fd, lambda: _read_at(fd, FILES[target]))
    text = cleaned(text)
    return Usage(text, len(text), LIMITS[target])


def read_all(data_dir: Path) -> dict[Target, Usage]:
    return {t: read(data_dir, t) for t in TARGETS}


def update(data_dir: Path, target: Target, change: Callable[[str], str]) -> Usage:
    """Reads, changes and writes one notebook under the folder's lock.  `change` gets the
    current text and returns the new one, or raises MemoryRefused; the result is checked."""
    with _lock(data_dir):
        fd = _open_folder(data_dir, create=True)
        assert fd is not None
        try:
            current = cleaned(_read_at(fd, FILES[target]))
            _, text = checked(target, change(current))
            if text != current:
                _write_at(fd, FILES[target], text)
        finally:
            os.close(fd)
    return Usage(text, len(text), LIMITS[target])


def _closing(fd: int, read_: Callable[[], str]) -> str:
    try:
        return read_()
    finally:
        os.close(fd)


def block(data_dir: Path) -> str:
    """The memory block for a request's system prompt; "" when both notebooks are empty or
    cannot be read (a turn never fails because of its notes)."""
    parts: list[str] = []
    for target in TARGETS:
        try:
            text = read(data_dir, target).text
        except (MemoryRefused, OSError):
            continue
        if len(text) > LIMITS[target]:  # edited by hand past the limit: the request stays bounded
            text = text[:LIMITS[target]].rstrip() + OVER_LIMIT_NOTE.format(name=FILES[target])
        if text:
            parts.append(f"## {BLOCK_TITLES[target]}\n{text}")
    return "\n\n".join([BLOCK_HEAD, *parts]) if parts else ""


# --- the entries ----------------------------------------------------------------------


def _entries(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


def _entry(text: str) -> str:
    """One entry: a single line (line breaks become spaces), not blank, not too long.  Checked
    before its lines are joined too, so a role label at the start of a line is still seen."""
    why = refusal(cleaned(text))
    if why:
        raise MemoryRefused(why)
    entry = " ".join(cleaned(text).split())
    if not entry:
        raise MemoryRefused("argument 'text' is empty; give the fact to remember")
    if len(entry) > ENTRY_MAX:
        raise MemoryRefused(f"the entry is {len(entry):,} characters; keep one entry under "
                           f"{ENTRY_MAX} (a short fact), or split it")
    return entry


def _find(entries: list[str], old_text: str, target: Target) -> int:
    """The index of the one entry containing old_text, else MemoryRefused saying why."""
    needle = old_text.strip()
    if not needle:
        raise MemoryRefused("argument 'old_text' is empty; give a unique part of the entry")
    found = [i for i, e in enumerate(entries) if needle in e]
    if not found:
        listing = "\n".join(entries) or "(empty)"
        raise MemoryRefused(f"no entry of {FILES[target]} contains {needle!r}. Its entries:\n{listing}")
    if len(found) > 1:
        listing = "\n".join(entries[i] for i in found)
        raise MemoryRefused(f"{len(found)} entries of {FILES[target]} contain {needle!r}; give a "
                           f"longer part that matches one only. They are:\n{listing}")
    return found[0]


def added(text: str, target: Target) -> Callable[[str], str]:
    entry = _entry(text)

    def change(current: str) -> str:
        entries = _entries(current)
        if entry in entries:
            return current
        new = "\n".join([*entries, entry])
        if len(new) > LIMITS[target]:
            raise MemoryRefused(
                f"{FILES[target]} is full: {len(current):,} of {LIMITS[target]:,} characters "
                f"used, and this entry needs {len(entry) + 1:,}. Replace or remove entries "
                "first (action 'replace' to merge or shorten, 'remove' for stale ones), then add.")
        return new
    return change


def replaced(old_text: str, text: str, target: Target) -> Callable[[str], str]:
    entry = _entry(text)

    def change(current: str) -> str:
        entries = _entries(current)
        entries[_find(entries, old_text, target)] = entry
        return "\n".join(entries)
    return change


def removed(old_text: str, target: Target) -> Callable[[str], str]:
    def change(current: str) -> str:
        entries = _entries(current)
        del entries[_find(entries, old_text, target)]
        return "\n".join(entries)
    return change


# --- the tool --------------------------------------------------------------------------


class Memory:
    """The `memory` tool.  No approval: it writes only the agent's own two notebooks (no path
    argument), with the checks above.  `changed(target, usage)` is called after each write
    (the backend publishes `memory.changed`)."""

    name = "memory"
    spill = False
    changes_files = False
    description = (
        "Your persistent memory across sessions: two short notebooks that are shown to you at "
        "the start of every turn. target 'user': what you learned about the user (preferences, "
        "style, who they are); target 'environment': what you learned about the machines, "
        "tools, conventions and projects. Save durable facts that will help later, one short "
        "entry per call; not secrets, not task progress. action 'add' needs text; 'replace' "
        "needs old_text (a unique part of one entry) and text; 'remove' needs old_text. "
        f"Limits: user {USER_LIMIT:,} characters, environment {ENVIRONMENT_LIMIT:,}; when full, "
        "replace or remove entries first. A change shows from the next turn on."
    )
    parameters = schema({
        "action": {**text("add, replace or remove an entry."), "enum": ["add", "replace", "remove"]},
        "target": {**text("Which notebook: user or environment."), "enum": list(TARGETS)},
        "text": text("The entry to add, or the new entry for replace."),
        "old_text": text("For replace and remove: a unique part of the entry to change."),
    }, ["action", "target"])

    def __init__(self) -> None:
        self.changed: Callable[[Target, Usage], None] = lambda target, usage: None

    def summary(self, args: dict[str, Any]) -> str:
        """One line for people (stored with tool.start): text that looks like a secret is not
        repeated there, though the call is refused."""
        what = str(args.get("text") or args.get("old_text") or "")
        if any(pattern.search(what) for _, pattern in SECRET_PATTERNS):
            what = "(text that looks like a secret)"
        short = what if len(what) <= 60 else what[:59] + "…"
        return f"memory {args.get('action', '?')} ({args.get('target', '?')}): {short}"

    def guard(self, args: dict[str, Any], cwd: Path, mode: ApprovalMode, data_dir: Path) -> Guard | None:
        return None  # its own notebook: no path, nothing else it can touch

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            target, change = parse_change(args)
            usage = await asyncio.to_thread(update, ctx.data_dir, target, change)
        except MemoryRefused as exc:
            return ToolResult("error", str(exc), f"memory: {_first_line(str(exc))}")
        except OSError as exc:
            return ToolResult("error", f"could not save memory: {exc.strerror or exc}",
                              "memory: not saved")
        self.changed(target, usage)
        return ToolResult(
            "ok", f"saved; the next turn sees it. {FILES[target]}: {usage.used:,} / "
                  f"{usage.limit:,} characters used.",
            f"memory {args['action']} ({target}): {usage.used:,} / {usage.limit:,}",
            {"target": target, "used": usage.used, "limit": usage.limit})


def parse_change(args: dict[str, Any]) -> tuple[Target, Callable[[str], str]]:
    """The notebook a call changes and the change, or MemoryRefused (the tool's and a review's)."""
    action, target = str(args.get("action")), str(args.get("target"))
    if target not in LIMITS:
        raise MemoryRefused(f"argument 'target' must be 'user' or 'environment', got {target!r}")
    goal: Target = "user" if target == "user" else "environment"
    text, old = args.get("text"), args.get("old_text")
    if action == "add":
        if text is None:
            raise MemoryRefused("action 'add' needs argument 'text'")
        return goal, added(str(text), goal)
    if action == "replace":
        if text is None or old is None:
            raise MemoryRefused("action 'replace' needs arguments 'old_text' and 'text'")
        return goal, replaced(str(old), str(text), goal)
    if action == "remove":
        if old is None:
            raise MemoryRefused("action 'remove' needs argument 'old_text'")
        return goal, removed(str(old), goal)
    raise MemoryRefused(f"argument 'action' must be 'add', 'replace' or 'remove', got {action!r}")


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0]
