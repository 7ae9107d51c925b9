"""Side by side with OpenAI's Codex CLI, in the same run, against the same fake model server.

Codex is installed from npm into tests/bench/.codex/ (gitignored; reused when present) and its
native binary is timed (`node_modules/.bin/codex` is a Node wrapper that starts Node first).
It talks the OpenAI Responses API to a custom provider set in a throwaway CODEX_HOME's
config.toml; the fake answers `/responses` in that streaming shape and `/chat/completions` for
ours (tests/fakes/openai_server.py), with the same reply ("ok").

Figures, each the median of RUNS after one unmeasured run, ours and Codex's alternated:
spawn → ready (our READY line; our `initialize` answered over the WebSocket; Codex's
`app-server` answering its `initialize` on stdio), the one-shot (`python -m desktop.cli chat hi`
with no backend running and with one up, against `codex exec`), and each server's memory.
Python processes run with cached bytecode, as in test_cold_chat.py.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from websockets.sync.client import connect

from shared.launcher import BackendInfo
from tests.bench.process_runs import (
    alternated,
    cached_env,
    chat_ms,
    cold_chat_ms,
    fresh_folder,
    load,
    stop,
    timed,
)
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.backend_proc import REPO

RUNS = 5
CODEX_DIR = REPO / "tests" / "bench" / ".codex"
NPM_TIMEOUT_S = 600
SETTLE_S = 1.0  # before reading a server's memory (ours: after its build, and its warm-up)
CODEX_INIT = {"method": "initialize", "id": 0,
              "params": {"clientInfo": {"name": "turnkey-bench", "version": "0"}}}


def _native(root: Path) -> Path | None:
    """The platform package's native binary (@openai/codex-linux-x64/vendor/.../bin/codex)."""
    found = sorted(root.glob("node_modules/@openai/codex-*/vendor/*/bin/codex"))
    return found[0] if found else None


@pytest.fixture(scope="module")
def codex() -> Path:
    binary = _native(CODEX_DIR)
    if binary is None:
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: cannot install @openai/codex to compare with")
        try:
            done = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(CODEX_DIR),
                 "@openai/codex"], capture_output=True, text=True, timeout=NPM_TIMEOUT_S,
                check=False)
        except subprocess.TimeoutExpired:
            pytest.skip("npm install @openai/codex timed out (no network?)")
        binary = _native(CODEX_DIR)
        if done.returncode != 0 or binary is None:
            pytest.skip(f"npm install @openai/codex failed (no network?): {done.stderr[-500:]}")
    return binary


@pytest.fixture
def codex_home(tmp_path: Path, fake_provider: FakeOpenAI) -> Path:
    """A throwaway CODEX_HOME whose model is the fake, over the Responses API."""
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(
        'model = "fake-model"\nmodel_provider = "fake"\n'
        "[model_providers.fake]\n"
        f'name = "fake"\nbase_url = "{fake_provider.base_url}"\n'
        'env_key = "FAKE_API_KEY"\nwire_api = "responses"\n'
    )
    return home


def _codex_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(CODEX_HOME=str(home), FAKE_API_KEY="fake-key", NO_PROXY="127.0.0.1,localhost",
               no_proxy="127.0.0.1,localhost")
    return env


def _rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


