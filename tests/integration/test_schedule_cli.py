"""`turnkey schedule create|list|update|delete` end to end: the real CLI as a process and a real
backend, down to a scheduled turn that the fake model answers."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory


class Cli:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.argv = [sys.executable, "-m", "desktop.cli", "--data-dir", str(backend.data_dir)]

    def __call__(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.argv, *args], env=self.backend.env(), capture_output=True,
                              text=True, timeout=120, check=False, cwd=cwd)


@pytest.fixture
def cli(backend_factory: BackendFactory, fake_provider: FakeOpenAI) -> Cli:
    return Cli(backend_factory(fake_provider.base_url))


def _answers(backend: Backend, schedule_id: str) -> list[str | None]:
    return [r["final_text"] for r in backend.query(
        "SELECT final_text FROM admissions WHERE principal = ?", (f"schedule:{schedule_id}",))]


def test_round_trip(cli: Cli, fake_provider: FakeOpenAI, tmp_path: Path) -> None:
    fake_provider.routes["summarize the inbox"] = Reply(deltas=["inbox summarized"])
    empty = cli("schedule", "list")
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout.startswith("no schedules")

    made = cli("schedule", "create", "--new", "--cron", "0 9 * * 1-5", "--timezone",
               "Europe/Paris", "--missed", "skip", "summarize the inbox", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    schedule_id = made.stdout.split()[0]
    assert schedule_id.startswith("sch_")
    assert "every weekday at 9:00 (Europe/Paris)" in made.stdout

    soon = (datetime.now(UTC) + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    changed = cli("schedule", "update", schedule_id, "--at", soon)
    assert changed.returncode == 0, changed.stderr
    assert " once (Europe/Paris)" in changed.stdout

    deadline = time.monotonic() + 60
    while _answers(cli.backend, schedule_id) != ["inbox summarized"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _answers(cli.backend, schedule_id) == ["inbox summarized"]

    listed = cli("schedule", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith(f"{schedule_id}  next: done")
    assert "last: today at" in listed.stdout or "last: yesterday at" in listed.stdout

    off = cli("schedule", "update", schedule_id, "--disable")
    assert off.returncode == 0, off.stderr
    assert "next: off" in off.stdout

    gone = cli("schedule", "delete", schedule_id)
    assert (gone.returncode, gone.stdout.strip()) == (0, f"deleted {schedule_id}")
    again = cli("schedule", "delete", schedule_id)
    assert again.returncode == 1
    assert again.stderr.strip() == f"turnkey: schedule {schedule_id!r} not found"


def test_bad_input_says_what_to_fix(cli: Cli) -> None:
    bad = cli("schedule", "create", "--new", "--cron", "0 25 * * *", "hello")
    assert bad.returncode == 1
    assert bad.stderr.strip() == "turnkey: the hour field: 25 is out of range; use 0-23 (cron)"
    zone = cli("schedule", "create", "--new", "--cron", "0 9 * * *", "--timezone", "Paris", "hi")
    assert zone.returncode == 1
    assert "'Paris' is not an IANA time zone name" in zone.stderr
    both = cli("schedule", "create", "--new", "--cron", "0 9 * * *", "--at", "2030-01-01T09:00", "hi")
    assert both.returncode == 2, "argparse refuses both"
    assert "not allowed with argument" in both.stderr
