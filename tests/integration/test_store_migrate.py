"""`turnkey store migrate --to postgresql://...` end to end: a real backend on SQLite runs turns
(a tool call, an approval answered `always`, a schedule, a token), is stopped; the real CLI
copies its folder into a fresh PostgreSQL database; a backend started on that database then
lists the same sessions, replays the same events, finds a copied message by full-text search,
honours the copied token, rule and schedule, and runs a new turn whose rows follow the copied
ones.  And the refusals: a running backend, a target that holds data, a bad connection string.

The targets are fresh databases on the test run's own PostgreSQL server (tests/pg_server.py).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from backend.store import copy, pg_schema
from backend.store.attachments import PART_BYTES
from tests.attachment_samples import sha
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.pg_server import PgServer

from .backend_proc import Backend, BackendFactory
from .test_attachments import download, png, upload
from .test_attachments import submit as submit_files
from .wire import Json, Rpc, create_session, run_turn, submit, terminal, wait_complete

SECRET = "hunter2-not-for-logs"
# The source is always a SQLite folder; each test makes its PostgreSQL target itself.
pytestmark = pytest.mark.sqlite_only("the command copies a SQLite folder; the test makes the "
                                     "PostgreSQL target itself")


def with_user(dsn: str, userinfo: str) -> str:
    """`dsn` with USER or USER:PASSWORD in place of its own."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{parts.netloc.rpartition('@')[2]}"))


class Targets:
    """Fresh databases on the test run's PostgreSQL server, dropped at the end of the test."""

    def __init__(self, server: PgServer) -> None:
        self.server = server
        self.admin_dsn = server.dsn("postgres")
        self.made: list[str] = []

    def create_database(self) -> str:
        name = self.server.create_database()
        self.made.append(name)
        return name

    def dsn(self, name: str) -> str:
        return self.server.dsn(name)

    def admin(self, statement: sql.Composed) -> None:
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(statement)


@pytest.fixture
def pg(pg_server: PgServer) -> Iterator[Targets]:
    """Listed before backend_factory in a test's arguments, so its databases are dropped after
    the backends on them were stopped."""
    targets = Targets(pg_server)
    yield targets
    for name in targets.made:
        pg_server.drop_database(name)


def migrate(backend: Backend, *args: str) -> subprocess.CompletedProcess[str]:
    """The real `turnkey` command line, as a process."""
    argv = [sys.executable, "-m", "desktop.cli", "--data-dir", str(backend.data_dir), "store",
            "migrate", *args]
    return subprocess.run(argv, env=backend.env(), capture_output=True, text=True, timeout=120,
                          check=False)


async def events_of(rpc: Rpc, sid: str) -> list[Json]:
    """The session's stored events from seq 0, as a client replays them."""
    result = await rpc.call("session.events.since", {"session_id": sid, "since_seq": 0,
                                                     "limit": 1000})
    events: list[Json] = result["events"]
    return events


async def session_ids(rpc: Rpc) -> list[str]:
    listed = (await rpc.call("session.list", {"limit": 100}))["sessions"]
    return [s["session_id"] for s in listed]


async def message_ids(rpc: Rpc, sid: str) -> list[int]:
    result = await rpc.call("session.messages", {"session_id": sid, "limit": 1000})
    return [int(m["message_id"]) for m in result["messages"]]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class Before:
    """What the SQLite backend showed, to be shown again by the PostgreSQL one."""

    sid: str
    sessions: list[str]
    events: list[Json]
    messages: list[int]
    rules: list[Json]
    schedule: str
    token: str


