"""One messaging door: platform messages in as admissions, the session's events out as messages.

In: each sync's items are read in order.  A person's message becomes a prompt admitted
with the principal `PLATFORM:SENDER` (the identity the platform's server vouches for)
and the request id `PLATFORM:MESSAGE_ID`, so a message the platform delivers twice is a
duplicate, not a second turn.  Only `allowed_users` are served; anyone else gets one
refusal per room and nothing runs.  Commands (commands.py) are handled as they arrive,
never queued behind the running turn; each is marked handled (`door_inbox`) before it
acts, so a redelivered command acts at most once (a repeated /approve or /stop would act
on the wrong thing), and its answer waits in `door_outbox` until sent.  The sync cursor
is saved after its batch, so a restart continues where it left off.

A file or image becomes a prompt of its own carrying it (its caption the text, else none),
admitted the same way: the platform's bytes downloaded (at most MAX_ATTACHMENT_BYTES), typed
by what they are, not by what the sender's client declared, and checked and stored as an
upload is (authority/attachments.py).  A file the door cannot take gets one reply saying why.
An image and the text sent just after it stay two prompts: joining them would mean
holding the image back for a guessed while, and the second prompt sees the first anyway.

Out: delivery.py sends each bound room its session's events.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from backend import wire
from backend.authority.attachments import Attachments
from backend.authority.questions import Questions
from backend.authority.queue import SessionAuthority
from backend.doors import commands, render
from backend.doors.base import (
    Batch,
    File,
    Invite,
    Message,
    Reaction,
    TooLarge,
    Transport,
    TransportError,
)
from backend.doors.delivery import RETRY_FIRST_S, RETRY_MAX_S, Delivery, txn
from backend.errors import (
    ApprovalClosed,
    InvalidParams,
    NotFound,
    QuestionClosed,
    StoreUnavailable,
    TurnkeyError,
)
from backend.ids import new_id
from backend.store import admissions, approvals, compression, questions, sessions
from backend.store import doors as store
from backend.store.db import Database, Tx
from backend.tools.approvals import Approvals
from shared.protocol import (
    MAX_ATTACHMENT_BYTES,
    Approval,
    Attachment,
    DoorRoom,
    DoorState,
    DoorStatus,
    PromptSubmitParams,
    Question,
    SessionCreated,
    attachment_kind,
)
from shared.uploads import sniff_mime

log = logging.getLogger("doors")

Intent = Literal["queue", "interrupt", "steer"]


@dataclass(frozen=True)
class Settings:
    name: str  # the config table's name: "matrix"
    allowed_users: frozenset[str]
    rooms: dict[str, str]  # room id -> session id, bound on the room's first message
    cwd: str
    edit_interval_s: float
    token_secret: str  # the secret's name (for clients to store a token under), never its value


class Door:
    def __init__(
        self, settings: Settings, transport: Transport, db: Database, authority: SessionAuthority,
        approvals_: Approvals, questions_: Questions, default_model: Callable[[], str],
        interrupt: Callable[[str], Any], on_state: Callable[[DoorStatus], None],
        attachments: Attachments | None = None,
    ) -> None:
        self.settings = settings
        self.attachments = attachments  # where files sent in rooms are kept (None: refused)
        self.transport = transport
        self.db = db
        self.authority = authority
        self.approvals = approvals_
        self.questions = questions_  # the clarify tool's questions, answered by a reply
        self.default_model = default_model
        self._interrupt = interrupt
        self._on_state = on_state
        self.state: DoorState = "starting"
        self.detail: str | None = None
        self.since = time.time()
        self.room_names: dict[str, str] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.out = Delivery(settings.name, transport, db, settings.edit_interval_s,
                            lambda: self._spawn(self.publish_state(), "state"))
        self._background: set[asyncio.Task[None]] = set()  # state announcements in flight

    @property
    def name(self) -> str:
        return self.settings.name

    # --- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._inbound(), name=f"door-{self.name}-in")]
        self.out.start()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.out.stop()
        with contextlib.suppress(Exception):
            await self.transport.close()
        self._set_state("stopped", None)

    def status(self, bindings: list[store.Binding]) -> DoorStatus:
        return DoorStatus(
            name=self.name, platform=self.transport.platform, state=self.state,
            account=self.transport.account, since=self.since, detail=self.detail,
            rooms=[DoorRoom(room_id=b.room_id, session_id=b.session_id,
                            name=self.room_names.get(b.room_id)) for b in bindings],
            allowed_users=sorted(self.settings.allowed_users),
            token_secret=self.settings.token_secret,
        )

    async def publish_state(self) -> None:
        bound = await self.db.read(lambda tx: store.bindings(tx, self.name))
        self._on_state(self.status(bound))

    def _set_state(self, state: DoorState, detail: str | None) -> None:
        if (state, detail) == (self.state, self.detail):
            return
        if state != self.state:
            self.since = time.time()
        self.state, self.detail = state, detail
        (log.warning if state == "failing" else log.info)(
            "door %s: %s%s", self.name, state, f" ({detail})" if detail else "")
        self._spawn(self.publish_state(), "state")

    def _spawn(self, work: Coroutine[Any, Any, None], what: str) -> None:
        task = asyncio.create_task(work, name=f"door-{self.name}-{what}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_quiet)

    def observe(self, item: Any) -> None:
        self.out.observe(item)

    # --- in ------------------------------------------------------------------------

    async def _inbound(self) -> None:
        delay = RETRY_FIRST_S
        connected = False
        for binding in await self.db.read(lambda tx: store.bindings(tx, self.name)):
            self.out.follow(binding.room_id, binding.session_id, announce=False)
        cursor = await self.db.read(lambda tx: store.cursor(tx, self.name))
        while True:
            try:
                if not connected:
                    await self.transport.connect()
                    connected = True
                    self._set_state("connected", None)
                batch = await self.transport.poll(cursor)
            except TransportError as exc:
                self._set_state("failing", str(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            delay = RETRY_FIRST_S
            self._set_state("connected", None)
            self.room_names.update(batch.room_names)
            try:
                await self._take(batch)
                await self.db.write(functools.partial(store.save_cursor, door=self.name,
                                                      since=batch.cursor))
            except Exception as exc:  # the store (a full disk): the batch is read again
                log.warning("door %s: a sync batch could not be handled (%s: %s); reading it "
                            "again", self.name, type(exc).__name__, exc)
                await asyncio.sleep(RETRY_FIRST_S)
                continue
            cursor = batch.cursor

    async def _take(self, batch: Batch) -> None:
        for invite in batch.invites:
            await self._invited(invite)
        if batch.first:
            return  # history from before the door first connected: never acted on
        for item in batch.items:
            if item.sender == self.transport.account:
                continue
            try:
                if isinstance(item, Reaction):
                    await self._reaction(item)
                elif isinstance(item, File):
                    await self._file(item)
                else:
                    await self._message(item)
            except (TransportError, StoreUnavailable):
                raise  # the whole batch is read again
            except TurnkeyError as exc:
                await self._answer(item.room_id, f"err:{item.event_id}", exc.message)
            except Exception:
                log.exception("door %s: a message could not be handled", self.name)
                await self._answer(item.room_id, f"err:{item.event_id}",
                                   "Something went wrong handling that message; see the backend log.")

    async def _invited(self, invite: Invite) -> None:
        try:
            await self.transport.join(invite.room_id)
        except TransportError as exc:
            log.warning("door %s: could not join %s: %s", self.name, invite.room_id, exc)
            return
        if invite.inviter in self.settings.allowed_users:
            await self._answer(invite.room_id, "hello", render.GREETING)
            return
        if invite.inviter not in self.settings.allowed_users:
            # One refusal, then leave: a stranger's room is not one we serve.
            with contextlib.suppress(TransportError):
                await self.transport.send(invite.room_id, txn("refuse-invite", invite.room_id),
                                          render.REFUSAL, notice=True)
                await self.transport.leave(invite.room_id)
            log.info("door %s: refused an invitation from %s", self.name, invite.inviter)

    async def _message(self, msg: Message) -> None:
        if msg.sender not in self.settings.allowed_users:
            await self._refuse(msg.room_id, msg.sender)
            return
        if msg.encrypted:
            await self._answer(msg.room_id, "encrypted", render.ENCRYPTED)
            return
        if not msg.text.strip():
            return
        command = commands.parse(msg.text)
        if command is None and await self._answered(msg):
            return
        if command is None:
            await self._prompt(msg, commands.prompt_text(msg.text), "queue")
        elif command.name == "queue" or command.name == "steer":
            if not command.arg:
                await self._answer(msg.room_id, f"cmd:{msg.event_id}",
                                   f"/{command.name} needs the text to send, e.g. "
                                   f"/{command.name} also check the tests")
                return
            intent: Intent = "queue" if command.name == "queue" else "steer"
            await self._prompt(msg, command.arg, intent)
        else:
            await self._command(msg, command)

    async def _answered(self, msg: Message) -> bool:
        """Answers a question with `msg` when it is one: a reply to a question's message, or,
        while only one question waits in the room, a number or (where it takes them) words.
        False when it is not an answer (then it is a prompt)."""
        found = await self.db.read(lambda tx: self._question_for(tx, msg))
        if found is None:
            return False
        question, replied = found
        answer = commands.question_answer(question, msg.text)
        if answer is None and not replied:
            return False  # not an answer this question takes: a prompt
        if not await self.db.write(lambda tx: store.claim(tx, self.name, msg.event_id)):
            return True  # already handled: a redelivery
        key = f"cmd:{msg.event_id}"
        if answer is None:
            await self._answer(msg.room_id, key, f"Reply with a number from 1 to "
                               f"{len(question.choices)}.")
            return True
        try:
            await self.questions.respond(question.question_id, *answer)
        except (QuestionClosed, InvalidParams, NotFound) as exc:
            await self._answer(msg.room_id, key, exc.message)
        return True

    def _question_for(self, tx: Tx, msg: Message) -> tuple[Question, bool] | None:
        """The question `msg` may answer, and whether it replies to that question's message."""
        bound = store.binding(tx, self.name, msg.room_id)
        if bound is None:
            return None
        key = store.key_of(tx, self.name, msg.reply_to) if msg.reply_to else None
        if key is not None and key.startswith("question:"):
            replied = questions.row(tx, key.removeprefix("question:"))
            return (wire.question(replied), True) if replied is not None else None
        waiting = questions.pending(tx, compression.leaf(tx, bound.session_id))
        return (wire.question(waiting[0]), False) if len(waiting) == 1 else None

    async def _refuse(self, room_id: str, sender: str) -> None:
        owed = await self.db.write(
            lambda tx: store.owe(tx, self.name, room_id, f"refuse:{sender}",
                                 {"text": render.REFUSAL, "notice": True}))
        log.info("door %s: refused a message from %s in %s%s", self.name, sender, room_id,
                 "" if owed else " (already told)")
        self.out.owed()

    async def _file(self, f: File) -> None:
        if f.sender not in self.settings.allowed_users:
            await self._refuse(f.room_id, f.sender)
            return
        platform = self.transport.platform
        principal, request_id = f"{platform}:{f.sender}", f"{platform}:{f.event_id}"
        if await self.db.read(lambda tx: store.admitted(tx, principal, request_id)):
            return  # a redelivery: its prompt is in already
        key = f"file:{f.event_id}"
        refusal = _refusal_before_download(f)
        kept = self.attachments
        if refusal is not None or f.url is None or kept is None:
            await self._answer(f.room_id, key, render.file_refused(
                f.name, refusal or "this backend does not keep files"))
            return
        try:
            data = await self.transport.download(f.url, MAX_ATTACHMENT_BYTES)
        except TooLarge:
            await self._answer(f.room_id, key, render.file_refused(f.name, _too_big()))
            return
        except TransportError as exc:  # gone from the homeserver, or it refuses: say so once
            await self._answer(f.room_id, key, render.file_refused(
                f.name, f"it could not be downloaded ({exc}); send it again"))
            return
        mime = sniff_mime(f.name, data)
        if mime is None or attachment_kind(mime) is None:
            await self._answer(f.room_id, key, render.file_refused(
                f.name, f"it is not a type I take; I take {render.TAKEN}"))
            return
        try:
            stored = await kept.store_bytes(data, mime)
        except InvalidParams as exc:
            await self._answer(f.room_id, key, render.file_refused(f.name, exc.message))
            return
        await self._prompt(f, commands.prompt_text(f.caption), "queue",
                           [Attachment(sha256=stored.sha256, name=f.name)])

    async def _prompt(self, msg: Message | File, text: str, intent: Intent,
                      files: list[Attachment] | None = None) -> None:
        session_id = await self._session_of(msg.room_id)
        platform = self.transport.platform
        params = PromptSubmitParams(session_id=session_id, request_id=f"{platform}:{msg.event_id}",
                                    text=text, intent=intent, attachments=files)
        # A steer joins the turn running now at its next step; to an idle session it is a
        # prompt of its own.
        joins = self.authority.running(session_id) is not None
        receipt = await self.authority.submit(f"{self.transport.platform}:{msg.sender}", params)
        if receipt.duplicate:
            return
        if intent == "steer":
            await self._answer(msg.room_id, f"cmd:{msg.event_id}",
                               "↪ Added to the running turn." if joins else
                               "Nothing was running, so it runs as a new prompt.")
        elif isinstance(msg, Message) and msg.text.lstrip().startswith("/queue") \
                and receipt.status == "queued":
            await self._answer(msg.room_id, f"cmd:{msg.event_id}",
                               f"Queued (position {receipt.position or 1}).")

    async def _session_of(self, room_id: str) -> str:
        """The session the room talks to, bound now if this is its first message: the
        configured one, else a new session."""
        configured = self.settings.rooms.get(room_id)
        model = self.default_model()

        def job(tx: Tx) -> store.Binding:
            bound = store.binding(tx, self.name, room_id)
            if bound is not None and sessions.exists(tx, bound.session_id):
                leaf = compression.leaf(tx, bound.session_id)
                return bound if leaf == bound.session_id else store.bind(tx, self.name, room_id, leaf)
            if configured and sessions.exists(tx, configured):
                return store.bind(tx, self.name, room_id, compression.leaf(tx, configured))
            return _new_session(tx, self.name, room_id, self.settings.cwd, model)

        binding = await self.db.write(job)
        self.out.follow(room_id, binding.session_id)
        return binding.session_id

    async def _command(self, msg: Message, command: commands.Command) -> None:
        if not await self.db.write(lambda tx: store.claim(tx, self.name, msg.event_id)):
            return  # already handled: a redelivery
        room = msg.room_id
        if command.name == "help" or not command.known:
            head = "" if command.known else f"Unknown command /{command.name}.\n\n"
            await self._answer(room, f"cmd:{msg.event_id}", head + commands.HELP)
        elif command.name == "stop":
            await self._answer(room, f"cmd:{msg.event_id}", await self._stop(room))
        elif command.name == "status":
            await self._answer(room, f"cmd:{msg.event_id}", await self._status_text(room))
        elif command.name == "new":
            await self._answer(room, f"cmd:{msg.event_id}", await self._new(room, command.arg))
        else:
            await self._answer(room, f"cmd:{msg.event_id}",
                               await self._approve(msg, command.name == "deny", command.arg))

    async def _stop(self, room_id: str) -> str:
        bound = await self.db.read(lambda tx: store.binding(tx, self.name, room_id))
        if bound is None:
            return "Nothing is running here."
        stopped = await self._interrupt(bound.session_id)
        return "⏹ Stopping the running turn." if stopped else "Nothing is running here."

    async def _status_text(self, room_id: str) -> str:
        def read(tx: Tx) -> str:
            bound = store.binding(tx, self.name, room_id)
            if bound is None or not sessions.exists(tx, bound.session_id):
                return "No session yet: send a message to start one."
            session = sessions.get(tx, bound.session_id)
            assert session is not None
            queued = admissions.queued_count(tx, bound.session_id)
            waiting = approvals.pending(tx, bound.session_id)
            lines = [f"**{session.title}** · `{session.session_id}`",
                     f"Model: {session.model or 'the default'} · folder: `{session.cwd}`",
                     f"Now: {_STATUS.get(session.status, session.status)}"]
            if queued:
                lines.append(f"Queued: {queued} message{'s' if queued != 1 else ''}")
            if waiting:
                lines.append(f"Waiting for approval: {len(waiting)}")
            lines.append(f"Messages: {session.message_count} · tokens in/out: "
                         f"{session.input_tokens:,}/{session.output_tokens:,}")
            return "\n".join(lines)

        return await self.db.read(read)

    async def _new(self, room_id: str, title: str) -> str:
        bound = await self.db.read(lambda tx: store.binding(tx, self.name, room_id))
        if bound is not None and self._busy(bound.session_id):
            return "A turn is running in this session: /stop it or wait for it, then /new."
        model = self.default_model()
        binding = await self.db.write(
            lambda tx: _new_session(tx, self.name, room_id, self.settings.cwd, model, title))
        self.out.follow(room_id, binding.session_id)
        return f"New session started (`{binding.session_id}`); the last one stays in Turnkey."

    def _busy(self, session_id: str) -> bool:
        return self.authority.running(session_id) is not None

    async def _approve(self, msg: Message, deny: bool, arg: str) -> str:
        parsed = commands.approval_answer(arg) if not deny else ("deny", arg.strip() or None)
        if isinstance(parsed, str):
            return parsed
        decision, chosen = parsed
        target = await self._approval_target(msg.room_id, chosen, msg.reply_to)
        if isinstance(target, str):
            return target
        return await self._respond(target, decision)

    async def _respond(self, approval: Approval, decision: Any) -> str:
        try:
            await self.approvals.respond(approval.approval_id, decision)
        except ApprovalClosed as exc:
            return exc.message
        return {"deny": "🚫 Denied.", "once": "✅ Approved once.",
                "session": "✅ Approved for this session.",
                "always": "✅ Approved always (a rule was added; see Settings in Turnkey)."}[decision]

    async def _approval_target(self, room_id: str, chosen: str | None,
                               reply_to: str | None) -> Approval | str:
        def read(tx: Tx) -> Approval | str:
            bound = store.binding(tx, self.name, room_id)
            if bound is None:
                return "Nothing is waiting for approval here."
            pending = approvals.pending(tx, bound.session_id)
            key = store.key_of(tx, self.name, reply_to) if reply_to else None
            replied = key.removeprefix("approval:") if key and key.startswith("approval:") else None
            wanted = chosen or replied
            if wanted:
                for a in pending:
                    if a.approval_id == wanted:
                        return wire.approval(a)
                return f"Approval {wanted} is not waiting any more."
            if not pending:
                return "Nothing is waiting for approval here."
            if len(pending) > 1:
                return (f"{len(pending)} approvals are waiting: reply to the one you mean with "
                        "/approve or /deny (or react to it).")
            return wire.approval(pending[0])

        return await self.db.read(read)

    async def _reaction(self, reaction: Reaction) -> None:
        if reaction.sender not in self.settings.allowed_users:
            await self._refuse(reaction.room_id, reaction.sender)
            return
        decision = commands.REACTIONS.get(reaction.key)
        if decision is None:
            return
        key = await self.db.read(lambda tx: store.key_of(tx, self.name, reaction.target))
        if key is None or not key.startswith("approval:"):
            return
        if not await self.db.write(lambda tx: store.claim(tx, self.name, reaction.event_id)):
            return
        target = await self._approval_target(reaction.room_id, key.removeprefix("approval:"), None)
        if isinstance(target, Approval):
            with contextlib.suppress(ApprovalClosed, NotFound):
                await self.approvals.respond(target.approval_id, decision)

    async def _answer(self, room_id: str, key: str, text: str) -> None:
        await self.db.write(lambda tx: store.owe(tx, self.name, room_id, key,
                                                 {"text": text, "notice": True}))
        self.out.owed()


