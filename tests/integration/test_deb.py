"""The Debian package, as a person on Debian or Ubuntu uses it: built from the bundle
(packaging/deb.py), installed with `apt-get install ./turnkey_*.deb`, opened, upgraded while
its backend runs a turn, removed, and checked with lintian.

This installs into the real system (/opt/turnkey, /usr/bin/turnkey), so it needs root and
apt, as CI has; it removes the package again whatever happens.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from shared import protocol as p
from shared.client import Client, Incoming
from shared.methods import PromptSubmit, SessionCreate, SessionMessages
from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import REPO
from .test_bundle import BundledBackend, clean_env

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1800),  # building, installing and upgrading a 180 MB package
    pytest.mark.sqlite_only("the installed package and its bundled backend on the default store"),
    pytest.mark.serial("installs into the real system and takes bubblewrap away meanwhile"),
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("apt-get") is None
                       or shutil.which("dpkg-deb") is None,
                       reason="installs a package into the system: needs root, apt and dpkg-deb"),
]

PACKAGE = "turnkey"
OPT = Path("/opt/turnkey")
USR_BIN = Path("/usr/bin/turnkey")
APT_ENV = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)


def _version() -> str:
    with (REPO / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


OLD, NEW = f"{_version()}~test1", _version()  # "~" sorts before: NEW is an upgrade of OLD


@pytest.fixture(scope="module")
def debs(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The package at two versions, made from the same bundle (gzip: a fraction of xz's time)."""
    out = tmp_path_factory.mktemp("debs")
    made = {}
    for version in (OLD, NEW):
        built = subprocess.run(
            [sys.executable, str(REPO / "packaging" / "deb.py"), "--bundle", str(bundle.parent),
             "--out", str(out), "--version", version, "--compress", "gzip"],
            capture_output=True, text=True, timeout=600)
        assert built.returncode == 0, f"{built.stdout}\n{built.stderr}"
        print(f"\n{built.stdout.strip()}")
        [made[version]] = out.glob(f"{PACKAGE}_{version}_*.deb")
    return made


@pytest.fixture
def system() -> Iterator[bool]:
    """Refuses to replace a Turnkey a person installed here; purges the test's own after.
    Takes bubblewrap away first when nothing else needs it (dpkg refuses otherwise), so the
    install must bring it; yields whether it did.  It is back afterwards in any case: the
    rest of the suite sandboxes its commands with it."""
    if _installed_version() is not None:
        pytest.skip("a turnkey package is installed on this machine; the test would replace it")
    taken = subprocess.run(["dpkg", "--remove", "bubblewrap"], env=APT_ENV, capture_output=True,
                           timeout=300).returncode == 0
    try:
        yield taken
    finally:
        subprocess.run(["dpkg", "--purge", PACKAGE], env=APT_ENV, capture_output=True, timeout=300)
        if shutil.which("bwrap") is None:
            subprocess.run(["apt-get", "install", "-y", "-qq", "bubblewrap"], env=APT_ENV,
                           capture_output=True, timeout=600)


def test_the_package_installs_opens_upgrades_under_a_running_turn_and_removes_keeping_the_data(
    debs: dict[str, Path], system: bool, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    if system:
        assert shutil.which("bwrap") is None, "bubblewrap was taken away before the install"
    _apt_install(debs[OLD])
    assert shutil.which("bwrap"), "apt brought bubblewrap with the package"
    assert _installed_version() == OLD
    _check_the_files()
    _check_the_dependencies_are_what_the_bundle_loads()
    home = tmp_path / "home"
    data = home / ".local" / "share" / "turnkey"
    _check_it_opens(home, data)

    asyncio.run(_upgrade_while_a_turn_runs(debs[NEW], data, fake_provider))
    assert _installed_version() == NEW

    removed = subprocess.run(["apt-get", "remove", "-y", PACKAGE], env=APT_ENV,
                             capture_output=True, text=True, timeout=300)
    assert removed.returncode == 0, removed.stderr
    assert not OPT.exists(), "the app's files go"
    assert not USR_BIN.exists()
    assert not Path("/usr/share/applications/turnkey.desktop").exists()
    assert (data / "state.db").is_file(), "the person's sessions stay"
    assert (data / "config.toml").is_file()
    assert (data / "logs").is_dir()


def test_lintian_finds_no_error_and_the_metadata_validates(
    debs: dict[str, Path], tmp_path: Path
) -> None:
    if shutil.which("lintian") is None:  # as root with apt (this module's condition): fetch it
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "lintian"],
                       env=APT_ENV, capture_output=True, timeout=900)
    if shutil.which("lintian") is None:
        pytest.skip("lintian could not be installed (apt-get install lintian)")
    checked = subprocess.run(["lintian", "--no-cfg", "--fail-on", "error", str(debs[NEW])],
                             capture_output=True, text=True, timeout=600)
    assert checked.returncode == 0, f"lintian:\n{checked.stdout}\n{checked.stderr}"
    tree = tmp_path / "tree"
    subprocess.run(["dpkg-deb", "-x", str(debs[NEW]), str(tree)], check=True, timeout=300)
    [metainfo] = (tree / "usr" / "share" / "metainfo").glob("*.metainfo.xml")
    if shutil.which("appstreamcli"):
        valid = subprocess.run(["appstreamcli", "validate", "--no-net", str(metainfo)],
                               capture_output=True, text=True, timeout=120)
        assert valid.returncode == 0, valid.stdout + valid.stderr
    if shutil.which("desktop-file-validate"):
        entry = tree / "usr" / "share" / "applications" / "turnkey.desktop"
        valid = subprocess.run(["desktop-file-validate", str(entry)], capture_output=True, text=True)
        assert valid.returncode == 0, valid.stdout
        assert not valid.stdout.strip(), "no hint either"


