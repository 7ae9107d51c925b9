"""The installable app: build it with packaging/build, then run what was built.

The bundle (dist/turnkey/) must need no Python: the backend is the same executable
started as `turnkey backend serve`, and the desktop app starts it that way.  The build
takes ~20 s, so it runs once per test session; CI runs these tests like every other.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TypeVar

import platformdirs
import pytest

from backend.providers.local import NOT_INSTALLED_WORDS
from shared import protocol as p
from shared.client import Client, Incoming
from shared.methods import DoorList, PromptSubmit, ProviderTest, SecretSet, SessionCreate, SessionMessages
from tests.conftest import BUNDLE_TEST_TIMEOUT
from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import REPO, Backend
from .wire import terminal

W = TypeVar("W", bound=p.Wire)

pytestmark = [pytest.mark.slow,
              pytest.mark.sqlite_only("the installed app and its bundled backend on the default store"),
              # One build per run (conftest's `bundle`, into dist/) for these, test_deb.py and
              # the bundle bench, which run alone: the serial pass is where they meet.
              pytest.mark.serial("shares the run's one bundle build with test_deb.py and the bench"),
              BUNDLE_TEST_TIMEOUT]

DIST = REPO / "dist" / "turnkey"


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a user's desktop: no virtualenv, no PYTHONPATH, no TURNKEY_HOME."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "TURNKEY_HOME")}
    env["PATH"] = "/usr/bin:/bin"  # the bundled executable must not need a python on PATH
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env.update(extra)
    return env


class BundledBackend(Backend):
    """The integration tests' backend process, run from the bundle instead of the source."""

    def __init__(self, executable: Path, data_dir: Path, base_url: str, extra_config: str = "") -> None:
        super().__init__(data_dir, base_url, extra_config)
        self.executable = executable

    def command(self) -> list[str]:
        return [str(self.executable), "backend", "serve", "--data-dir", str(self.data_dir),
                "--port", "0"]

    def env(self) -> dict[str, str]:
        return clean_env()


