"""The person's hooks in a running turn: when each event's hooks run, what their answers
change, and the notes that report what went wrong.

- `session_start` runs once per session, in its first turn, before its first model call;
  `prompt_submit` in every turn that has a prompt of its own (not a regeneration), right
  after it.  Their `context` is stored on the prompt's row, as what the model reads of it
  (`api_content`, framed as the person's hook's; `meta.hook_context` for people), in one
  fenced write before the first request: every later request, and a regeneration, reads
  the same bytes.
- `pre_tool` runs before a call's guard and approval; the first hook (in name order) that
  blocks it wins, and the call is not run (`denied`, the reason in its result).  A hook
  never allows what the guard would ask about: "allow" only means no objection.
- `post_tool` runs after a call ran; its `context` is appended to the result.
- `turn_end` runs when the turn's outcome is known, before it is stored; its answer is
  ignored.  After an interrupt each gets at most `STOPPED_END_S`: the person asked for the
  turn to stop, and its end waits for these.

A hook that fails is reported as a `system_note` (kind `hook`) and otherwise ignored: the
turn goes on.  An interrupt kills the hooks running (the callers race the turn's stop).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from backend.errors import StoreUnavailable
from backend.store import admissions, messages
from backend.store.db import Database, Tx
from backend.store.fenced import TurnFence
from backend.tools.executor import Blocked, PreparedCall
from backend.tools.hooks import HookRun, HookRunner, configured
from backend.turn.route import RunningTurn
from shared.config import HookConfig, HookEvent
from shared.protocol import ToolStatus

log = logging.getLogger("turn")

CONTEXT_FRAME = "[Context added by the user's {event} hook {name}:]\n{text}"
MAX_RESULT_CHARS = 16_000  # of a tool's result, in a post_tool hook's input
STOPPED_END_S = 3.0  # a turn_end hook's time at most, once the turn was interrupted


class TurnHooks:
    """One turn's hooks (see the module docstring); the executor calls `before` and `after`
    for each tool call (`tools/executor.py:CallHooks`)."""

    def __init__(self, runner: HookRunner, hooks: Callable[[], Mapping[str, HookConfig]],
                 db: Database, turn: RunningTurn, fence: TurnFence) -> None:
        self.runner = runner
        self.hooks = hooks  # read at each event: config.set applies from the next one
        self.db = db
        self.turn = turn
        self.fence = fence

    async def start(self, prompt: str) -> None:
        """session_start (the session's first turn) and prompt_submit (a turn with a prompt
        row), their context stored on the prompt's row."""
        turn = self.turn
        runs: list[HookRun] = []
        if configured(self.hooks(), "session_start"):
            sid, tid = turn.session_id, turn.turn_id
            if not await self.db.read(lambda tx: admissions.turned_before(tx, sid, tid)):
                runs += await self._run_all("session_start", {})
        if turn.claim.regenerates is None:
            runs += await self._run_all("prompt_submit", {"prompt": prompt})
        added = [(r, r.context) for r in runs if r.context]
        if added:
            await self._store_context(prompt, added)

    async def before(self, call: PreparedCall) -> Blocked | None:
        for run in await self._run_all("pre_tool", {"tool": _tool(call)}, tool=call.name):
            if run.blocked is not None:
                return Blocked(run.name, run.blocked)
        return None

    async def after(self, call: PreparedCall, status: ToolStatus, content: str) -> str | None:
        result = {"status": status, "text": content[:MAX_RESULT_CHARS],
                  "truncated": len(content) > MAX_RESULT_CHARS}
        runs = await self._run_all("post_tool", {"tool": _tool(call), "result": result},
                                   tool=call.name)
        added = [_framed(r, r.context) for r in runs if r.context]
        return "\n\n".join(added) or None

    async def end(self, status: str) -> None:
        """turn_end: its answer is ignored, its failures reported."""
        await self._run_all("turn_end", {"status": status},
                            within=STOPPED_END_S if status == "interrupted" else None)

    async def _run_all(self, event: HookEvent, extra: dict[str, Any],
                       tool: str | None = None, within: float | None = None) -> list[HookRun]:
        """The event's hooks in name order, each reported if it failed; a pre_tool block
        ends the run (the first block wins).  `within`: each hook's timeout at most."""
        out: list[HookRun] = []
        for name, hook in configured(self.hooks(), event, tool):
            if within is not None and hook.timeout_s > within:
                hook = msgspec.structs.replace(hook, timeout_s=within)
            run = await self.runner.run(name, hook, self._payload(extra), Path(self.turn.claim.cwd))
            out.append(run)
            if run.failure is not None:
                await self._report(run)
            if run.blocked is not None:
                break
        return out

    def _payload(self, extra: dict[str, Any]) -> dict[str, Any]:
        turn = self.turn
        return {"session_id": turn.session_id, "turn_id": turn.turn_id,
                "cwd": turn.claim.cwd, **extra}

    async def _store_context(self, prompt: str, added: list[tuple[HookRun, str]]) -> None:
        turn = self.turn
        api = "\n\n".join([prompt, *(_framed(run, text) for run, text in added)])
        meta = {"hook_context": [{"hook": run.name, "event": run.event, "text": text}
                                 for run, text in added]}

        def job(tx: Tx) -> None:
            messages.add_to_prompt(tx, turn.session_id, turn.turn_id, api, meta)

        await self.fence.write(job)  # a store failure here fails the turn, as any write

    async def _report(self, run: HookRun) -> None:
        """A failed hook's note among the turn's rows (people read it; the model never
        does).  A note that cannot be written is only logged: a hook never ends a turn."""
        turn = self.turn
        text = f"The {run.event} hook {run.name} {run.failure}; the turn went on without it."
        log.warning("turn %s: hook %s (%s) %s", turn.turn_id, run.name, run.event, run.failure)

        def job(tx: Tx) -> None:
            messages.insert(tx, turn.session_id, "system_note", text, turn_id=turn.turn_id,
                            note_kind="hook", meta={"hook": run.name, "event": run.event})

        try:
            await self.fence.write(job)
        except StoreUnavailable as exc:
            log.warning("turn %s: the hook's note was not stored: %s", turn.turn_id, exc.message)


def _tool(call: PreparedCall) -> dict[str, Any]:
    return {"name": call.name, "call_id": call.call_id, "args": call.arguments}


def _framed(run: HookRun, text: str) -> str:
    return CONTEXT_FRAME.format(event=run.event, name=run.name, text=text)
