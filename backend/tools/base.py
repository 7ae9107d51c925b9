"""The tool contract: what a built-in tool declares, what it is given, and what it returns.

A tool is a small object with a JSON-Schema for its arguments, a pure `guard`
that says whether a call needs a person's approval (or must never run), and
an async `run`.  The executor owns everything around a run: validation,
approval, ordering, deadlines, cancellation, storage and spilling.  A tool's
`run` must stop promptly when cancelled (the terminal kills its process
group) and must turn its own failures into an `error` result rather than
raise; an exception that escapes is still caught and stored as an error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from backend.store.fenced import TurnFence
from shared.config import ApprovalMode
from shared.paths import default_data_dir

ResultStatus = Literal["ok", "error"]
GuardKind = Literal["hardline", "dangerous"]


@dataclass(frozen=True)
class Guard:
    """Why a call may not simply run.

    `hardline`: never runs, in any mode, whatever the rules.  `dangerous`: runs
    only after a person allows it (or a stored rule does).  `rule_key` is what
    an `always`/`session` decision stores, and what later calls are matched
    against: a command prefix for the terminal, a folder for file tools.
    """

    kind: GuardKind
    reason: str
    rule_key: str
    # Paths outside the session folder a sandboxed command may change once a person allows
    # it (real paths, named in `reason`); no stored rule ever covers them.
    writable: tuple[str, ...] = ()


@dataclass
class ToolContext:
    """What a running call may use.  `progress(text)` adds to the call's live output, a
    stream: pass what it printed, in order, each piece once; it is cheap and never blocks
    (the executor batches, bounds and stores it, `tools/live.py`).  `checkpoint(path, old
    content or None)` must be awaited before a file is changed."""

    cwd: Path
    session_id: str
    turn_id: str
    call_id: str
    env: dict[str, str]
    progress: Callable[[str], None] = lambda text: None
    checkpoint: Callable[[Path, bytes | None], Awaitable[None]] | None = None
    # A tool that starts a process group reports it while it runs, so a crash cannot
    # leave it working (see tools/procs.py).
    spawned: Callable[[int], None] = lambda pgid: None
    reaped: Callable[[int], None] = lambda pgid: None
    # What the call was judged by before it ran: the approval mode, and the guard a person
    # or a rule allowed (None: it needed no approval).  A file tool resolves its path once
    # when it runs, into the fd it writes through, and refuses if that lands anywhere else.
    mode: ApprovalMode = "smart"
    approved: Guard | None = None
    data_dir: Path = field(default_factory=default_data_dir)  # no tool reads or writes there
    # A call that waits for a person elsewhere (a delegate call whose child session asks for
    # an approval) says so, +1 / -1, so the batch deadline does not count that time.
    on_person: Callable[[int], None] = lambda delta: None
    # Tells clients something about the running call at once, as a `tool.progress` event with
    # `meta` (a delegate call's child session); the keys are kept in the result's meta too.
    announce: Callable[[dict[str, Any]], Awaitable[None]] | None = None
    # The running turn's fence: a tool that writes for the turn (a clarify question) writes
    # through it, so a turn that was taken over writes nothing more.
    fence: TurnFence | None = None


@dataclass
class ToolResult:
    """`content` is what the model reads; `summary` is one line for people;
    `meta` carries structured extras for clients (exit_code, diff, ...)."""

    status: ResultStatus
    content: str
    summary: str
    meta: dict[str, Any] = field(default_factory=dict)


class Tool(Protocol):
    name: str
    parameters: dict[str, Any]  # JSON Schema: type object, properties, required
    spill: bool  # False: the result is never moved to DIR/spill (read_file pages itself)
    changes_files: bool  # True: the executor provides a checkpoint callback

    @property
    def description(self) -> str:
        """What the model reads about the tool (it may depend on the host: the terminal's
        says whether commands are sandboxed)."""
        ...

    def summary(self, args: dict[str, Any]) -> str:
        """One line for people: the command, or the path and what happens to it."""
        ...

    def guard(
        self, args: dict[str, Any], cwd: Path, mode: ApprovalMode, data_dir: Path
    ) -> Guard | None:
        """None when the call may run without asking in this approval mode.  Changes nothing
        (a file tool's guard resolves its path); `data_dir` is the backend's data folder."""
        ...

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult: ...
