"""Backend start-up time to READY and idle memory, against a bare interpreter's start-up."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

RUNS = 5


def _ready_ms(data_dir: Path) -> tuple[float, int]:
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "backend", "serve", "--data-dir", str(data_dir), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    elapsed = (time.monotonic() - start) * 1000
    assert line.startswith(b"TURNKEY_BACKEND_READY"), line
    time.sleep(0.5)
    rss_kb = int(Path(f"/proc/{proc.pid}/status").read_text().split("VmRSS:")[1].split()[0])
    proc.terminate()
    assert proc.wait(timeout=20) == 0, "SIGTERM stops the backend cleanly"
    return elapsed, rss_kb


@pytest.mark.bench
def test_backend_ready_time_and_idle_memory(tmp_path: Path) -> None:
    bare = []
    for _ in range(RUNS):
        start = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append((time.monotonic() - start) * 1000)
    ready, rss = zip(*(_ready_ms(tmp_path / "data") for _ in range(RUNS)), strict=True)
    print(
        f"\nBENCH backend ready: median {statistics.median(ready):.0f} ms over {RUNS} starts "
        f"(same data dir, migrations done once; bare `python -c pass`: "
        f"{statistics.median(bare):.0f} ms) — budget < 500 ms"
    )
    print(f"BENCH backend idle RSS: {max(rss) / 1024:.1f} MB (max of {RUNS}) — budget < 80 MB")