_STATUS = {
    "idle": "idle", "running": "running a turn", "waiting_approval": "waiting for your approval",
    "waiting_answer": "waiting for your answer to a question",
    "queued": "about to start the next message",
    "unknown": "a turn's outcome is unknown (the backend stopped during it)",
}


def _new_session(tx: Tx, door: str, room_id: str, cwd: str, model: str, title: str = "") -> store.Binding:
    session_id = new_id("ses")
    title = title.strip()
    sessions.insert(tx, session_id, title or sessions.UNTITLED, cwd, model, titled=bool(title))
    session = sessions.get(tx, session_id)
    assert session is not None
    wire.broadcast(tx, session_id, SessionCreated(session=wire.session(session)))
    return store.bind(tx, door, room_id, session_id)


def _refusal_before_download(f: File) -> str | None:
    """Why a file is refused from what its event says, sparing the download; None to fetch it."""
    if f.url is None:
        return "it is end-to-end encrypted, and I cannot read encrypted files"
    if f.kind in ("m.audio", "m.video"):
        return f"I do not take {f.kind.removeprefix('m.')}; I take {render.TAKEN}"
    if f.declared_bytes is not None and f.declared_bytes > MAX_ATTACHMENT_BYTES:
        return _too_big(f.declared_bytes)
    return None


def _too_big(size: int | None = None) -> str:
    has = f" and this one has {size:,} bytes" if size else ""
    return f"a file may have at most {MAX_ATTACHMENT_BYTES // (1024 * 1024)} MiB{has}"


def _quiet(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("door state could not be published: %s", task.exception())


def home_cwd(cwd: str | None) -> str:
    return str(Path(cwd).expanduser()) if cwd else str(Path.home())