async def fill(backend: Backend, fake: FakeOpenAI, folder: Path) -> Before:
    """Turns with a tool call and an `always` approval, a schedule and a token; what the
    copy must keep, read through the protocol."""
    (folder / "build1").mkdir()
    fake.script(Reply.calls(terminal("rm -rf build1")), Reply(deltas=["Removed build1."]),
                Reply(deltas=["The zanzibar notes are filed."]))
    rpc = await Rpc.open(backend.port, backend.token, name="sqlite")
    try:
        sid = await create_session(rpc, cwd=str(folder), title="migrated")
        receipt = await submit(rpc, sid, "remove build1")
        await rpc.wait_until(lambda: any(e["type"] == "approval.request"
                                         for e in rpc.session_events(sid)), what="approval")
        request = next(e for e in rpc.session_events(sid) if e["type"] == "approval.request")
        await rpc.call("approval.respond", {"approval_id": request["data"]["approval"]["approval_id"],
                                            "decision": "always"})
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "completed", done
        _, second = await run_turn(rpc, sid, "file the notes")
        assert second["data"]["text"] == "The zanzibar notes are filed."
        other = await create_session(rpc, cwd=str(folder), title="second")
        schedule = (await rpc.call("schedule.create", {
            "session_id": other, "text": "weekly report", "cron": "0 9 * * 1",
            "timezone": "UTC"}))["schedule"]
        token = await rpc.call("token.create", {"label": "laptop", "scopes": ["read"]})
        return Before(sid, await session_ids(rpc), await events_of(rpc, sid),
                      await message_ids(rpc, sid), (await rpc.call("rules.list"))["rules"],
                      schedule["schedule_id"], token["token"])
    finally:
        await rpc.close()