# --- the steps ---------------------------------------------------------------------------

def _apt_install(deb: Path) -> None:
    """As a person would: apt resolves the Depends (bubblewrap, the libraries) from the archive."""
    done = subprocess.run(["apt-get", "install", "-y", f"./{deb.name}"], cwd=deb.parent,
                          env=APT_ENV, capture_output=True, text=True, timeout=900)
    if done.returncode != 0 and "Unable to locate" in done.stderr + done.stdout:
        subprocess.run(["apt-get", "update", "-qq"], env=APT_ENV, capture_output=True, timeout=600)
        done = subprocess.run(["apt-get", "install", "-y", f"./{deb.name}"], cwd=deb.parent,
                              env=APT_ENV, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def _installed_version() -> str | None:
    shown = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Status} ${Version}", PACKAGE],
                           capture_output=True, text=True)
    status, _, version = shown.stdout.partition(" ")
    return version if shown.returncode == 0 and status == "installed" else None


def _check_the_files() -> None:
    assert USR_BIN.is_symlink()
    assert USR_BIN.resolve() == OPT / "turnkey"
    share = Path("/usr/share")
    entry = (share / "applications" / "turnkey.desktop").read_text()
    assert "\nExec=turnkey\n" in entry
    assert "\nIcon=turnkey\n" in entry
    for size in ICON_SIZES:
        assert (share / f"icons/hicolor/{size}x{size}/apps/turnkey.png").is_file(), size
    assert (share / "icons/hicolor/scalable/apps/turnkey.svg").is_file()
    [metainfo] = (share / "metainfo").glob("*turnkey*.metainfo.xml")
    assert f'<release version="{OLD}"' in metainfo.read_text()
    assert "<launchable type=\"desktop-id\">turnkey.desktop</launchable>" in metainfo.read_text()
    assert (share / "doc/turnkey/copyright").is_file()
    assert (share / "doc/turnkey/changelog.gz").is_file()
    assert (share / "man/man1/turnkey.1.gz").is_file()