def _ours_ready(data: Path) -> tuple[float, float, float]:
    """Ours: spawn → READY, spawn → `initialize` answered (ms), and its RSS once built (MB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "backend", "serve", "--data-dir", str(data), "--port", "0"],
        cwd=REPO, env=cached_env(data), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        ready = (time.perf_counter() - start) * 1000
        assert line.startswith(b"TURNKEY_BACKEND_READY"), line
        info = BackendInfo.read(data)
        assert info is not None
        with connect(f"ws://127.0.0.1:{info.port}/rpc", proxy=None,
                     additional_headers={"Authorization": f"Bearer {info.token}"}) as ws:
            ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "client": {"name": "bench", "version": "0"}, "protocol": 1}}))
            answer = json.loads(ws.recv(timeout=30))
            initialized = (time.perf_counter() - start) * 1000
            assert "result" in answer, answer
            # session.list waits for the build after READY: the memory is read once built.
            ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session.list",
                                "params": {}}))
            assert "result" in json.loads(ws.recv(timeout=60))
        time.sleep(SETTLE_S)
        rss = _rss_mb(proc.pid)
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0
    return ready, initialized, rss


def _codex_ready(codex: Path, home: Path) -> tuple[float, float]:
    """Codex: spawn `codex app-server` → its answer to `initialize` (ms), and its RSS (MB)."""
    start = time.perf_counter()
    proc = subprocess.Popen([str(codex), "app-server"], cwd=home, env=_codex_env(home),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(json.dumps(CODEX_INIT).encode() + b"\n")
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            assert line, "codex app-server closed stdout before answering initialize"
            message = json.loads(line)
            if message.get("id") == 0:
                break
        elapsed = (time.perf_counter() - start) * 1000
        assert "result" in message, message
        time.sleep(SETTLE_S)
        rss = _rss_mb(proc.pid)
    finally:
        proc.kill()
        proc.wait(timeout=20)
    return elapsed, rss


def _codex_exec(codex: Path, home: Path, workdir: Path) -> float:
    start = time.perf_counter()
    out = subprocess.run([str(codex), "exec", "--skip-git-repo-check", "hi"], cwd=workdir,
                         env=_codex_env(home), stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=60, check=False)
    elapsed = (time.perf_counter() - start) * 1000
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok", out.stdout
    return elapsed


def _shown(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ms ({min(values):.0f}–{max(values):.0f})"


@pytest.mark.bench
def test_against_codex(tmp_path: Path, fake_provider: FakeOpenAI, codex: Path,
                       codex_home: Path) -> None:
    fake_provider.default = Reply(deltas=["ok"])
    work = tmp_path / "work"
    work.mkdir()
    env = cached_env(tmp_path / "baseline")
    bare, codex_version = alternated(
        RUNS,
        lambda: timed([sys.executable, "-c", "pass"], env)[0],
        lambda: timed([str(codex), "--version"], _codex_env(codex_home))[0])
    load_before = load()

    data = fresh_folder(tmp_path, "ready", fake_provider.base_url)
    ours: list[tuple[float, float, float]] = []
    theirs: list[tuple[float, float]] = []

    def ours_ready() -> float:
        ours.append(_ours_ready(data))
        return ours[-1][0]

    def codex_ready() -> float:
        theirs.append(_codex_ready(codex, codex_home))
        return theirs[-1][0]

    alternated(RUNS, ours_ready, codex_ready)
    ready = [r for r, _, _ in ours[1:]]
    initialized = [i for _, i, _ in ours[1:]]
    ours_rss = [m for _, _, m in ours[1:]]
    codex_init = [t for t, _ in theirs[1:]]
    codex_rss = [m for _, m in theirs[1:]]

    chat = fresh_folder(tmp_path, "chat", fake_provider.base_url)
    cold, codex_cold = alternated(RUNS, lambda: cold_chat_ms(chat),
                                  lambda: _codex_exec(codex, codex_home, work))
    chat_ms(chat)  # leaves its backend up
    try:
        warm, codex_again = alternated(RUNS, lambda: chat_ms(chat),
                                       lambda: _codex_exec(codex, codex_home, work))
    finally:
        stop(chat)
    exec_all = codex_cold + codex_again
    med = statistics.median
    print(
        f"\nBENCH codex: spawn → ready, medians of {RUNS} (range), alternated; {load_before}, "
        f"after: {load()}"
        f"\nBENCH   ours: READY line {_shown(ready)}; `initialize` answered over the WebSocket "
        f"{_shown(initialized)}"
        f"\nBENCH   codex app-server (native binary): `initialize` answered on stdio "
        f"{_shown(codex_init)}; ratio ours READY / codex {med(ready) / med(codex_init):.2f}, "
        f"ours initialize / codex {med(initialized) / med(codex_init):.2f} — goal <= 1"
        f"\nBENCH codex: one-shot, medians of {RUNS} (range), alternated with `codex exec`"
        f"\nBENCH   ours `python -m desktop.cli chat hi`: cold (no backend) {_shown(cold)}, warm "
        f"(backend up) {_shown(warm)}"
        f"\nBENCH   codex exec --skip-git-repo-check hi (native binary): {_shown(codex_cold)} "
        f"beside our cold runs, {_shown(codex_again)} beside our warm runs; ratio cold / codex "
        f"{med(cold) / med(codex_cold):.2f}, warm / codex {med(warm) / med(codex_again):.2f}"
        f" — goal <= 1"
        f"\nBENCH codex: memory (RSS medians): ours {med(ours_rss):.1f} MB ({SETTLE_S:.0f} s after its "
        f"build, idle), codex app-server {med(codex_rss):.1f} MB ({SETTLE_S:.0f} s after initialize)"
        f"\nBENCH codex: baselines: `python -c pass` {_shown(bare)}, `codex --version` "
        f"{_shown(codex_version)}; codex exec overall {_shown(exec_all)}"
    )
