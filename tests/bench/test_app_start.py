"""The real app's start-up, timed from outside: `python -m desktop.cli` (what the `turnkey` entry
runs) as a subprocess, on a data folder whose saved layout shows a seeded session of MESSAGES
messages beside the sidebar.

The app writes its milestones with `TURNKEY_STARTUP_TRACE` (desktop/startup_trace.py) on
CLOCK_MONOTONIC; this process stamps the exec with the same clock just before `Popen`.  Cases,
medians of RUNS, under QT_QPA_PLATFORM=offscreen and under Xvfb + openbox (skipped with a
reason when either is missing):

- backend up: exec -> the main window's first frame, and -> the transcript's first frame with
  rows (the figure); and the CPU time the app had used by that frame (`/proc`), a figure the
  machine's load sways less;
- cold: the same with no backend running (the app starts it);
- hand-over: a second launch while the first runs: exec -> the second exited (status 0) and the
  first raised its window (`raised` in the first's trace), whichever is later;
- baseline: a bare `python -c` showing a QWidget, exec -> its first frame painted.

Bytecode is cached (see `app_env`) and warmed by one unmeasured launch of each tree.

`TURNKEY_BENCH_BEFORE=/path/to/another/worktree` also runs that tree's app (it needs the trace
hook), alternating run by run with this one, so before and after share the machine's load.
`TURNKEY_BENCH_RUNS=N` takes N runs of each case instead of 5.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.launcher import running, stop_backend
from tests import app_launch
from tests.bench.process_runs import load
from tests.integration.backend_proc import REPO, Backend

RUNS = int(os.environ.get("TURNKEY_BENCH_RUNS", "5"))
MESSAGES = 300
TIMEOUT_S = 60.0
TEST_TIMEOUT_S = 900  # ~50 launches; on a loaded machine, with a second tree, minutes
NO_OFFLINE_MODEL = REPO / "tests" / "fakes" / "no_offline_model"

BARE = """
import json, os, sys, time
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QLabel

def mark(name):
    with open(os.environ["TURNKEY_STARTUP_TRACE"], "a") as f:
        f.write(json.dumps({"mark": name, "t": time.monotonic(), "pid": os.getpid()}) + "\\n")

class Watch(QObject):
    def eventFilter(self, obj, event):
        if event.type() == QEvent.Type.Paint:
            obj.removeEventFilter(self)
            QTimer.singleShot(0, lambda: (mark("transcript_painted"), app.quit()))
        return False

app = QApplication(sys.argv[:1])
mark("qapplication")
w = QLabel("hello")
w.resize(1000, 700)
watch = Watch()
w.installEventFilter(watch)
w.show()
app.exec()
"""


class Display:
    """Where the app's windows go: Qt's offscreen platform, or an X display."""

    def __init__(self, name: str, env: dict[str, str]) -> None:
        self.name = name
        self.env = env


@pytest.fixture
def xvfb(tmp_path: Path) -> Iterator[Display]:
    """Xvfb on a free display in 80-89 with openbox on it; both stopped afterwards."""
    if shutil.which("Xvfb") is None or shutil.which("openbox") is None:
        pytest.skip("Xvfb or openbox is not installed")
    number = next((n for n in range(80, 90) if not Path(f"/tmp/.X{n}-lock").exists()
                   and not Path(f"/tmp/.X11-unix/X{n}").exists()), None)
    if number is None:
        pytest.skip("no free X display in :80-:89")
    display = f":{number}"
    server = subprocess.Popen(["Xvfb", display, "-screen", "0", "1400x900x24", "-nolisten", "tcp"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not Path(f"/tmp/.X11-unix/X{number}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    wm = subprocess.Popen(["openbox"], env=dict(os.environ, DISPLAY=display),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # openbox takes the screen before the first window maps
    env = {"DISPLAY": display}
    try:
        yield Display(f"Xvfb {display} + openbox", env)
    finally:
        for proc in (wm, server):
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def app_env(repo: Path, data_dir: Path, trace: Path, display: Display) -> dict[str, str]:
    """The app's environment (tests/app_launch.py) without the offline model, as in the bundle;
    its bytecode cached under tmp_path as an installed app has it (with PYTHONDONTWRITEBYTECODE,
    set on this machine, each start compiles every module)."""
    env = app_launch.app_env(repo, display.env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(PYTHONPATH=f"{NO_OFFLINE_MODEL}{os.pathsep}{repo}",
               PYTHONPYCACHEPREFIX=str(trace.parent / "pycache"), TURNKEY_HOME=str(data_dir),
               TURNKEY_STARTUP_TRACE=str(trace))
    return env


def marks(trace: Path, pid: int, name: str) -> list[float]:
    if not trace.exists():
        return []
    found = []
    for line in trace.read_text().splitlines():
        entry = json.loads(line)
        if entry["pid"] == pid and entry["mark"] == name:
            found.append(float(entry["t"]))
    return found


def wait_mark(trace: Path, proc: subprocess.Popen[bytes], name: str, count: int = 1) -> float:
    """The `count`-th time `proc` wrote milestone `name`."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        found = marks(trace, proc.pid, name)
        if len(found) >= count:
            return found[count - 1]
        assert proc.poll() is None, f"the app exited ({proc.returncode}) before {name!r}"
        time.sleep(0.01)
    raise AssertionError(f"no {name!r} from the app within {TIMEOUT_S} s")


def launch(repo: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], float]:
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "desktop.cli"], cwd=repo, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    return proc, t0


