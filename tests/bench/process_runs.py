"""Turnkey's commands timed as whole processes, exec to exit: with cached bytecode, on data
folders of their own, each figure a median of runs after an unmeasured one
(test_cold_chat.py, test_codex_compare.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from shared.client import BackendInfo
from shared.launcher import alive
from tests.integration.backend_proc import REPO, config_toml

STOP_TIMEOUT_S = 20.0


def cached_env(data_dir: Path, bytecode: bool = True) -> dict[str, str]:
    """The environment of a command on `data_dir`, its bytecode cached beside the folder as an
    installed app has it (with PYTHONDONTWRITEBYTECODE, set on this machine, each start would
    compile all of Turnkey's modules again); `bytecode=False` compiles them every time."""
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


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    """`cmd` run to its exit (which must be 0): milliseconds from exec, and what it printed."""
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
                         check=False)
    elapsed = (time.perf_counter() - start) * 1000
    assert out.returncode == 0, out.stderr
    return elapsed, out.stdout


def fresh_folder(tmp_path: Path, name: str, base_url: str) -> Path:
    """A new data folder whose provider is `base_url`; no backend has run on it yet."""
    data = tmp_path / name
    data.mkdir()
    (data / "config.toml").write_text(config_toml(base_url))
    return data


def chat_ms(data: Path) -> float:
    """`python -m desktop.cli chat hi` on `data`, answered "ok": milliseconds from exec.  With
    no backend running the command starts one, which stays up."""
    elapsed, stdout = timed([sys.executable, "-m", "desktop.cli", "chat", "hi"], cached_env(data))
    assert stdout.strip() == "ok", stdout
    return elapsed


def cold_chat_ms(data: Path) -> float:
    """`chat_ms` with no backend running on `data`; the one it starts is stopped after."""
    try:
        return chat_ms(data)
    finally:
        stop(data)


def stop(data: Path) -> None:
    """SIGTERM the folder's backend and wait until it is gone (not timed)."""
    info = BackendInfo.read(data)
    if info is None:
        return
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while alive(info.pid):
        assert time.monotonic() < deadline, f"backend {info.pid} ignored SIGTERM"
        time.sleep(0.02)


def alternated(runs: int, *measures: Callable[[], float]) -> list[list[float]]:
    """Each measure run once unmeasured (a first run fills the bytecode and page caches), then
    `runs` rounds of all of them in turn, so they share the machine's load; a list per measure."""
    for measure in measures:
        measure()
    rounds: list[list[float]] = [[] for _ in measures]
    for _ in range(runs):
        for values, measure in zip(rounds, measures, strict=True):
            values.append(measure())
    return rounds


def load() -> str:
    """The machine's load averages, printed beside figures a busy machine sways."""
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())