def _check_the_dependencies_are_what_the_bundle_loads() -> None:
    """Depends names bubblewrap and the system libraries the bundle links, and with them
    installed every library in /opt/turnkey finds everything it links."""
    depends = _dpkg_field("Depends").split(", ")
    assert "bubblewrap" in depends
    assert "libxcb1" in depends, "the X11 window's own library, which the bundle does not carry"
    for package in depends:
        assert _dpkg_field("Status", package) == "install ok installed", package
    unresolved = []
    folders = _library_folders()
    for path in sorted(OPT.rglob("*.so*")):
        if path.is_symlink() or not path.is_file():
            continue
        linked = subprocess.run(["ldd", str(path)], capture_output=True, text=True,
                                env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": folders})
        unresolved += [f"{path}: {line.strip()}" for line in linked.stdout.splitlines()
                       if "not found" in line]
    assert unresolved == [], "\n".join(unresolved)


def _library_folders() -> str:
    """Where the bundle's own libraries are, as its executable makes the loader look."""
    return ":".join(sorted({str(p.parent) for p in OPT.rglob("*.so*")}))


def _dpkg_field(field: str, package: str = PACKAGE) -> str:
    shown = subprocess.run(["dpkg-query", "-W", "-f", f"${{{field}}}", package],
                           capture_output=True, text=True)
    return shown.stdout.strip()


def _check_it_opens(home: Path, data: Path) -> None:
    """`turnkey --smoke` from PATH with a person's environment: the window opens offscreen,
    starts the installed backend, and closes."""
    ran = subprocess.run([str(USR_BIN), "--smoke"], env=clean_env(QT_QPA_PLATFORM="offscreen",
                                                                  HOME=str(home)),
                         capture_output=True, text=True, timeout=180)
    assert ran.returncode == 0, f"{ran.stdout}\n{ran.stderr}"
    report = json.loads(ran.stdout.strip().splitlines()[-1])
    assert report["window"], report
    assert report["connected"], report
    assert Path(report["backend_executable"]) == OPT / "turnkey"
    assert data.is_dir(), "the default data folder, under the person's home"


async def _upgrade_while_a_turn_runs(new: Path, data: Path, fake: FakeOpenAI) -> None:
    """The old version's backend is running a turn when apt upgrades: prerm asks it to drain,
    the turn finishes, input sent meanwhile waits, and the new version runs it."""
    release = threading.Event()
    fake.routes["long haul"] = Reply(deltas=["finished ", "before the upgrade"], hang_after=1,
                                     release=release)
    backend = BundledBackend(USR_BIN, data, fake.base_url)
    backend.start()
    client = Client(data, name="deb-test")
    seen: list[Incoming] = []
    client.handlers.append(seen.append)
    upgrade: subprocess.Popen[str] | None = None
    try:
        await client.connect()
        sid = (await client.call(SessionCreate(cwd=str(data)))).session.session_id
        client.follow(sid)
        running = (await client.call(PromptSubmit(session_id=sid, request_id="deb-1",
                                                  text="long haul"))).receipt
        await _until(lambda: any(isinstance(e.data, p.TextDelta) for e in seen), "a delta")
        upgrade = _start_upgrade(new)
        await _until(lambda: "draining" in (data / "logs" / "backend.log").read_text(),
                     "the backend draining", timeout=120)
        waiting = (await client.call(PromptSubmit(session_id=sid, request_id="deb-2",
                                                  text="sent during the upgrade"))).receipt
        assert waiting.status == "queued", "admitted and kept for the next start"
        assert upgrade.poll() is None, "the upgrade waits for the running turn"
        assert backend.alive()
        release.set()
        done = await _until(lambda: _complete(seen, running.admission_id), "the turn's end")
        assert (done.status, done.text) == ("completed", "finished before the upgrade")
        assert backend.proc is not None
        assert await asyncio.to_thread(backend.proc.wait, 60) == 0, "the drained backend exits"
        output, _ = await asyncio.to_thread(upgrade.communicate, timeout=600)
        assert upgrade.returncode == 0, output[-4000:]
    finally:
        release.set()
        await client.close()
        if upgrade is not None and upgrade.poll() is None:
            upgrade.wait(timeout=600)
        if backend.alive():
            backend.terminate()
    asked = [r.last_user_text for r in fake.snapshot()]
    assert asked == ["long haul"], f"nothing new started during the upgrade: {asked}"

    backend.start()  # the new version, on the same data: it runs what waited
    client = Client(data, name="deb-test-after")
    try:
        await client.connect()

        async def transcript() -> list[tuple[str, str]]:
            rows = (await client.call(SessionMessages(session_id=sid))).messages
            return [(r.role, r.content) for r in rows]

        deadline = time.monotonic() + 90
        while len(texts := await transcript()) < 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert texts == [("user", "long haul"), ("assistant", "finished before the upgrade"),
                         ("user", "sent during the upgrade"), ("assistant", "ok")], texts
    finally:
        await client.close()
    assert backend.terminate() == 0
    assert backend.logged_errors() == []


def _start_upgrade(new: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(["apt-get", "install", "-y", f"./{new.name}"], cwd=new.parent,
                            env=APT_ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _complete(seen: list[Incoming], admission_id: str) -> p.MessageComplete | None:
    for event in seen:
        if isinstance(event.data, p.MessageComplete) and event.admission_id == admission_id:
            return event.data
    return None


async def _until(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = check()
        except FileNotFoundError:
            found = None
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {what} within {timeout} s")
