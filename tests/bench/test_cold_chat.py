"""`turnkey chat TEXT` one-shot, cold (no backend running) and warm, against raw interpreter baselines.

Each run is the real command line (`python -m desktop.cli chat`, what the `turnkey` script runs)
as a subprocess, answered by the scripted fake provider on loopback; the clock runs from exec to
the CLI's exit, its answer printed.

Every process runs with its bytecode cached (in a folder under ``tmp_path``, warmed by one
unmeasured run of each command), as an installed app has it: with PYTHONDONTWRITEBYTECODE set
each start would compile all of Turnkey's modules again. `import backend.app` is also timed
that way, to show what that costs.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from shared.client import BackendInfo
from shared.launcher import alive
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.backend_proc import REPO, config_toml

RUNS = 7
STOP_TIMEOUT_S = 20.0

# What a minimal Python client pays for one streamed model call: interpreter, httpx, the call.
RAW_CALL = """
import sys, httpx
with httpx.Client(timeout=30) as c:
    with c.stream("POST", sys.argv[1] + "/chat/completions",
                  json={"model": "fake-model", "stream": True,
                        "messages": [{"role": "user", "content": "hi"}]}) as r:
        for line in r.iter_lines():
            pass
"""


def _env(data_dir: Path, bytecode: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if bytecode:
        env["PYTHONPYCACHEPREFIX"] = str(data_dir.parent / "pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["TURNKEY_HOME"] = str(data_dir)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"  # httpx must not proxy loopback
    env["PYTHONPATH"] = str(REPO)  # the backend the CLI spawns imports this tree too
    return env


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
                         check=False)
    elapsed = (time.perf_counter() - start) * 1000
    assert out.returncode == 0, out.stderr
    return elapsed, out.stdout


def _fresh(tmp_path: Path, name: str, base_url: str) -> Path:
    data = tmp_path / name
    data.mkdir()
    (data / "config.toml").write_text(config_toml(base_url))
    return data


def _chat_ms(data: Path) -> float:
    elapsed, stdout = _timed([sys.executable, "-m", "desktop.cli", "chat", "hi"], _env(data))
    assert stdout.strip() == "ok", stdout
    return elapsed


def _stop(data: Path) -> None:
    """SIGTERM the folder's backend and wait until it is gone (not timed)."""
    info = BackendInfo.read(data)
    if info is None:
        return
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while alive(info.pid):
        assert time.monotonic() < deadline, f"backend {info.pid} ignored SIGTERM"
        time.sleep(0.02)


def _ready_ms(data: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "backend", "serve", "--data-dir", str(data), "--port", "0"],
        cwd=REPO, env=_env(data), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    elapsed = (time.perf_counter() - start) * 1000
    assert line.startswith(b"TURNKEY_BACKEND_READY"), line
    proc.terminate()
    assert proc.wait(timeout=STOP_TIMEOUT_S) == 0
    return elapsed


def _median(f: Callable[[int], float]) -> float:
    """The median of RUNS calls after one unmeasured warm-up call (index RUNS)."""
    f(RUNS)
    return statistics.median(f(i) for i in range(RUNS))


@pytest.mark.bench
def test_cold_and_warm_chat(tmp_path: Path, fake_provider: FakeOpenAI) -> None:
    fake_provider.default = Reply(deltas=["ok"])
    py = sys.executable
    env = _env(tmp_path / "baseline")
    bare = _median(lambda _: _timed([py, "-c", "pass"], env)[0])
    httpx_import = _median(lambda _: _timed([py, "-c", "import httpx"], env)[0])
    raw_call = _median(lambda _: _timed([py, "-c", RAW_CALL, fake_provider.base_url], env)[0])
    cli_import = _median(lambda _: _timed([py, "-c", "import desktop.cli"], env)[0])
    client_import = _median(lambda _: _timed([py, "-c", "import desktop.cli, desktop.commands"],
                                             env)[0])
    app_import = _median(lambda _: _timed([py, "-c", "import backend.app"], env)[0])
    app_compiled = _median(lambda _: _timed([py, "-c", "import backend.app"],
                                            _env(tmp_path / "baseline", bytecode=False))[0])

    def cold_fresh(i: int) -> float:
        data = _fresh(tmp_path, f"fresh{i}", fake_provider.base_url)
        try:
            return _chat_ms(data)
        finally:
            _stop(data)

    existing = _fresh(tmp_path, "existing", fake_provider.base_url)

    def cold_existing(_: int) -> float:
        try:
            return _chat_ms(existing)
        finally:
            _stop(existing)

    cold = _median(cold_fresh)
    cold_again = _median(cold_existing)
    _chat_ms(existing)  # leaves its backend up
    try:
        warm = _median(lambda _: _chat_ms(existing))
    finally:
        _stop(existing)
    ready_fresh = _median(lambda i: _ready_ms(_fresh(tmp_path, f"ready{i}", fake_provider.base_url)))
    ready_again = _median(lambda _: _ready_ms(existing))

    print(
        f"\nBENCH cold chat (fresh data dir): median {cold:.0f} ms over {RUNS} — goal <= 180-200 ms"
        f"\nBENCH cold chat (existing data dir, backend stopped): median {cold_again:.0f} ms"
        f"\nBENCH warm chat (backend up): median {warm:.0f} ms — goal < 100 ms"
        f"\nBENCH backend spawn to READY: fresh data dir {ready_fresh:.0f} ms, existing "
        f"{ready_again:.0f} ms — goal < 80 ms"
        f"\nBENCH parts: the CLI until it starts the backend (`import desktop.cli`) "
        f"{cli_import:.0f} ms, with its client stack (`import desktop.cli, desktop.commands`) "
        f"{client_import:.0f} ms, `import backend.app` "
        f"{app_import:.0f} ms ({app_compiled:.0f} ms without cached bytecode)"
        f"\nBENCH baseline: `python -c pass` {bare:.0f} ms, `import httpx` {httpx_import:.0f} ms, "
        f"one streamed httpx call from a fresh interpreter {raw_call:.0f} ms "
        f"(medians of {RUNS})"
    )
