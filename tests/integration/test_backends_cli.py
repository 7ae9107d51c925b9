"""`turnkey backends` end to end: the real CLI as a process against a real backend on each
store, and on PostgreSQL a second backend sharing the store."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI

from .backend_proc import Backend, BackendFactory


def cli(backend: Backend, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**backend.env(), "TURNKEY_REMOTE": ""}
    return subprocess.run([sys.executable, "-m", "desktop.cli", "--data-dir", str(backend.data_dir),
                           *args], env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def test_the_table_marks_the_backend_that_answered_and_json_is_backend_list(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    a = backend_factory(fake_provider.base_url)
    others = []
    if a.on_postgres:  # a second backend on the same database
        b = Backend(tmp_path / "second", fake_provider.base_url, store=a.store)
        b.start()
        others.append(b)
    try:
        shown = cli(a, "backends")
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert lines[0].split() == ["HOST", "PID", "STATE", "STARTED", "HEARTBEAT", "SESSIONS",
                                    "HELD"]
        rows = [line.split() for line in lines[1:1 + 1 + len(others)]]
        assert rows[0][:4] == ["*", socket.gethostname(), str(a.pid), "live"], shown.stdout
        assert rows[0][-1] == "0"
        for other, listed in zip(others, rows[1:], strict=True):
            assert listed[:3] == [socket.gethostname(), str(other.pid), "live"], shown.stdout
        assert "* the backend that answered" in shown.stdout
        assert ("this backend since it started: 0 turns taken over from others, 0 writes of "
                "its own refused after a takeover") in shown.stdout
        assert ("PostgreSQL store: 2 live of 2" if a.on_postgres else "SQLite store") in shown.stdout

        as_json = cli(a, "backends", "--json")
        assert as_json.returncode == 0, as_json.stderr
        listing = json.loads(as_json.stdout)
        assert listing["store"] == ("postgresql" if a.on_postgres else "sqlite")
        assert [(x["pid"], x["this"]) for x in listing["backends"]] == [
            (a.pid, True), *((o.pid, False) for o in others)]
        assert cli(a, "backends", "--all", "--json").returncode == 0
    finally:
        for other in others:
            other.close()
            assert not other.logged_errors()

