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

import itertools
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.bench.process_runs import (
    STOP_TIMEOUT_S,
    alternated,
    cached_env,
    chat_ms,
    cold_chat_ms,
    fresh_folder,
    stop,
    timed,
)
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.backend_proc import REPO

RUNS = 7

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


def _ready_ms(data: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "backend", "serve", "--data-dir", str(data), "--port", "0"],
        cwd=REPO, env=cached_env(data), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    elapsed = (time.perf_counter() - start) * 1000
    assert line.startswith(b"TURNKEY_BACKEND_READY"), line
    proc.terminate()
    assert proc.wait(timeout=STOP_TIMEOUT_S) == 0
    return elapsed


def _median(measure: Callable[[], float]) -> float:
    """The median of RUNS runs after one unmeasured run."""
    (values,) = alternated(RUNS, measure)
    return statistics.median(values)


@pytest.mark.bench
def test_cold_and_warm_chat(tmp_path: Path, fake_provider: FakeOpenAI) -> None:
    fake_provider.default = Reply(deltas=["ok"])
    py = sys.executable
    env = cached_env(tmp_path / "baseline")
    bare = _median(lambda: timed([py, "-c", "pass"], env)[0])
    httpx_import = _median(lambda: timed([py, "-c", "import httpx"], env)[0])
    raw_call = _median(lambda: timed([py, "-c", RAW_CALL, fake_provider.base_url], env)[0])
    cli_import = _median(lambda: timed([py, "-c", "import desktop.cli"], env)[0])
    client_import = _median(lambda: timed([py, "-c", "import desktop.cli, desktop.commands"],
                                          env)[0])
    app_import = _median(lambda: timed([py, "-c", "import backend.app"], env)[0])
    app_compiled = _median(lambda: timed([py, "-c", "import backend.app"],
                                         cached_env(tmp_path / "baseline", bytecode=False))[0])
    folders = itertools.count()  # a fresh data folder for each run

    def fresh() -> Path:
        return fresh_folder(tmp_path, f"fresh{next(folders)}", fake_provider.base_url)

    existing = fresh_folder(tmp_path, "existing", fake_provider.base_url)
    cold = _median(lambda: cold_chat_ms(fresh()))
    cold_again = _median(lambda: cold_chat_ms(existing))
    chat_ms(existing)  # leaves its backend up
    try:
        warm = _median(lambda: chat_ms(existing))
    finally:
        stop(existing)
    ready_fresh = _median(lambda: _ready_ms(fresh()))
    ready_again = _median(lambda: _ready_ms(existing))

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
