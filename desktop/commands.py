"""What each `turnkey` command that talks to the backend does, and how a chat prints.

It is a client like the desktop app: it finds (or starts) the backend and
speaks only the wire protocol to it.  `desktop/cli.py` parses the command
line, starts the backend when none runs, and only then imports this module,
so its imports overlap the backend's start.  Each command is a body written against a
connected client, wrapped by `@connected`, which owns the connection and the one line a
refused call prints.
"""

from __future__ import annotations

import asyncio
import functools
import signal
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec

from desktop.state.ansi import SGR_AND_EL, AnsiStripper
from desktop.state.live_tail import Lines
from desktop.state.sessions import local_time
from shared import protocol as p
from shared import uploads
from shared.client import BackendNotFound, Client, ClientState, Incoming, InvalidParams, RpcError
from shared.launcher import running, start_backend, stop_backend, wait_ready
from shared.mcp_names import count_words, shown_name, shown_summary
from shared.methods import (
    AdmissionGet,
    ApprovalRespond,
    ClarifyRespond,
    ConfigGet,
    ConfigSet,
    McpList,
    McpTest,
    MemoryGet,
    MemorySet,
    PromptSubmit,
    ProviderTest,
    SecretSet,
    SessionCreate,
    SessionGet,
    SessionList,
    SessionMessages,
    TurnInterrupt,
)
from shared.remote import RemoteTarget
from shared.uploads import Attached

Starting = subprocess.Popen[bytes]  # a backend `shared.launcher.spawn` started, not yet READY
P = ParamSpec("P")

PROVIDER_TEST_WAIT_S = 90.0  # the backend bounds a test at 60 s
MCP_TEST_WAIT_S = 150.0  # a server's start-up is bounded by its startup_timeout_s (30 s default)
DECISIONS: dict[str, p.Decision] = {
    "o": "once", "y": "once", "s": "session", "a": "always", "d": "deny", "n": "deny",
}


@dataclass(frozen=True)
class Route:
    """Which backend a command talks to: the folder's own (`starting`, a backend this
    process just started, or else the one running), or with `remote` one on another
    computer."""

    data_dir: Path
    starting: Starting | None = None
    remote: RemoteTarget | None = None


async def ensure_client(route: Route) -> Client:
    """Connects to the folder's backend: the one `starting` once it is READY, else the one
    running, started first if nothing answers.  With `remote`, to that backend only (none
    is started here)."""
    data_dir, starting = route.data_dir, route.starting
    if route.remote is not None:
        client = Client(data_dir, name="turnkey-cli", remote=route.remote)
        await client.connect()
        return client
    client = Client(data_dir, name="turnkey-cli")
    if starting is not None:
        await asyncio.to_thread(wait_ready, starting, data_dir)
        await client.connect()
        return client
    try:
        await client.connect()
    except BackendNotFound:
        await start_backend(data_dir)
        await client.connect()
    return client


def refusal_line(exc: RpcError) -> str:
    """What a command prints when the backend refuses a call: its words, and the field they
    are about (a config patch's field as config.toml names it, without `patch.`)."""
    field = exc.field.removeprefix("patch.") if isinstance(exc, InvalidParams) else ""
    return f"turnkey: {exc.message}" + (f" ({field})" if field else "")


def connected(
    body: Callable[Concatenate[Client, P], Awaitable[int]],
) -> Callable[Concatenate[Route, P], Coroutine[Any, Any, int]]:
    """A command written against a connected client, made into one that takes the `Route`
    to its backend first: it connects, closes whatever happens, and a call the backend
    refuses ends the command with one line on stderr and exit status 1."""

    @functools.wraps(body)
    async def command(route: Route, /, *args: P.args, **kwargs: P.kwargs) -> int:
        client = await ensure_client(route)
        try:
            return await body(client, *args, **kwargs)
        except RpcError as exc:
            print(refusal_line(exc), file=sys.stderr)
            return 1
        finally:
            await client.close()

    return command


