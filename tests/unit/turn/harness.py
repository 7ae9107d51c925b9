"""An in-process seam for the turn runner: a real store, authority and runner, a scripted model.

`Harness` builds what `backend/app.py` builds for turns — a `Database` on a temp
file (through the real migrations), the real `SessionAuthority`, `TurnRunner`,
`Executor` (with the real tool registry) and `Compressor` — but no listener and
no subprocess.  The model is `ScriptedProvider`, an in-process `ChatProvider`
whose replies are lists of stream chunks (and `Pause` steps, where the stream
waits until the test releases it or the turn stops).  A test submits a prompt
through the authority, which claims and runs the turn as the backend does, and
reads what the turn left behind: rows, events, the admission's receipt.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from backend import wire
from backend.authority.queue import SessionAuthority
from backend.compress.compressor import Compressor
from backend.config import ConfigFile
from backend.ids import new_id
from backend.providers.base import (
    ChatProvider,
    ChatRequest,
    Chunk,
    DoneChunk,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
)
from backend.providers.registry import Providers
from backend.secrets import Secrets
from backend.store import admissions, events, messages, runtime, sessions
from backend.store.db import SqliteDatabase, Tx
from backend.store.events import StoredEvent
from backend.tools.approvals import Approvals
from backend.tools.checkpoints import Checkpoints
from backend.tools.executor import Executor
from backend.tools.procs import ProcessTable
from backend.turn.runner import TurnRunner
from shared.config import ProviderConfig
from shared.protocol import Event, Message, PromptSubmitParams, Receipt

MODEL = "fake-model"
WAIT_S = 10.0


@dataclass
class Pause:
    """A stream step that waits: `reached` is set when the stream gets here, and the
    stream goes on once `release` is set (or never, when the turn stops it first)."""

    reached: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


Step = Chunk | Pause
Reply = Sequence[Step] | Callable[[ChatRequest], Sequence[Step]]


def text(*parts: str, usage: tuple[int, int] = (10, 5)) -> list[Step]:
    """A plain answer streamed in `parts`, with its usage and a stop."""
    return [*(TextChunk(p) for p in parts), UsageChunk(*usage), DoneChunk("stop")]


def calls(*named: tuple[str, str, str], say: str = "") -> list[Step]:
    """An answer of tool calls: (call_id, tool name, JSON arguments) each."""
    steps: list[Step] = [TextChunk(say)] if say else []
    steps += [ToolCallChunk(i, cid, name, args) for i, (cid, name, args) in enumerate(named)]
    return [*steps, UsageChunk(10, 5), DoneChunk("tool_calls")]


class ScriptedProvider:
    """A `ChatProvider` that answers each request with the next queued reply (a reply may
    be a function of the request); every request is kept in `requests`."""

    def __init__(self, name: str = "main", model: str = MODEL) -> None:
        self.name = name
        self.model = model
        self.replies: list[Reply] = []
        self.requests: list[ChatRequest] = []
        self.responder: Callable[[ChatRequest], Sequence[Step]] | None = None

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        self.requests.append(request)
        if self.replies:
            reply = self.replies.pop(0)
            steps = reply(request) if callable(reply) else reply
        elif self.responder is not None:
            steps = self.responder(request)
        else:
            raise AssertionError(f"the scripted model got an unexpected request: {request}")
        for step in steps:
            if isinstance(step, Pause):
                step.reached.set()
                await step.release.wait()
            else:
                yield step

    async def aclose(self) -> None:
        pass


class _Providers(Providers):
    """The real chain logic, with every configured provider answered by the script."""

    def __init__(self, provider: ScriptedProvider, secrets: Secrets, data_dir: Path) -> None:
        super().__init__(secrets, data_dir)
        self.provider = provider

    def _build(self, name: str, cfg: ProviderConfig, key: str | None) -> ChatProvider:
        return self.provider


def config_toml(window: int = 32_000, extra: str = "") -> str:
    return (
        'default_provider = "main"\n'
        "[providers.main]\n"
        'kind = "openai"\n'
        'base_url = "http://127.0.0.1:9/v1"\n'  # never dialled: the script answers
        f'model = "{MODEL}"\n'
        f"context_window = {window}\n"
        "max_output_tokens = 256\n"
        f"{extra}\n"
    )


class Harness:
    def __init__(self, root: Path, config: str) -> None:
        self.root = root
        self.data_dir = root / "data"
        self.cwd = root / "work"
        self.data_dir.mkdir(mode=0o700)
        self.cwd.mkdir()
        (self.data_dir / "config.toml").write_text(config)
        self.config = ConfigFile(self.data_dir / "config.toml")
        self.db = SqliteDatabase(self.data_dir / "state.db")
        self.provider = ScriptedProvider()
        self.published: list[Event] = []
        self._changed = asyncio.Event()
        self._requests = itertools.count(1)

    async def start(self) -> None:
        self.config.load()
        await self.db.open()
        epoch = await self.db.write(runtime.bump_epoch)
        self.db.publisher = self._publish
        providers = _Providers(self.provider, Secrets(self.data_dir), self.data_dir)
        approvals = Approvals(self.db, self.config, epoch)
        executor = Executor(self.db, approvals, Checkpoints(self.db, self.data_dir),
                            self.data_dir, ProcessTable(self.data_dir))
        compressor = Compressor(self.db, self.config, providers, epoch)
        self.runner = TurnRunner(self.db, self.config, providers, executor, compressor)
        self.authority = SessionAuthority(self.db, self.runner, epoch)

    async def stop(self) -> None:
        await self.authority.stop(grace_s=2.0)
        await self.db.close()

    def _publish(self, item: object) -> None:
        if isinstance(item, StoredEvent) and item.stored:
            self.published.append(wire.event(item.event))
            self._changed.set()

    # --- driving turns --------------------------------------------------------------

    async def session(self) -> str:
        sid = new_id("ses")
        await self.db.write(lambda tx: sessions.insert(tx, sid, "test", str(self.cwd), MODEL))
        return sid

    async def submit(self, session_id: str, prompt: str) -> Receipt:
        params = PromptSubmitParams(session_id=session_id, request_id=f"req-{next(self._requests)}",
                                    text=prompt)
        return await self.authority.submit("owner", params)

    async def settled(self, admission_id: str) -> Receipt:
        """The admission's receipt once its turn has ended."""
        async def wait() -> Receipt:
            while True:
                self._changed.clear()
                receipt = await self.db.read(lambda tx: _receipt(tx, admission_id))
                if receipt.status not in ("queued", "started"):
                    return receipt
                await self._changed.wait()

        return await asyncio.wait_for(wait(), WAIT_S)

    async def turn(self, session_id: str, prompt: str) -> Receipt:
        return await self.settled((await self.submit(session_id, prompt)).admission_id)

    # --- reading what a turn left -------------------------------------------------------

    async def messages(self, session_id: str) -> list[Message]:
        page, _ = await self.db.read(lambda tx: messages.page(tx, session_id, None, 10_000))
        return [wire.message(m) for m in page]

    async def stored_events(self, session_id: str) -> list[Event]:
        return wire.events(await self.db.read(lambda tx: events.since(tx, session_id, 0, 10_000)))

    def events(self, session_id: str, type_: str) -> list[Event]:
        return [e for e in self.published if e.session_id == session_id and e.type == type_]


def _receipt(tx: Tx, admission_id: str) -> Receipt:
    row = admissions.by_id(tx, admission_id)
    assert row is not None
    return wire.receipt(admissions.receipt(tx, row))