async def test_a_stopped_folder_moves_to_postgresql_and_carries_on(
    pg: Targets, backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    backend = backend_factory(fake_provider.base_url)
    before = await fill(backend, fake_provider, tmp_path)
    assert backend.terminate() == 0
    state = backend.data_dir / "state.db"
    config = backend.data_dir / "config.toml"
    state_digest, config_text = digest(state), config.read_text()
    dsn = pg.dsn(pg.create_database())

    done = migrate(backend, "--to", dsn, "--switch")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    summary = next(line for line in done.stdout.splitlines() if line.startswith("verified:"))
    assert "2 sessions" in summary, summary
    assert f"{len(before.events)} events" in summary, summary
    assert f'now has store = "{dsn}"' in done.stdout
    assert digest(state) == state_digest, "the file it copied from is left as it was"
    backup = config.with_name("config.toml.before-store-migrate")
    assert backup.read_text() == config_text
    assert f'store = "{dsn}"' in config.read_text()
    again = migrate(backend, "--to", dsn)
    assert again.returncode == 2
    assert f"this folder already keeps its sessions in {dsn} (store in config.toml)" in again.stderr

    other = backend_factory(fake_provider.base_url)  # another folder with a state.db
    other.terminate()
    backend.start()  # now on PostgreSQL, through config.toml alone
    busy = migrate(other, "--to", dsn)
    assert busy.returncode == 3, busy.stderr
    assert f"a backend is using {dsn}" in busy.stderr
    rpc = await Rpc.open(backend.port, backend.token, name="pg")
    try:
        sid = before.sid
        assert await session_ids(rpc) == before.sessions
        assert await events_of(rpc, sid) == before.events, "replay gives the same events"
        assert await message_ids(rpc, sid) == before.messages
        found = (await rpc.call("session.list", {"query": "zanzibar"}))["sessions"]
        assert [s["session_id"] for s in found] == [sid]
        assert (await rpc.call("rules.list"))["rules"] == before.rules
        schedules = (await rpc.call("schedule.list"))["schedules"]
        assert [s["schedule_id"] for s in schedules] == [before.schedule]

        fake_provider.script(Reply(deltas=["Still here."]))
        _, complete = await run_turn(rpc, sid, "are you there")
        assert complete["data"]["text"] == "Still here."
        now = await message_ids(rpc, sid)
        assert now[:len(before.messages)] == before.messages
        assert min(now[len(before.messages):]) > max(before.messages)
        seqs = [e["seq"] for e in await events_of(rpc, sid)]
        assert seqs == list(range(1, len(seqs) + 1))
    finally:
        await rpc.close()
    reader = await Rpc.open(backend.port, before.token, name="token")  # its hash moved
    try:
        assert sorted(await session_ids(reader)) == sorted(before.sessions)
    finally:
        await reader.close()


async def test_the_verification_reads_both_sides_and_names_what_differs(
    pg: Targets, backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    """The check after the copy, on real files: it passes on the copy, and names the session
    whose event went missing from PostgreSQL afterwards."""
    backend = backend_factory(fake_provider.base_url)
    fake_provider.script(Reply(deltas=["one"]), Reply(deltas=["two"]))
    rpc = await Rpc.open(backend.port, backend.token)
    sid = await create_session(rpc)
    await run_turn(rpc, sid, "first")
    await run_turn(rpc, sid, "second")
    await rpc.close()
    backend.terminate()
    dsn = pg.dsn(pg.create_database())
    assert migrate(backend, "--to", dsn).returncode == 0

    source = copy.open_source(backend.data_dir / "state.db")
    try:
        with psycopg.connect(dsn, autocommit=True) as target:
            assert copy.differences(copy.snapshot(source), copy.snapshot(target)) == []
            target.execute("DELETE FROM events WHERE session_id = %s AND seq = 3", (sid,))
            before = copy.snapshot(source)
            found = copy.differences(before, copy.snapshot(target))
    finally:
        source.close()
    n = before.counts["events"]
    [table, session] = found
    assert table == f"table events: {n} rows in the file, {n - 1} in PostgreSQL"
    assert session.startswith(f"session {sid}: events ")
    assert "first gap after 2 in PostgreSQL" in session


async def test_a_user_who_does_not_own_the_tables_gets_the_same_copy(
    pg: Targets, backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    """The schema made beforehand by another role: the message counter cannot be paused, so
    the copy lets it count every message from 0 (slower), and the check compares the counts."""
    backend = backend_factory(fake_provider.base_url)
    fake_provider.script(Reply(deltas=["one"]), Reply(deltas=["two"]))
    rpc = await Rpc.open(backend.port, backend.token)
    sids = [await create_session(rpc), await create_session(rpc)]
    for sid in sids:
        await run_turn(rpc, sid, "hello")
    await rpc.close()
    backend.terminate()
    name, role = pg.create_database(), f"tk_writer_{uuid.uuid4().hex[:8]}"
    pg.admin(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        with psycopg.connect(pg.dsn(name), autocommit=True) as owner:
            pg_schema.migrate(owner)
            for grant in ("GRANT ALL ON ALL TABLES IN SCHEMA public TO {}",
                          "GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {}",
                          "GRANT CREATE ON SCHEMA public TO {}"):
                owner.execute(sql.SQL(grant).format(sql.Identifier(role)))
        done = migrate(backend, "--to", with_user(pg.dsn(name), role))
        assert done.returncode == 0, done.stderr
        with psycopg.connect(pg.dsn(name)) as conn:
            counts = {str(sid): int(n) for sid, n in conn.execute(
                "SELECT session_id, message_count FROM sessions")}
            disabled = conn.execute("SELECT tgenabled FROM pg_trigger "
                                    "WHERE tgname = 'messages_count_insert'").fetchone()
        assert counts == {sid: 2 for sid in sids}  # the prompt and the answer, counted once
        assert disabled == ("O",), "the trigger is left on"
    finally:
        pg.server.drop_database(name)
        pg.admin(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


async def test_it_refuses_while_a_backend_runs_on_the_folder(
    pg: Targets, backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    backend = backend_factory(fake_provider.base_url)
    name = pg.create_database()
    refused = migrate(backend, "--to", pg.dsn(name))
    assert refused.returncode == 3, refused.stderr
    assert f"a backend is running on {backend.data_dir} (pid {backend.pid})" in refused.stderr
    assert "turnkey backend stop" in refused.stderr
    with psycopg.connect(pg.dsn(name)) as conn:  # nothing was created there
        tables = conn.execute("SELECT COUNT(*) FROM information_schema.tables "
                              "WHERE table_schema = 'public'").fetchone()
    assert tables == (0,)


async def test_it_never_copies_into_a_database_that_holds_data(
    pg: Targets, backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    backend = backend_factory(fake_provider.base_url)
    rpc = await Rpc.open(backend.port, backend.token)
    await create_session(rpc)
    await rpc.close()
    backend.terminate()
    dsn = pg.dsn(pg.create_database())
    first = migrate(backend, "--to", dsn)
    assert first.returncode == 0, first.stderr
    assert f'store = "{dsn}"' in first.stdout.splitlines()
    again = migrate(backend, "--to", dsn)
    assert again.returncode == 2
    assert "already holds data: sessions (1)" in again.stderr
    assert "never merges" in again.stderr
    assert "copying" not in again.stdout


async def test_a_bad_connection_string_is_refused_without_its_password(
    pg: Targets, backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    backend = backend_factory(fake_provider.base_url, start=False)
    backend.start()
    backend.terminate()
    for dsn in (f"postgresql://someone:{SECRET}@127.0.0.1:1/nowhere",
                f"postgresql://someone:{SECRET}@127.0.0.1:notaport/nowhere",
                with_user(pg.dsn(f"no_such_db_{uuid.uuid4().hex[:6]}"), f"postgres:{SECRET}")):
        refused = migrate(backend, "--to", dsn)
        assert refused.returncode == 2, refused.stderr
        assert "could not connect to" in refused.stderr
        assert SECRET not in refused.stderr + refused.stdout
        assert ":***@" in refused.stderr
    not_pg = migrate(backend, "--to", f"mysql://root:{SECRET}@localhost/db")
    assert not_pg.returncode == 2
    assert "--to takes a PostgreSQL connection string" in not_pg.stderr
    assert SECRET not in not_pg.stderr
    switch = migrate(backend, "--to", f"postgresql://u:{SECRET}@127.0.0.1:1/db", "--switch")
    assert switch.returncode == 2
    assert "--switch would write the password into config.toml" in switch.stderr
    assert SECRET not in switch.stderr


# --- attachments' bytes --------------------------------------------------------------------


async def _prompt_with_files(backend: Backend) -> tuple[str, dict[str, bytes]]:
    """A session whose prompt carries an image (more than one part) and a text file; the
    bytes by sha256 (the image's thumbnail read back too)."""
    image, notes = png(900, 700), b"# notes\nline two\n"
    assert len(image) > PART_BYTES, "the test needs a file of two parts"
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc)
        thumb = (await upload(rpc, image, "image/png"))["file"]["thumbnail"]
        await upload(rpc, notes, "text/markdown")
        receipt = await submit_files(rpc, sid, "f1", "look", [(sha(image), "shot.png"),
                                                              (sha(notes), "notes.md")])
        await wait_complete(rpc, receipt["admission_id"])
        files = {sha(image): image, sha(notes): notes}
        files[thumb] = await download(rpc, sid, thumb)
        return sid, files
    finally:
        await rpc.close()


async def test_attachments_bytes_move_with_the_store_and_are_served_from_postgresql(
    pg: Targets, backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    backend = backend_factory(fake_provider.base_url)
    sid, files = await _prompt_with_files(backend)
    backend.terminate()
    dsn = pg.dsn(pg.create_database())
    done = migrate(backend, "--to", dsn, "--switch")
    assert done.returncode == 0, done.stderr
    assert "attachment_data: 4 rows" in done.stdout, "two parts, one, and the thumbnail's one"
    assert "3 attachment files" in done.stdout
    with psycopg.connect(dsn) as conn:
        parts = conn.execute("SELECT sha256, COUNT(*), SUM(octet_length(data)) FROM "
                             "attachment_data GROUP BY sha256").fetchall()
    assert {s: n for s, _, n in parts} == {s: len(b) for s, b in files.items()}
    assert (backend.data_dir / "attachments").is_dir(), "the folder's files are left as they were"

    backend.start()  # on PostgreSQL now
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        for digest_, data in files.items():
            assert await download(rpc, sid, digest_) == data
    finally:
        await rpc.close()


async def test_a_recorded_file_missing_from_the_folder_fails_the_copy_and_writes_nothing(
    pg: Targets, backend_factory: BackendFactory, fake_provider: FakeOpenAI
) -> None:
    backend = backend_factory(fake_provider.base_url)
    _, files = await _prompt_with_files(backend)
    backend.terminate()
    lost = sorted(files)[0]
    (backend.data_dir / "attachments" / lost[:2] / lost).unlink()
    dsn = pg.dsn(pg.create_database())
    failed = migrate(backend, "--to", dsn)
    assert failed.returncode == 1, failed.stderr
    assert f"the attachment {backend.data_dir / 'attachments' / lost[:2] / lost} that the store " \
        "records cannot be read" in failed.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT COUNT(*) FROM sessions").fetchone() == (0,)
        assert conn.execute("SELECT COUNT(*) FROM attachment_data").fetchone() == (0,)