class Answer:
    """Where the model's words go: plain text as it streams (a pipe gets exactly the
    answer), or, on a terminal, markdown rendered live by `rich` (headings, lists, code
    highlighted), one block per stretch of text between tool calls."""

    def __init__(self, rendered: bool) -> None:
        self.rendered = rendered
        self.segment = ""  # the text since the last tool call
        self._live: Any = None

    def add(self, text: str) -> None:
        if not self.rendered:
            print(text, end="", flush=True)
            return
        self.segment += text
        if self._live is None:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(console=Console(), refresh_per_second=8, vertical_overflow="visible")
            self._live.start()
        self._live.update(_markdown(self.segment))

    def pause(self) -> None:
        """A tool call starts: what was said so far stays as it is."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        self.segment = ""

    def end(self) -> None:
        if self.rendered:
            self.pause()
        else:
            print()


class ToolOutput:
    """What running tools print (tool.progress, a stream), on stderr: on a terminal as it comes,
    colours kept and `\r` left to redraw the line, other control sequences dropped; else as
    clean finished lines, each progress bar as it was left."""

    def __init__(self, tty: bool) -> None:
        self.tty = tty
        self._call: str | None = None
        self._start()

    def _start(self) -> None:
        self._ansi = AnsiStripper(SGR_AND_EL if self.tty else None)
        self._lines = Lines()
        self._written = False
        self._mid_line = False  # on a terminal: the cursor is not at a line start

    def add(self, call_id: str, text: str) -> None:
        if call_id != self._call:
            self.end()
            self._call = call_id
        clean = self._ansi.feed(text)
        if not clean:
            return
        if self.tty:
            sys.stderr.write(clean)
            self._written, self._mid_line = True, not clean.endswith("\n")
        else:
            for line in self._lines.feed(clean):
                print(line, file=sys.stderr)
        sys.stderr.flush()

    def end(self) -> None:
        """The call finished, or another one's output comes: its last line is ended."""
        if self.tty and self._written:
            sys.stderr.write("\x1b[0m" + ("\n" if self._mid_line else ""))  # colours off
        elif self._lines.current:
            print(self._lines.current, file=sys.stderr)
        sys.stderr.flush()
        self._call = None
        self._start()


def _markdown(text: str) -> Any:
    from rich.markdown import Markdown

    return Markdown(text, code_theme="ansi_dark", hyperlinks=False)


def tool_words(name: str) -> str:
    """A tool's name on a terminal line: an MCP tool's own name and its server
    ("get_time (time · MCP)"), a built-in tool's name as it is."""
    shown, origin = shown_name(name)
    return f"{shown} ({origin})" if origin else shown


def usage_words(usage: p.Usage) -> str:
    est = "~" if usage.estimated else ""
    return (f"[{est}{usage.input_tokens:,} in · {usage.output_tokens:,} out"
            f"{f' · {usage.cached_tokens:,} cached' if usage.cached_tokens else ''}"
            f" · ${usage.cost_usd:.4f}]")


