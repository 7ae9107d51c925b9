"""One app per data folder and user: a second launch raises the first and exits, another folder
gets its own app, a crashed app's socket is taken over, and of two launches at once one serves."""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QDir
from PySide6.QtNetwork import QLocalSocket

from desktop.qt import instance
from shared.methods import SessionCreate
from tests.app_launch import app_env
from tests.integration.backend_proc import Backend

from .conftest import drive

ROOT = Path(__file__).resolve().parents[2]
SECOND_LAUNCH_S = 5.0  # measured ~0.35 s, nearly all of it Python's imports


def launch(data_dir: Path, *args: str) -> subprocess.Popen[str]:
    """`turnkey --data-dir DIR app ARGS` as a user would start it."""
    return subprocess.Popen([sys.executable, "-m", "desktop.cli", "--data-dir", str(data_dir), "app", *args],
                            cwd=ROOT, env=app_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def peer(data_dir: Path, serve: int, wait: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.desktop.instance_peer", str(data_dir), str(serve),
         *(["--wait"] if wait else [])],
        cwd=ROOT, env=app_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


def read_json(proc: subprocess.Popen[str], timeout_s: float = 15.0) -> dict[str, Any]:
    """The process's next stdout line as JSON, waiting at most `timeout_s`."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            raise AssertionError(f"no line from pid {proc.pid} within {timeout_s} s")
    line = proc.stdout.readline()
    assert line, f"pid {proc.pid} ended: rc {proc.wait()}, stderr {proc.stderr.read() if proc.stderr else ''}"
    result: dict[str, Any] = json.loads(line)
    return result


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts; any still running afterwards is killed (and fails the test)."""
    started: list[subprocess.Popen[str]] = []
    yield started
    leftover = [p for p in started if p.poll() is None]
    for p in leftover:
        p.kill()
        p.wait()
    assert not leftover, f"still running: {[p.args for p in leftover]}"


# --- the parts ---------------------------------------------------------------------


def test_the_name_depends_on_user_and_folder_and_stays_short(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert instance.server_name(a) == instance.server_name(a)
    assert instance.server_name(a) != instance.server_name(b)
    assert instance.server_name(a, user="1000") != instance.server_name(a, user="1001")
    assert instance.server_name(a) == instance.server_name(tmp_path / "x" / ".." / "a")
    assert len(instance.server_name(tmp_path / ("long" * 60))) == len("turnkey-") + 16


def test_requests_round_trip_and_anything_else_is_refused() -> None:
    for request in (instance.Request(), instance.Request("open", "s1")):
        assert instance.Request.decode(request.encode()) == request
    for bad in (b'{"action": "open"}', b'{"action": "quit"}', b"[1]", b"nonsense"):
        with pytest.raises(ValueError, match=r"unknown request|not an object|Expecting value"):
            instance.Request.decode(bad)


@pytest.mark.parametrize("tmpdir", ["", "set"])
def test_the_launchs_socket_path_is_where_qt_listens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tmpdir: str
) -> None:
    """With no private runtime folder, a later launch reaches the server with a plain socket
    at the path QLocalServer takes for a bare name."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    if tmpdir:
        monkeypatch.setenv("TMPDIR", f"{tmp_path}//sub/../")
    name = instance.server_name(tmp_path)
    assert instance.socket_path(name) == Path(QDir.tempPath()) / name
    if tmpdir:
        assert instance.socket_path(name).parent == tmp_path


def private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
def runtime() -> Iterator[Path]:
    """A private runtime folder as short as /run/user/UID: pytest's own folders can be too
    deep for a socket address under it (103 bytes with xdist's popen-gwN)."""
    folder = Path(tempfile.mkdtemp(prefix="tk-run-", dir="/tmp"))  # (0700)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_socket_goes_in_the_users_private_runtime_folder_when_there_is_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runtime: Path
) -> None:
    """`$XDG_RUNTIME_DIR` (no one else can put a file there) when it is this user's and
    private; the temp dir when it is not, or when the path would not fit a socket address."""
    name = instance.server_name(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert instance.socket_path(name) == runtime / name
    runtime.chmod(0o755)  # others may enter: not the spec's folder
    assert instance.socket_path(name) == tmp_path / name
    monkeypatch.setenv("XDG_RUNTIME_DIR", "run")  # relative: ignored, as the spec says
    assert instance.socket_path(name) == tmp_path / name
    deep = private_dir(tmp_path / ("d" * 100))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    assert instance.socket_path(name) == tmp_path / name


def test_a_later_launch_finds_the_app_where_it_listens_whatever_its_own_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, procs: list[subprocess.Popen[str]],
    runtime: Path
) -> None:
    """The app started with a runtime folder; a later launch started without one (a terminal
    under `su`, a cron job) reads where it listens from the lock file and hands over."""
    data = tmp_path / "data"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    app = peer(data, serve=1)
    procs.append(app)
    assert read_json(app)["role"] == "serving"
    assert (runtime / instance.server_name(data)).is_socket()
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert instance.socket_path(instance.server_name(data)).parent != runtime
    assert instance.endpoint_of(data) == str(runtime / instance.server_name(data))
    later = peer(data, serve=1)
    procs.append(later)
    assert read_json(later) == {"role": "handed", "reply": {"ok": True}}
    assert read_json(app) == {"request": "raise"}
    assert app.wait(timeout=10) == 0


STRANGER = 54321  # a user id no one on the test machine has


def strangers_server(path: Path, *, owner_switch_after_bind: bool) -> subprocess.Popen[str]:
    """A process listening on `path` as STRANGER, answering {"ok": true} to whatever comes
    (another local user squatting the name).  With `owner_switch_after_bind` the socket file
    is root's (bound first) while the listener is STRANGER: only the peer's credentials tell."""
    script = (
        "import os, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        f"switch = {owner_switch_after_bind!r}\n"
        f"if not switch: os.setgid({STRANGER}); os.setuid({STRANGER})\n"
        f"s.bind({str(path)!r})\n"
        f"if switch: os.setgid({STRANGER}); os.setuid({STRANGER})\n"
        "s.listen(4); print('listening', flush=True)\n"
        "while True:\n"
        "    c, _ = s.accept(); c.recv(4096); c.sendall(b'{\"ok\": true}\\n'); c.close()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "listening"
    return proc


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                    reason="needs root, to listen as another user")
@pytest.mark.parametrize("switch", [False, True], ids=["their-file", "our-file-their-listener"])
def test_a_socket_another_user_put_under_the_name_is_never_handed_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, switch: bool
) -> None:
    """In a shared temp dir another local user can take the name first: a later launch sends
    nothing there (it says why at once, not after the timeout), and the app, finding the name
    taken, says it cannot listen instead of replacing or trusting the file."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    # Beside /tmp's own files: pytest's folders (and tempfile's default, which an earlier test
    # may have pointed into one) are root's only, where the other user cannot reach.
    shared = Path(tempfile.mkdtemp(prefix="turnkey-test-tmp-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    shared.chmod(0o1777)  # like /tmp
    monkeypatch.setenv("TMPDIR", str(shared))
    data = tmp_path / "data"
    name = instance.server_name(data)
    squatter = strangers_server(shared / name, owner_switch_after_bind=switch)
    try:
        started = time.monotonic()
        assert instance.hand_over(name, instance.Request("open", "ses_secret"), timeout_s=5) is None
        assert time.monotonic() - started < 2
        lock = instance.claim(data)
        assert lock is not None
        try:
            server = instance.InstanceServer(lock)
            if not switch:
                with pytest.raises(OSError, match="belongs to another user"):
                    server.listen()
                assert (shared / name).stat().st_uid == STRANGER  # left alone
        finally:
            lock.release()
    finally:
        squatter.kill()
        squatter.wait()


def test_a_held_folder_is_not_claimed_again_and_a_silent_holder_times_out(tmp_path: Path) -> None:
    lock = instance.claim(tmp_path)
    assert lock is not None
    try:
        assert instance.claim(tmp_path) is None  # flock: another descriptor, even in this process
        started = time.monotonic()
        assert instance.hand_over(lock.name, instance.Request(), timeout_s=0.5) is None
        assert time.monotonic() - started < 2
    finally:
        lock.release()
    again = instance.claim(tmp_path)
    assert again is not None
    again.release()


# --- a second launch ---------------------------------------------------------------


@pytest.fixture
def served(controller: Any, desk_backend: Backend) -> Iterator[Any]:
    """The running app: `controller` serving later launches exactly as desktop.app.run wires it."""
    from desktop.app import serve

    lock = instance.claim(desk_backend.data_dir)
    assert lock is not None
    server = instance.InstanceServer(lock)
    server.listen()
    server.requested.connect(lambda request: serve(controller, request))
    yield controller
    server.close()


def test_a_second_launch_raises_the_running_app_and_exits_at_once(
    qtbot: Any, served: Any, desk_backend: Backend, procs: list[subprocess.Popen[str]]
) -> None:
    served.main.hide()
    started = time.monotonic()
    second = launch(desk_backend.data_dir)
    procs.append(second)
    qtbot.waitUntil(lambda: second.poll() is not None, timeout=int(SECOND_LAUNCH_S * 1000))
    took = time.monotonic() - started
    assert second.returncode == 0, second.stderr.read() if second.stderr else ""
    assert served.main.isVisible()
    assert took < SECOND_LAUNCH_S
    print(f"second launch: {took:.2f} s")

    sid = drive(qtbot, served.link.call(SessionCreate())).session.session_id
    third = launch(desk_backend.data_dir, "--session", sid)
    procs.append(third)
    qtbot.waitUntil(lambda: third.poll() is not None, timeout=int(SECOND_LAUNCH_S * 1000))
    assert third.returncode == 0
    qtbot.waitUntil(lambda: served.main.session_id == sid, timeout=5_000)
    assert not served.windows, "it opens beside the sidebar"


def test_a_second_launch_hands_over_without_loading_qt(
    qtbot: Any, served: Any, desk_backend: Backend, procs: list[subprocess.Popen[str]]
) -> None:
    """The later launch decides and sends before importing Qt, qasync or the windows (that
    keeps it within a tenth of a second); the running app is raised all the same."""
    served.main.hide()
    probe = ("import json, sys\nfrom desktop.cli import main\n"
             f"rc = main(['--data-dir', {str(desk_backend.data_dir)!r}, 'app'])\n"
             "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
             "('PySide6', 'shiboken6', 'qasync') or m.startswith('desktop.qt'))\n"
             "print(json.dumps({'rc': rc, 'loaded': loaded}))\n")
    second = subprocess.Popen([sys.executable, "-c", probe], cwd=ROOT, env=app_env(), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    procs.append(second)  # (this test's app answers from Qt's loop, which waitUntil runs)
    qtbot.waitUntil(lambda: second.poll() is not None, timeout=int(SECOND_LAUNCH_S * 1000))
    out, err = second.communicate()
    assert second.returncode == 0, err
    assert json.loads(out.splitlines()[-1]) == {"rc": 0, "loaded": []}
    qtbot.waitUntil(served.main.isVisible, timeout=5_000)


def test_another_folder_gets_its_own_app(tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    mine = instance.claim(tmp_path / "one")
    assert mine is not None
    try:
        other = peer(tmp_path / "two", serve=1)
        procs.append(other)
        assert read_json(other)["role"] == "serving"
        reply = instance.hand_over(instance.server_name(tmp_path / "two"), instance.Request())
        assert reply == {"ok": True}
        assert read_json(other) == {"request": "raise"}
        assert other.wait(timeout=10) == 0
    finally:
        mine.release()


def test_a_crashed_apps_socket_is_taken_over(tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    crashed = peer(tmp_path, serve=100)
    procs.append(crashed)
    assert read_json(crashed)["role"] == "serving"
    crashed.send_signal(signal.SIGKILL)
    crashed.wait(timeout=10)
    name = instance.server_name(tmp_path)
    socket_file = instance.socket_path(name)
    assert socket_file.exists()  # left behind
    probe = QLocalSocket()
    probe.connectToServer(str(socket_file))
    assert not probe.waitForConnected(1000)

    after = peer(tmp_path, serve=1)
    procs.append(after)
    assert read_json(after)["role"] == "serving"
    second = peer(tmp_path, serve=1)
    procs.append(second)
    assert read_json(second) == {"role": "handed", "reply": {"ok": True}}
    assert read_json(after) == {"request": "raise"}
    assert second.wait(timeout=10) == 0
    assert after.wait(timeout=10) == 0


@pytest.mark.parametrize("round_", range(3))
def test_of_two_launches_at_once_exactly_one_serves(
    tmp_path: Path, procs: list[subprocess.Popen[str]], round_: int
) -> None:
    pair = [peer(tmp_path, serve=1, wait=True) for _ in range(2)]
    procs.extend(pair)
    assert [read_json(p) for p in pair] == [{"role": "ready"}] * 2  # imports done; both wait
    for p in pair:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    first = [read_json(p) for p in pair]
    roles = sorted(r["role"] for r in first)
    assert roles == ["handed", "serving"], first
    winner = pair[[r["role"] for r in first].index("serving")]
    assert read_json(winner) == {"request": "raise"}
    loser = first[[r["role"] for r in first].index("handed")]
    assert loser["reply"] == {"ok": True}
    assert [p.wait(timeout=10) for p in pair] == [0, 0]