async def test_the_bundled_backend_serves_a_turn_with_a_tool_call_to_the_shared_client(
    bundle: Path, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    # An MCP server too: the SDK (and what it imports) must be in the bundle.  The server itself
    # is the test one, run by the tests' Python: a user's server brings its own runtime.
    server = json.dumps([sys.executable, str(REPO / "tests" / "fakes" / "mcp_server.py")])
    mcp = f'[mcp.servers.fake]\ncommand = {server}\napproval = "trusted"\n'
    # And a Matrix door, whose client library (matrix-nio, loaded only for a door) must be in
    # the bundle: with its token stored and no homeserver there, it says it cannot reach it,
    # where a missing library would say so instead.
    closed = _closed_port()
    door = (f'[doors.matrix]\nhomeserver = "http://127.0.0.1:{closed}"\n'
            'user_id = "@agent:tk.test"\nallowed_users = ["@me:tk.test"]\n')
    backend = BundledBackend(bundle, tmp_path / "data", fake_provider.base_url, mcp + door)
    fake_provider.script(
        Reply.calls(terminal("echo from-the-bundle"),
                    {"name": "mcp__fake__echo", "arguments": {"text": "mcp-in-the-bundle"}},
                    text="Checking."),
        Reply(deltas=["The bundle ", "answered."]),
    )
    started = time.monotonic()
    backend.start()
    print(f"\nbundled backend: READY after {time.monotonic() - started:.2f} s")
    client = Client(backend.data_dir, name="bundle-test")
    seen: list[Incoming] = []
    client.handlers.append(seen.append)
    try:
        await client.connect()
        assert client.server is not None
        assert client.server.epoch == 1
        sid = (await client.call(SessionCreate(cwd=str(tmp_path)))).session.session_id
        client.follow(sid)
        receipt = (await client.call(
            PromptSubmit(session_id=sid, request_id="bundle-1", text="hello"))).receipt
        done = await _wait_event(seen, p.MessageComplete, receipt.admission_id)
        assert done.status == "completed", done
        assert done.text == "The bundle answered."
        tool = await _wait_event(seen, p.ToolComplete, receipt.admission_id)
        assert tool.status == "ok"
        assert "from-the-bundle" in (tool.output or "")
        rows = (await client.call(SessionMessages(session_id=sid))).messages
        assert [r.role for r in rows] == ["user", "assistant", "tool", "tool", "assistant"]
        assert (rows[3].status, rows[3].content) == ("ok", "mcp-in-the-bundle")
        # Keys: keyring (or the 0600 file where no keyring works) from the bundle too.
        stored = await client.call(SecretSet(name="bundled", value="sk-bundle-secret"))
        assert stored.stored in ("keyring", "file")
        await client.call(SecretSet(name="doors.matrix", value="syt-bundle-door-token"))
        status = await _door_failing(client)
        assert status.detail == f"cannot reach http://127.0.0.1:{closed}: connection refused; retrying"
        # The tool's result went back to the model in the second request.
        assert "from-the-bundle" in json.dumps(fake_provider.snapshot()[-1].body["messages"][-2])
    finally:
        await client.close()
    assert backend.terminate() == 0, backend.stderr_tail()
    assert not (backend.data_dir / "backend.json").exists(), "a clean stop removes backend.json"
    assert backend.logged_errors() == []
    log = (backend.data_dir / "logs" / "backend.log").read_text()
    assert "keyring store failed" not in log, "keyring imports and runs inside the bundle"
    assert "sk-bundle-secret" not in log
    assert "syt-bundle-door-token" not in log
    assert (backend.data_dir / "logs" / "backend.log").stat().st_size > 0


def test_the_bundle_opens_the_app_offscreen_starts_its_own_backend_and_closes(
    bundle: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    started = time.monotonic()
    ran = subprocess.run([str(bundle), "--data-dir", str(data), "--smoke"],
                         env=clean_env(QT_QPA_PLATFORM="offscreen"), capture_output=True,
                         text=True, timeout=120)
    elapsed = time.monotonic() - started
    assert ran.returncode == 0, f"{ran.stdout}\n{ran.stderr}"
    report = json.loads(ran.stdout.strip().splitlines()[-1])
    print(f"\nbundled app --smoke: {elapsed:.2f} s from exec to exit; {report}")
    assert report["window"] is True
    assert report["connected"] is True
    assert report["closed"] is True
    assert report["frozen"] is True
    assert 0 < report["connected_s"] <= report["connected_after_exec_s"] < elapsed
    assert report["started_backend"] is True, "no backend ran before, so the app started one"
    # The backend the app started is the bundle itself, re-invoked (no Python needed).
    assert Path(report["backend_executable"]) == bundle.resolve()
    assert report["backend_stopped"] is True
    assert not (data / "backend.json").exists()
    assert (data / "logs" / "desktop.log").exists()
    assert (data / "logs" / "backend.log").exists()
    assert not (data / "desktop.json").exists(), "a smoke run leaves the saved layout alone"


def test_bundle_and_source_use_the_same_platform_folders_and_turnkey_home_overrides(
    bundle: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(HOME=str(home))
    for key in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        env.pop(key, None)
    source = [sys.executable, "-m", "desktop.cli", "backend", "status"]
    frozen = [str(bundle), "backend", "status"]

    def data_dir(command: list[str], **extra: str) -> str:
        ran = subprocess.run(command, cwd=REPO, env={**env, **extra}, capture_output=True,
                             text=True, timeout=60)
        assert ran.returncode == 3, ran  # "not running"
        return ran.stdout.strip().rsplit("(data ", 1)[1].rstrip(")")

    expected = str(home / ".local" / "share" / "turnkey")
    assert data_dir(source) == data_dir(frozen) == expected
    custom = str(tmp_path / "elsewhere")
    assert data_dir(source, TURNKEY_HOME=custom) == data_dir(frozen, TURNKEY_HOME=custom) == custom
    assert platformdirs.user_data_dir("turnkey", appauthor=False).endswith("turnkey")


def test_the_bundle_leaves_out_what_the_app_does_not_use(bundle: Path) -> None:
    internal = DIST / "_internal"
    files = [p.relative_to(internal).as_posix() for p in internal.rglob("*")]
    for unwanted in ("pytest", "_pytest", "hypothesis", "mypy", "llama_cpp", "tests/", "yaml/",
                     "PySide6/QtQml", "PySide6/QtQuick", "PySide6/QtTest",
                     "/translations/", "libqgtk3", "libgtk-3", "platforms/libqvnc",
                     # what a session never loads (packaging/measure-session)
                     "xcbglintegrations/", "wayland-graphics-integration-client/", "libQt6OpenGL",
                     "PIL/_avif", "libavif", "PIL/_imagingft", "libharfbuzz", "PIL/_imagingcms",
                     "Crypto/PublicKey/", "Crypto/Math/", "models/"):
        found = [f for f in files if unwanted in f or f.startswith(unwanted)]
        assert not found, f"{unwanted} is in the bundle: {found[:5]}"
    for wanted in ("PySide6/Qt/plugins/platforms/libqxcb.so",
                   "PySide6/Qt/plugins/platforms/libqwayland.so",
                   "PySide6/Qt/plugins/platforms/libqoffscreen.so",
                   "assets/icons/hicolor/256x256/apps/turnkey.png",
                   "assets/icons/tray/approval-22.png",
                   "shared/protocol.schema.json",
                   "PySide6/QtNetwork.abi3.so",  # QLocalServer: one running app per user
                   # image attachments are PNG, JPEG, GIF or WebP; a Matrix attachment is AES-CTR
                   "PIL/_webp.cpython-311-x86_64-linux-gnu.so", "pillow.libs",
                   "Crypto/Cipher/_raw_ctr.abi3.so"):
        assert wanted in files, f"{wanted} is missing from the bundle"


# The installed app's size on disk, without the offline model: 226 MiB before issue 38 item 5
# (packaging/measure-session lists what a session never loads), about 149 MiB after.  Files are
# counted by their size, so the number does not depend on the file system.
SIZE_BUDGET_MIB = 155


def test_the_bundle_stays_within_its_size_budget_and_carries_no_debugging_symbols(
    bundle: Path,
) -> None:
    files = [p for p in bundle.parent.rglob("*") if p.is_file() and not p.is_symlink()]
    size = sum(p.stat().st_size for p in files) / 2**20
    print(f"\nbundle: {size:.1f} MiB in {len(files)} files (budget {SIZE_BUDGET_MIB} MiB)")
    assert size <= SIZE_BUDGET_MIB
    sections = subprocess.run(["readelf", "-S", str(bundle.parent / "_internal" / "libpython3.11.so.1.0")],
                              capture_output=True, text=True, check=True).stdout
    assert ".debug_info" not in sections, "the build strips its shared libraries"


def test_the_bundles_smaller_icu_data_still_sorts_and_converts(bundle: Path) -> None:
    """packaging/icu_data.py keeps collation and the codecs of Qt's ICU data library: loaded in
    place of the wheel's (same Qt, same ICU), a German collator sorts and legacy codecs load
    (Qt finds them in ICU only: without the data they are not valid)."""
    qt_lib = DIST / "_internal" / "PySide6" / "Qt" / "lib"
    assert (qt_lib / "libicudata.so.73").stat().st_size < 12 * 2**20, "the smaller one was built"
    script = (
        "import functools\n"
        "from PySide6.QtCore import QCollator, QLocale, QStringDecoder\n"
        "from PySide6.QtWidgets import QApplication\n"
        "app = QApplication([])\n"
        "print([l.split()[-1] for l in open('/proc/self/maps') if 'libicudata' in l][0])\n"
        "c = QCollator(QLocale('de_DE'))\n"
        "print(''.join(sorted(['z', 'ä', 'a', 'Z', 'o', 'ö'], key=functools.cmp_to_key(c.compare))))\n"
        "print(QStringDecoder('ISO-8859-15').isValid(), QStringDecoder('Shift_JIS').isValid())\n"
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "QT_QPA_PLATFORM": "offscreen",
                              "LD_LIBRARY_PATH": str(qt_lib)})
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [str((qt_lib / "libicudata.so.73").resolve()), "aäoözZ", "True True"]
    assert "collator" not in ran.stderr, ran.stderr


def test_the_bundle_carries_what_rendering_loads_by_name(bundle: Path) -> None:
    """Highlighting imports a lexer by a code block's language and a style by the theme, at
    run time: PyInstaller cannot see those imports, so each must have been collected."""
    readers = pytest.importorskip("PyInstaller.archive.readers")
    from pygments.lexers._mapping import LEXERS
    from pygments.styles import get_style_by_name

    from desktop.qt.code_html import STYLES

    modules = set(readers.pkg_archive_contents(str(bundle)))
    wanted = {"markdown_it", "markdown_it.presets.commonmark", "mdurl", "desktop.qt.markdown",
              "rich.markdown", "rich.live", "rich.syntax",  # the CLI renders with rich
              "backend.doors.matrix", "nio", "nio.client.async_client", "aiohttp"}  # a door's
    wanted |= {get_style_by_name(name).__module__ for name in STYLES.values()}
    for language in ("python", "bash", "javascript", "typescript", "json", "yaml", "rust", "go",
                     "diff", "sql", "html", "c", "cpp", "java"):
        wanted |= {module for module, _name, aliases, *_ in LEXERS.values() if language in aliases}
    missing = sorted(wanted - modules)
    assert not missing, f"not in the bundle: {missing}"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _door_failing(client: Client, timeout: float = 30.0) -> p.DoorStatus:
    deadline = time.monotonic() + timeout
    while True:
        (door,) = (await client.call(DoorList())).doors
        if (door.state == "failing" and door.detail and "cannot reach" in door.detail) \
                or time.monotonic() > deadline:
            return door
        await asyncio.sleep(0.1)


async def _wait_event(seen: list[Incoming], kind: type[W], admission_id: str,
                      timeout: float = 60.0) -> W:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in seen:
            if isinstance(event.data, kind) and event.admission_id == admission_id:
                return event.data
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {kind.__name__} for {admission_id} in {timeout} s; saw "
                         f"{[e.type for e in seen]}")


def test_install_puts_a_launcher_and_icons_in_place_and_the_installed_app_runs(
    bundle: Path, tmp_path: Path
) -> None:
    prefix = tmp_path / "prefix"
    script = str(REPO / "packaging" / "install")
    subprocess.run([script, "--prefix", str(prefix)], check=True, capture_output=True, timeout=120)
    entry = (prefix / "share" / "applications" / "turnkey.desktop").read_text().splitlines()
    fields = dict(line.split("=", 1) for line in entry if "=" in line)
    assert entry[0] == "[Desktop Entry]"
    assert fields["Type"] == "Application"
    assert fields["Name"] == "Turnkey"
    assert fields["Icon"] == "turnkey"
    assert fields["Terminal"] == "false"
    assert fields["Exec"] == str(prefix / "lib" / "turnkey" / "turnkey")
    icons = prefix / "share" / "icons" / "hicolor"
    for size in (16, 24, 32, 48, 64, 128, 256, 512):
        assert (icons / f"{size}x{size}" / "apps" / "turnkey.png").is_file()
    assert (icons / "scalable" / "apps" / "turnkey.svg").is_file()
    # The launcher on PATH is a link; the bundle still finds its own files through it.
    data = tmp_path / "data"
    ran = subprocess.run([str(prefix / "bin" / "turnkey"), "--data-dir", str(data), "--smoke"],
                         env=clean_env(QT_QPA_PLATFORM="offscreen"), capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 0, f"{ran.stdout}\n{ran.stderr}"
    report = json.loads(ran.stdout.strip().splitlines()[-1])
    assert Path(report["backend_executable"]) == (prefix / "lib" / "turnkey" / "turnkey").resolve()
    subprocess.run([script, "--prefix", str(prefix), "--uninstall"], check=True, capture_output=True,
                   timeout=60)
    assert not (prefix / "lib" / "turnkey").exists()
    assert not (prefix / "bin" / "turnkey").exists()
    assert not list(icons.rglob("turnkey.*")), "the icons go too"
    assert (data / "logs").is_dir(), "the user's data stays"


async def test_a_bundle_with_no_provider_says_how_to_add_one(bundle: Path, tmp_path: Path) -> None:
    """The bundle leaves the offline model out, so a fresh install must point at Settings."""
    result = await _provider_test(bundle, tmp_path, config="")
    assert result.ok is False
    assert result.error is not None
    assert result.error.kind == "not_configured"
    assert result.error.message == "No model provider is set up yet. Add one in Settings → Providers."
    assert "File → Settings" in (result.error.detail or ""), "the detail says where, too"


async def test_a_bundle_without_the_offline_model_says_so_when_it_is_asked_for(
    bundle: Path, tmp_path: Path
) -> None:
    """Built without --with-local-model (test_bundle_local.py builds it with), a provider of
    kind "local" answers in words that the installed app does not include it."""
    result = await _provider_test(bundle, tmp_path, config=(
        'default_provider = "local"\n[providers.local]\nkind = "local"\nmodel = "SmolLM2-135M-Instruct"\n'))
    assert result.ok is False
    assert result.error is not None
    assert (result.error.kind, result.error.message) == ("not_configured", NOT_INSTALLED_WORDS)
    assert "this installed app does not include the offline model" in (result.error.detail or "")


async def _provider_test(bundle: Path, tmp_path: Path, config: str) -> p.ProviderTestResult:
    """provider.test's answer from the bundled backend started with this config.toml."""
    backend = BundledBackend(bundle, tmp_path / "data", "http://127.0.0.1:9/v1")
    (backend.data_dir / "config.toml").write_text(config)
    backend.start()
    client = Client(backend.data_dir, name="bundle-test")
    try:
        await client.connect()
        result = await client.call(ProviderTest(), timeout=60)
    finally:
        await client.close()
    assert backend.terminate() == 0
    return result


def test_the_bundle_names_a_library_its_x11_plugin_lacks_instead_of_aborting(
    bundle: Path, tmp_path: Path
) -> None:
    # A hard-linked copy of the bundle without Qt's xcb library: the check must look at the
    # bundle's own plugin (under _MEIPASS), with the library path the bootloader set.
    copy = tmp_path / "turnkey"
    if subprocess.run(["cp", "-al", bundle.parent, copy], capture_output=True).returncode:
        # Another file system than the temp folder: a real copy (a few seconds), never a skip.
        subprocess.run(["rm", "-rf", copy], check=True)
        subprocess.run(["cp", "-a", bundle.parent, copy], check=True)
    removed = list(copy.rglob("libQt6XcbQpa.so*"))
    assert removed
    for f in removed:
        f.unlink()
    data = tmp_path / "data"
    env = {k: v for k, v in clean_env(DISPLAY=":77").items()
           if k not in ("QT_QPA_PLATFORM", "QT_QPA_PLATFORM_PLUGIN_PATH", "XDG_SESSION_TYPE",
                        "WAYLAND_DISPLAY")}
    ran = subprocess.run([str(copy / "turnkey"), "--data-dir", str(data)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 1, ran
    assert ran.stderr.startswith("turnkey: cannot open the window: libQt6XcbQpa.so.6 is missing."), \
        ran.stderr
    assert not data.exists(), "no backend started"