class Chat:
    """Streams one session's turns to the terminal."""

    def __init__(self, client: Client, session_id: str, rendered: bool | None = None) -> None:
        self.client = client
        self.session_id = session_id
        self.waiting: str | None = None  # admission id whose message.complete ends the turn
        self.joined: str | None = None  # the running turn a steer joined (its events are ours)
        self.done = asyncio.Event()
        self.shown = ""
        self.rendered = sys.stdout.isatty() if rendered is None else rendered
        self.answer = Answer(self.rendered)
        self.tool_output = ToolOutput(sys.stderr.isatty())
        self.ended: str = "completed"  # how the last turn ended: a TurnStatus, or an AdmissionOutcome
        self._tasks: set[asyncio.Future[Any]] = set()
        self._asked: set[str] = set()
        self._children: set[str] = set()  # sub-agents' sessions this session's calls started
        client.handlers.append(self._on_event)

    def _on_event(self, ev: Incoming) -> None:
        data = ev.data
        if isinstance(data, ClientState):
            print("\n[reconnecting]" if data.state == "reconnecting" else "", end="", file=sys.stderr)
            if data.state == "connected" and self.waiting is not None:
                # While away, the turn may have been lost and its session taken over (the
                # news was a broadcast, not replayed): its receipt says.
                self._spawn(self._lost(self.waiting))
            return
        if isinstance(data, p.ApprovalEvent) and ev.seq is None and ev.session_id in self._children:
            # A sub-agent asks in its own session (only the broadcast copy reaches us): nobody
            # else may be watching it, so it is asked here.
            self._on_approval(data)
            return
        if isinstance(data, p.QuestionEvent) and ev.seq is None and ev.session_id in self._children:
            self._on_question(data)  # a sub-agent's question, as its approvals
            return
        if ev.session_id != self.session_id or self.waiting is None:
            return
        if isinstance(data, p.SessionUpdated) and data.session.status == "unknown":
            # The turn was lost (its backend died and another took the session over, or its
            # end could not be saved): no message.complete comes; the stored note says why.
            self._spawn(self._lost(self.waiting))
            return
        if isinstance(data, p.ApprovalEvent) and ev.seq is not None:  # the stored copy, once
            self._on_approval(data)
            return
        if isinstance(data, p.QuestionEvent) and ev.seq is not None:  # the stored copy, once
            self._on_question(data)
            return
        if isinstance(data, p.TurnSteered) and data.admission_id == self.waiting:
            # The steer joined a running turn: that turn's events are ours from here on.
            self.joined = data.turn_id
            print("[steering the running turn: the model reads this at its next step]",
                  file=sys.stderr)
            return
        if ev.admission_id != self.waiting and (self.joined is None or ev.turn_id != self.joined):
            return
        if isinstance(data, p.ToolStart):
            self.answer.pause()
            self.tool_output.end()
            print(f"\n[{tool_words(data.name)}] {shown_summary(data.name, data.summary)}",
                  file=sys.stderr, flush=True)
        elif isinstance(data, p.ToolProgress):
            child = (data.meta or {}).get("child_session_id")
            if isinstance(child, str):
                self._children.add(child)
            self.tool_output.add(data.call_id, data.text)
        elif isinstance(data, p.ToolComplete):
            self.tool_output.end()
            print(f"[{tool_words(data.name)} {data.status}, {data.duration_ms} ms] "
                  f"{shown_summary(data.name, data.summary)}", file=sys.stderr)
        elif isinstance(data, p.ProviderRetry):
            print(f"\n[retrying in {data.delay_s:g} s (attempt {data.attempt}): {data.reason}]",
                  file=sys.stderr)
        elif isinstance(data, p.ProviderFallback):
            print(f"\n[switching from {data.from_} to {data.to}: {data.reason}]", file=sys.stderr)
        elif isinstance(data, p.LeaseWaiting):
            print(f"[waiting: another Turnkey process (pid {data.holder_pid}) is running this "
                  "session]", file=sys.stderr)
        elif isinstance(data, p.TextDelta):
            self.shown += data.text
            self.answer.add(data.text)
        elif isinstance(data, p.MessageComplete):
            final = data.text
            # The final text is the truth; mend the screen if the stream differed.
            if final.startswith(self.shown):
                if final[len(self.shown):]:
                    self.answer.add(final[len(self.shown):])
            else:
                self.answer.pause()
                self.answer.add(f"\n{final}")
            self.answer.end()
            if data.status != "completed":
                print(f"[{data.status}: {data.failure_reason or data.status}]", file=sys.stderr)
                if data.failure_detail:
                    print(f"[details: {data.failure_detail}]", file=sys.stderr)
            print(usage_words(data.usage), file=sys.stderr)
            self.ended = data.status
            self.done.set()
        elif isinstance(data, p.AdmissionEvent) and data.receipt.outcome == "cancelled":
            print("[cancelled]", file=sys.stderr)
            self.ended = "cancelled"
            self.done.set()

    async def send(self, text: str, steer: bool = False, files: Sequence[Attached] = ()) -> str:
        """Sends `text` (with `files`, uploaded first) and streams its turn; returns how it
        ended ("completed", ...).  `steer`: into the running turn, if one runs (then its
        end is ours)."""
        self.done.clear()
        self.shown = ""
        self.answer = Answer(self.rendered)
        self.waiting = self.joined = None
        attached: list[p.Attachment] = []
        for f in files:
            held = await uploads.upload(self.client, f.data, f.mime_type)
            attached.append(p.Attachment(sha256=held.sha256, name=f.name))
        answer = await self.client.call(PromptSubmit(
            session_id=self.session_id, request_id=uuid.uuid4().hex, text=text,
            attachments=attached or None, intent="steer" if steer else "queue"))
        receipt = answer.receipt
        self.waiting = receipt.admission_id
        if receipt.status == "terminal":  # settled before we started listening
            return receipt.outcome or "completed"
        if (receipt.position or 1) > 1 and not steer:
            print(f"[queued at position {receipt.position}]", file=sys.stderr)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, self._interrupt)
        try:
            await self.done.wait()
        finally:
            loop.remove_signal_handler(signal.SIGINT)
        return self.ended

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _lost(self, admission_id: str) -> None:
        """Ends the wait for a turn whose outcome became unknown, saying what happened."""
        receipt = (await self.client.call(AdmissionGet(admission_id=admission_id))).receipt
        if receipt.status != "unknown" or self.waiting != admission_id or self.done.is_set():
            return
        page = await self.client.call(SessionMessages(session_id=self.session_id, limit=20))
        note = next((m.content for m in reversed(page.messages)
                     if m.role == "system_note" and m.note_kind == "recovered"
                     and (receipt.turn_id is None or m.turn_id == receipt.turn_id)), None)
        self.answer.end()
        self.tool_output.end()
        print(f"\n[unknown: {note or 'the turn was lost; its outcome is unknown'}]",
              file=sys.stderr)
        self.ended = "unknown"
        self.done.set()

    def _on_approval(self, event: p.ApprovalEvent) -> None:
        approval = event.approval
        if isinstance(event, p.ApprovalResolved):
            if approval.approval_id in self._asked and approval.status == "expired":
                print("[approval expired: not run]", file=sys.stderr)
            return
        if not isinstance(event, p.ApprovalRequested) or approval.approval_id in self._asked:
            return
        self._asked.add(approval.approval_id)
        task = asyncio.ensure_future(self._ask(approval))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _ask(self, approval: p.Approval) -> None:
        """Asks on the terminal; no answer (no terminal, end of input) leaves the request to
        time out as denied, or to be answered in another window."""
        print(f"\n[approval needed] {tool_words(approval.tool)}: "
              f"{shown_summary(approval.tool, approval.summary)}\n"
              f"  why: {approval.reason}  (expires at {local_time(approval.expires_at, '%H:%M:%S')})",
              file=sys.stderr)
        print("  allow [o]nce, for this [s]ession, [a]lways, or [d]eny? ", end="", file=sys.stderr,
              flush=True)
        try:
            answer = await asyncio.to_thread(_read_line)
        except (EOFError, KeyboardInterrupt):
            print("  [no answer; it will be denied when it expires]", file=sys.stderr)
            return
        decision = DECISIONS.get(answer.strip().lower()[:1], "deny")
        try:
            await self.client.call(ApprovalRespond(approval_id=approval.approval_id, decision=decision))
        except RpcError as exc:
            print(f"  [{exc.message}]", file=sys.stderr)

    def _on_question(self, event: p.QuestionEvent) -> None:
        question = event.question
        if isinstance(event, p.QuestionResolved):
            if question.question_id in self._asked and question.status == "expired":
                print("[nobody answered the question in time]", file=sys.stderr)
            return
        if question.question_id in self._asked:
            return
        self._asked.add(question.question_id)
        self._spawn(self._ask_question(question))

    async def _ask_question(self, question: p.Question) -> None:
        """Asks on the terminal: a choice's number, or words where the question takes them.
        No answer (no terminal, end of input) leaves it to expire or to another window."""
        print(f"\n[question] {question.question}", file=sys.stderr)
        for number, text in enumerate(question.choices, 1):
            print(f"  {number}. {text}", file=sys.stderr)
        how = ("a number or your answer" if question.allow_other else "a number") \
            if question.choices else "your answer"
        print(f"  {how} (expires at {local_time(question.expires_at, '%H:%M:%S')}): ", end="",
              file=sys.stderr, flush=True)
        try:
            line = (await asyncio.to_thread(_read_line)).strip()
        except (EOFError, KeyboardInterrupt):
            print("  [no answer; the model is told nobody answered when it expires]",
                  file=sys.stderr)
            return
        choice = int(line) - 1 if line.isdigit() and 1 <= int(line) <= len(question.choices) \
            else None
        try:
            await self.client.call(ClarifyRespond(
                question_id=question.question_id, choice=choice,
                answer=None if choice is not None else line[:p.MAX_ANSWER]))
        except RpcError as exc:
            print(f"  [{exc.message}]", file=sys.stderr)

    def _interrupt(self) -> None:
        print("\n[interrupting]", file=sys.stderr)
        task = asyncio.ensure_future(self.client.call(TurnInterrupt(session_id=self.session_id)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _read_line() -> str:
    """A line from stdin (prompts go to stderr, so stdout stays the answer alone)."""
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line


OFFLINE_NOTE = (
    "[no provider is configured, so the small offline model answers ({model}): it is tiny and "
    "weak, fine for a hello, not for work. Add a provider to config.toml (see the README).]"
)


NO_SANDBOX_NOTE = (
    "[commands run WITHOUT a sandbox: {reason}. In smart mode every command that is not "
    "plainly read-only asks first.]"
)


@connected
async def chat(
    client: Client, session_id: str | None, text: str | None, cwd: Path | None,
    steer: bool = False, files: Sequence[Attached] = (),
) -> int:
    """Sends `text` and streams its turn, or with no `text` reads prompts until end of input."""
    _say_what_answers(client)
    if session_id is None:
        # Untitled: the backend names it from the first prompt, as for every client.
        session = (await client.call(SessionCreate(cwd=str(cwd) if cwd else None))).session
        session_id = session.session_id
        print(f"[session {session_id}]", file=sys.stderr)
    else:
        await client.subscribe(session_id)
        session = (await client.call(SessionGet(session_id=session_id))).session
    if session.folder_warning:  # its folder is the home folder or /
        print(f"[{session.folder_warning}]", file=sys.stderr)
    client.follow(session_id)
    chat = Chat(client, session_id)
    if text is not None:
        return 0 if await chat.send(text, steer=steer, files=files) == "completed" else 1
    print("Type a message; Enter sends, Ctrl-C interrupts a turn, Ctrl-D quits.", file=sys.stderr)
    while True:
        try:
            line = await asyncio.to_thread(input, "> ")
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        if line.strip():
            await chat.send(line)


def _say_what_answers(client: Client) -> None:
    """Warns, before the first prompt, of a tiny offline model answering or of commands
    running without a sandbox."""
    assert client.server is not None, "connect() initializes"
    capabilities = client.server.capabilities
    if capabilities.provider.offline_default:
        print(OFFLINE_NOTE.format(model=capabilities.provider.model or ""), file=sys.stderr)
    if not capabilities.sandbox.active:
        print(NO_SANDBOX_NOTE.format(reason=capabilities.sandbox.reason or "unknown"), file=sys.stderr)


@connected
async def sessions(client: Client, limit: int) -> int:
    result = await client.call(SessionList(limit=limit))
    for s in result.sessions:
        print(f"{s.session_id}  {s.status:<8} {s.updated_at[:19]}  {s.title}")
    return 0


@connected
async def secret_set(client: Client, name: str, value: str) -> int:
    result = await client.call(SecretSet(name=name, value=value))
    where = "the system keyring" if result.stored == "keyring" else "a file"
    print(f"stored {name!r} in {where}")
    if result.warning:
        print(f"warning: {result.warning}", file=sys.stderr)
    return 0


@connected
async def provider_test(client: Client, name: str | None) -> int:
    result = await client.call(ProviderTest(provider=name or None), timeout=PROVIDER_TEST_WAIT_S)
    what = f"{result.provider or '(no provider)'} ({result.model or 'no model'})"
    if result.ok:
        print(f"ok: {what} answered in {result.latency_ms} ms")
        return 0
    error = result.error
    print(f"failed: {what} after {result.latency_ms} ms: {error.message if error else ''}")
    if error is not None and error.detail:
        print(f"  details ({error.kind}): {error.detail}")
    return 1


# --- MCP servers ---------------------------------------------------------------------


def mcp_server_line(server: p.McpServerStatus) -> str:
    """One server as `turnkey mcp list` prints it: name, state, transport, its tools."""
    tools = "tools not listed yet" if server.tools is None else count_words(server.tools)
    return f"{server.name:<20} {server.state:<9} {server.transport:<6} {tools}"


def mcp_tool_lines(server: p.McpServerStatus) -> list[str]:
    """A server's tools, one a line: the name the model calls it by, its approval, what it does."""
    lines = []
    for tool in server.tools or []:
        about = " ".join(tool.description.split())
        about = about if len(about) <= 100 else about[:99] + "…"
        approval = tool.approval if tool.enabled else "hidden"
        lines.append(f"  {tool.name:<28} {approval:<8} {about}".rstrip())
    return lines


@connected
async def mcp_list(client: Client, name: str | None, tools: bool) -> int:
    result = await client.call(McpList(name=name))
    if not result.servers:
        print("no MCP servers configured (add one: turnkey mcp add NAME -- COMMAND [ARGS...], "
              "or turnkey mcp add NAME --url URL)")
        return 0
    for server in result.servers:
        print(mcp_server_line(server))
        if server.error:
            print("  error: " + server.error.strip().replace("\n", "\n    "))
        if tools:
            print("\n".join(mcp_tool_lines(server)) or "  (no tools)")
    return 0


@connected
async def mcp_add(client: Client, name: str, table: dict[str, Any]) -> int:
    """Adds `[mcp.servers.NAME]` with config.set; a name in use is refused (remove it first:
    a patch over it would merge with what is there)."""
    config = await client.call(ConfigGet())
    if name in config.mcp.servers:
        print(f"turnkey: an MCP server called {name!r} already exists (remove it first: "
              f"turnkey mcp remove {name})", file=sys.stderr)
        return 1
    config = await client.call(ConfigSet(patch={"mcp": {"servers": {name: table}}}))
    server = config.mcp.servers.get(name)
    what = " ".join(server.command) if server is not None and server.command else table.get("url")
    print(f"added MCP server {name!r}: {what}")
    for header, secret in sorted(table.get("header_secrets", {}).items()):
        print(f"  {header} comes from the secret {secret!r}; store it with: turnkey secret set {secret}")
    print(f"check it with: turnkey mcp test {name}")
    return 0


@connected
async def mcp_remove(client: Client, name: str) -> int:
    config = await client.call(ConfigGet())
    if name not in config.mcp.servers:
        print(f"turnkey: no MCP server called {name!r}", file=sys.stderr)
        return 1
    await client.call(ConfigSet(patch={"mcp": {"servers": {name: None}}}))
    print(f"removed MCP server {name!r}")
    return 0


@connected
async def mcp_test(client: Client, name: str) -> int:
    """Starts (or restarts) the server and lists its tools: 0 when it answered, 1 when not."""
    result = await client.call(McpTest(name=name), timeout=MCP_TEST_WAIT_S)
    server = result.server
    if result.ok:
        print(f"ok: {name} ({server.transport}) listed {count_words(server.tools or [])} "
              f"in {result.latency_ms} ms")
        print("\n".join(mcp_tool_lines(server)) or "  (no tools)")
        return 0
    print(f"failed: {name} ({server.transport}) after {result.latency_ms} ms: "
          f"{result.error or server.error or 'no reason given'}")
    return 1


async def backend(data_dir: Path, action: str) -> int:
    info = running(data_dir)
    if action == "status":
        if info:
            print(f"running: pid {info.pid}, port {info.port}, data {data_dir}")
            if info.tls_fingerprint:  # serving another computer: what pairing needs
                print(f"listening on {info.host}:{info.port} (wss), TLS certificate SHA-256 "
                      f"{info.tls_fingerprint}")
            return 0
        print(f"not running (data {data_dir})")
        return 3
    if action == "start":
        if info:
            print(f"already running: pid {info.pid}, port {info.port}")
            return 0
        info = await start_backend(data_dir)
        print(f"started: pid {info.pid}, port {info.port}")
        return 0
    if info is None:
        print("not running")
        return 0
    if await asyncio.to_thread(stop_backend, info):
        print("stopped")
        return 0
    print(f"pid {info.pid} did not stop within 15 s", file=sys.stderr)
    return 1


# --- memory (addition) -----------------------------------------------------------------

MEMORY_NAMES = {"user": "USER.md", "environment": "ENVIRONMENT.md"}


def memory_lines(result: p.MemoryResult) -> list[str]:
    """Both notebooks as `turnkey memory show` prints them: a heading with the usage, then
    the entries (or "(empty)")."""
    lines: list[str] = []
    for target, file in (("user", result.user), ("environment", result.environment)):
        if lines:
            lines.append("")
        lines.append(f"== {target} ({MEMORY_NAMES[target]}): {file.used:,} / {file.limit:,} characters")
        lines.extend(file.text.split("\n") if file.text else ["(empty)"])
    return lines


@connected
async def memory_show(client: Client) -> int:
    result = await client.call(MemoryGet())
    print("\n".join(memory_lines(result)))
    return 0


@connected
async def memory_set(client: Client, target: p.MemoryTarget, text: str) -> int:
    """Replaces one notebook (text "" clears it), checked by the backend as the tool's writes."""
    result = await client.call(MemorySet(target=target, text=text))
    file = result.user if target == "user" else result.environment
    verb = "saved" if file.text else "cleared"
    print(f"{verb} {target} memory ({MEMORY_NAMES[target]}): {file.used:,} / {file.limit:,} characters")
    return 0