def stop_app(proc: subprocess.Popen[bytes]) -> None:
    """Quit as Ctrl+C does (Controller.quit: the layout saved, the backend left running)."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def one_start(repo: Path, env: dict[str, str], trace: Path) -> dict[str, float]:
    """One launch until the saved session's transcript is painted; the app is then quit."""
    proc, t0 = launch(repo, env)
    try:
        painted = wait_mark(trace, proc, "transcript_painted")
        cpu = cpu_s(proc.pid)
        stamps = {name: (marks(trace, proc.pid, name) or [t0])[0] - t0
                  for name in ("entry", "qapplication", "window_painted")}
        return {**stamps, "transcript": painted - t0, "cpu": cpu}
    finally:
        stop_app(proc)


def cpu_s(pid: int) -> float:
    """The CPU time (user + system) process `pid` has used so far (Linux's /proc, 10 ms
    ticks): read within one poll (10 ms) of the milestone, it is less swayed by the machine's
    load than the wall clock."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_hand_over(repo: Path, env: dict[str, str], trace: Path,
                  first: subprocess.Popen[bytes], raised_before: int) -> dict[str, float]:
    proc, t0 = launch(repo, env)
    _out, err = proc.communicate(timeout=TIMEOUT_S)
    exited = time.monotonic()
    assert proc.returncode == 0, err.decode()[-2000:]
    raised = wait_mark(trace, first, "raised", raised_before + 1)
    return {"exited": exited - t0, "raised": raised - t0,
            "handed": max(exited, raised) - t0}


def bare(env: dict[str, str], trace: Path) -> float:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", BARE], env=env, capture_output=True,
                          timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    painted = [e["t"] for e in lines if e["mark"] == "transcript_painted"]
    trace.unlink()
    return float(painted[-1]) - t0


def stop_started_backend(data_dir: Path) -> None:
    info = running(data_dir)
    if info is not None:
        assert stop_backend(info)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def med(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def spread(runs: list[dict[str, float]], key: str) -> str:
    values = [r[key] for r in runs]
    return f"{ms(statistics.median(values))} ({ms(min(values))}–{ms(max(values))})"


def measure(display: Display, data_dir: Path, backend: Backend, tmp: Path) -> None:
    trees = [("", REPO)]
    before = os.environ.get("TURNKEY_BENCH_BEFORE")
    if before:
        trees = [("before ", Path(before).resolve()), ("after ", REPO)]
    trace = tmp / "trace.jsonl"

    def env(repo: Path) -> dict[str, str]:
        return app_env(repo, data_dir, trace, display)

    bare_env = app_env(REPO, data_dir, trace, display)
    bare_runs = [bare(bare_env, trace) for _ in range(RUNS)]
    print(f"BENCH app start [{display.name}] baseline: bare python + QApplication + a QWidget "
          f"painted: median {ms(statistics.median(bare_runs))} ({ms(min(bare_runs))}–"
          f"{ms(max(bare_runs))}), {load()}")

    # Backend up.  A first launch of each tree warms the page cache (not counted).
    for _label, repo in trees:
        one_start(repo, env(repo), trace)
    warm: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
    for _ in range(RUNS):
        for label, repo in trees:
            warm[label].append(one_start(repo, env(repo), trace))
    for label, runs in warm.items():
        print(f"BENCH app start [{display.name}] {label}backend up: exec -> transcript painted "
              f"{spread(runs, 'transcript')}; parts (medians): main() {ms(med(runs, 'entry'))}, "
              f"QApplication {ms(med(runs, 'qapplication'))}, window painted "
              f"{ms(med(runs, 'window_painted'))}; CPU used by then {spread(runs, 'cpu')}; "
              f"{load()}")

    # Hand-over: a first app runs; second launches, one at a time.
    handed: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
    for label, repo in trees:
        first, _t0 = launch(repo, env(repo))
        try:
            wait_mark(trace, first, "transcript_painted")
            for i in range(RUNS):
                handed[label].append(one_hand_over(repo, env(repo), trace, first, i))
        finally:
            stop_app(first)
    for label, runs in handed.items():
        print(f"BENCH app start [{display.name}] {label}hand-over: exec -> second exited and "
              f"first raised {spread(runs, 'handed')}; parts (medians): second exited "
              f"{ms(med(runs, 'exited'))}, first raised {ms(med(runs, 'raised'))}; {load()}")

    # Cold: no backend; the app starts one, stopped after each run.
    assert backend.terminate() == 0
    cold: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
    try:
        for _ in range(RUNS):
            for label, repo in trees:
                try:
                    cold[label].append(one_start(repo, env(repo), trace))
                finally:
                    stop_started_backend(data_dir)
    finally:
        backend.start()
    for label, runs in cold.items():
        print(f"BENCH app start [{display.name}] {label}cold (no backend): exec -> transcript "
              f"painted {spread(runs, 'transcript')}; window painted "
              f"{ms(med(runs, 'window_painted'))}; {load()}")


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[tuple[Path, Backend]]:
    """A data folder with a provider configured, a session of MESSAGES messages, and a saved
    layout showing it; its backend running."""
    data_dir = tmp_path / "home"
    backend = app_launch.seeded_folder(data_dir, MESSAGES)
    try:
        yield data_dir, backend
    finally:
        backend.close()
        stop_started_backend(data_dir)


@pytest.mark.bench
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_app_start_offscreen(seeded: tuple[Path, Backend], tmp_path: Path) -> None:
    data_dir, backend = seeded
    measure(Display("offscreen", {"QT_QPA_PLATFORM": "offscreen"}), data_dir, backend, tmp_path)


@pytest.mark.bench
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_app_start_xvfb(seeded: tuple[Path, Backend], xvfb: Display, tmp_path: Path) -> None:
    data_dir, backend = seeded
    measure(xvfb, data_dir, backend, tmp_path)
