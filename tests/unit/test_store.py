"""The SQLite store from a blank file: migrations, group commit, rollback, publish order."""

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from backend import wire
from backend.errors import StoreTooNew
from backend.store import admissions, events, messages, runtime, sessions
from backend.store.db import Database, SqliteDatabase, Tx
from backend.store.events import StoredEvent
from backend.store.migrations import SCHEMA_VERSION, migrate
from shared.protocol import AdmissionEvent, Usage

TABLES = {
    "sessions", "messages", "admissions", "events", "runtime", "schema_migrations",
    "turn_leases", "approvals", "approval_rules", "checkpoints", "usage", "tokens",
}


def test_blank_database_migrates_to_the_current_schema(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    assert migrate(conn) == SCHEMA_VERSION
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert names >= TABLES
    assert migrate(conn) == SCHEMA_VERSION, "migrating twice is a no-op"
    versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
    assert versions == list(range(1, SCHEMA_VERSION + 1))


def test_version_one_database_upgrades_in_place(tmp_path: Path) -> None:
    from backend.store.migrations import MIGRATIONS

    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)")
    MIGRATIONS[0](conn)
    conn.execute("INSERT INTO schema_migrations VALUES (1, 'then')")
    conn.execute("INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at) "
                 "VALUES ('s', 't', '/', 'm', 'x', 'x')")
    assert migrate(conn) == SCHEMA_VERSION
    cols = {r[1] for r in conn.execute("PRAGMA table_info(messages)")}
    assert "meta" in cols
    assert conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 1


def test_version_six_database_marks_only_unused_default_titles_untitled(tmp_path: Path) -> None:
    from backend.store.migrations import MIGRATIONS

    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)")
    for version, step in enumerate(MIGRATIONS[:6], start=1):
        step(conn)
        conn.execute("INSERT INTO schema_migrations VALUES (?, 'then')", (version,))
    for sid, title in (("fresh", "New session"), ("used", "New session"), ("named", "Mine")):
        conn.execute("INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at) "
                     "VALUES (?, ?, '/', 'm', 'x', 'x')", (sid, title))
    conn.execute("INSERT INTO admissions (admission_id, principal, session_id, request_id, "
                 "payload_json, payload_digest, status, created_at) "
                 "VALUES ('a', 'owner', 'used', 'r', '{}', 'd', 'terminal', 'x')")
    assert migrate(conn) == SCHEMA_VERSION
    titled = dict(conn.execute("SELECT session_id, titled FROM sessions").fetchall())
    assert titled == {"fresh": 0, "used": 1, "named": 1}, "a prompt already sent settled the title"


def test_version_twelve_tokens_keep_their_rows_and_never_expire(tmp_path: Path) -> None:
    from backend.store.migrations import MIGRATIONS

    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)")
    for version, step in enumerate(MIGRATIONS[:12], start=1):
        step(conn)
        conn.execute("INSERT INTO schema_migrations VALUES (?, 'then')", (version,))
    conn.execute("INSERT INTO tokens (token_id, token_hash, scopes, label, created_at) "
                 "VALUES ('tok_1', 'h', '[\"read\"]', 'laptop', 'x')")
    assert migrate(conn) == SCHEMA_VERSION
    rows = conn.execute("SELECT token_id, scopes, expires_at FROM tokens").fetchall()
    assert rows == [("tok_1", '["read"]', None)]


def test_version_thirteen_sessions_keep_their_rows_on_the_default_provider(tmp_path: Path) -> None:
    from backend.store.migrations import MIGRATIONS

    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)")
    for version, step in enumerate(MIGRATIONS[:13], start=1):
        step(conn)
        conn.execute("INSERT INTO schema_migrations VALUES (?, 'then')", (version,))
    conn.execute("INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at) "
                 "VALUES ('ses_1', 'old', '/tmp', 'gpt-x', 'x', 'x')")
    assert migrate(conn) == SCHEMA_VERSION
    rows = conn.execute("SELECT session_id, model, provider FROM sessions").fetchall()
    assert rows == [("ses_1", "gpt-x", None)], "null: the default provider, as before"


def test_version_seventeen_usage_keeps_its_rows_and_takes_reviews(tmp_path: Path) -> None:
    from backend.store.migrations import MIGRATIONS

    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)")
    for version, step in enumerate(MIGRATIONS[:17], start=1):
        step(conn)
        conn.execute("INSERT INTO schema_migrations VALUES (?, 'then')", (version,))
    for sid in ("ses_1", "ses_2"):
        conn.execute("INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at) "
                     "VALUES (?, 'old', '/tmp', 'gpt-x', 'x', 'x')", (sid,))
    old = [("ses_1", "aux", "small", "compression", 1, 900, 80, 0, 0.01, 1),
           ("ses_1", "main", "gpt-x", "turn", 3, 120, 40, 10, 0.25, 0),
           ("ses_2", "main", "gpt-x", "title", 1, 30, 5, 0, 0.0, 0)]
    conn.executemany("INSERT INTO usage VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", old)
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO usage (session_id, provider, model, task) "
                     "VALUES ('ses_1', 'aux', 'small', 'review')")
    assert migrate(conn) == SCHEMA_VERSION
    assert conn.execute("SELECT * FROM usage ORDER BY session_id, task").fetchall() == old
    conn.execute("INSERT INTO usage (session_id, provider, model, task) "
                 "VALUES ('ses_1', 'aux', 'small', 'review')")
    with pytest.raises(sqlite3.IntegrityError):  # the CHECK is still there, with one more word
        conn.execute("INSERT INTO usage (session_id, provider, model, task) "
                     "VALUES ('ses_1', 'aux', 'small', 'other')")
    with pytest.raises(sqlite3.IntegrityError):  # and so is the primary key
        conn.execute("INSERT INTO usage (session_id, provider, model, task) "
                     "VALUES ('ses_1', 'main', 'gpt-x', 'turn')")
    conn.execute("DELETE FROM sessions WHERE session_id = 'ses_1'")  # the cascade too
    assert conn.execute("SELECT session_id, task FROM usage").fetchall() == [("ses_2", "title")]
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)

def _count(conn: sqlite3.Connection, sid: str) -> int:
    return int(conn.execute(
        "SELECT message_count FROM sessions WHERE session_id = ?", (sid,)).fetchone()[0])


def _raw_messages(conn: sqlite3.Connection, sid: str, n: int) -> None:
    conn.executemany(
        "INSERT INTO messages (session_id, role, content, created_at) VALUES (?, 'user', ?, 'x')",
        [(sid, f"m{i}") for i in range(n)])


def test_version_three_database_backfills_message_count(tmp_path: Path) -> None:
    from backend.store.migrations import MIGRATIONS

    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)")
    for version, step in enumerate(MIGRATIONS[:3], start=1):
        step(conn)
        conn.execute("INSERT INTO schema_migrations VALUES (?, 'then')", (version,))
    for sid in ("a", "b", "empty"):
        conn.execute("INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at) "
                     "VALUES (?, 't', '/', 'm', 'x', 'x')", (sid,))
    _raw_messages(conn, "a", 3)
    _raw_messages(conn, "b", 5)
    _raw_messages(conn, "a", 2)

    assert migrate(conn) == SCHEMA_VERSION
    assert [_count(conn, s) for s in ("a", "b", "empty")] == [5, 5, 0], "backfilled from the rows"

    _raw_messages(conn, "empty", 2)
    conn.execute("DELETE FROM messages WHERE id = (SELECT MIN(id) FROM messages WHERE session_id = 'a')")
    assert [_count(conn, s) for s in ("a", "b", "empty")] == [4, 5, 2], "the triggers keep it after"
    hits = conn.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'm1'").fetchone()
    assert hits[0] == 4, "the full-text triggers still fire beside the new ones"
    assert migrate(conn) == SCHEMA_VERSION, "migrating twice is a no-op"
    assert _count(conn, "a") == 4


def test_message_count_follows_every_insert_delete_and_move(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    conn.execute("PRAGMA foreign_keys=ON")
    migrate(conn)
    for sid in ("a", "b"):
        conn.execute("INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at) "
                     "VALUES (?, 't', '/', 'm', 'x', 'x')", (sid,))
    assert _count(conn, "a") == 0, "a new session starts at zero"
    _raw_messages(conn, "a", 4)
    _raw_messages(conn, "b", 1)
    assert (_count(conn, "a"), _count(conn, "b")) == (4, 1)

    # A bulk insert with the full-text trigger set aside, as tests/desktop/seed.py does.
    (fts_sql,) = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'messages_fts_insert'"
    ).fetchone()
    conn.execute("BEGIN")
    conn.execute("DROP TRIGGER messages_fts_insert")
    _raw_messages(conn, "b", 3)
    conn.execute(fts_sql)
    conn.execute("COMMIT")
    assert _count(conn, "b") == 4

    conn.execute("DELETE FROM messages WHERE session_id = 'a' AND content IN ('m0', 'm1')")
    assert _count(conn, "a") == 2
    conn.execute("UPDATE messages SET session_id = 'b' WHERE session_id = 'a' AND content = 'm2'")
    assert (_count(conn, "a"), _count(conn, "b")) == (1, 5)
    conn.execute("UPDATE messages SET content = 'edited', compacted = 1, active = 0")
    assert (_count(conn, "a"), _count(conn, "b")) == (1, 5), "other updates change nothing"

    conn.execute("DELETE FROM sessions WHERE session_id = 'a'")  # cascades to its messages
    assert conn.execute("SELECT COUNT(*) FROM messages WHERE session_id = 'a'").fetchone()[0] == 0
    assert _count(conn, "b") == 5
    rows = conn.execute(
        "SELECT s.message_count, (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.session_id) "
        "FROM sessions s").fetchall()
    assert rows == [(5, 5)]


def test_newer_database_is_refused(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    migrate(conn)
    conn.execute("INSERT INTO schema_migrations VALUES (?, 'later')", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreTooNew, match="newer Turnkey"):
        migrate(conn)


async def open_db(path: Path) -> Database:
    db = SqliteDatabase(path / "state.db")
    await db.open()
    return db


async def test_concurrent_writes_commit_and_publish_in_order(tmp_path: Path) -> None:
    db = await open_db(tmp_path)
    published: list[int] = []
    db.publisher = lambda item: published.append(item.event.seq)
    try:
        await db.write(lambda tx: tx.execute(
            "INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at) "
            "VALUES ('s', 't', '/', 'm', 'x', 'x')"))

        def append(tx: Tx) -> int:
            seq = events.append(tx, "s", "message.delta", {"text": "x"}).seq
            assert seq is not None
            return seq

        seqs = await asyncio.gather(*(db.write(append) for _ in range(200)))
        assert sorted(seqs) == list(range(1, 201)), "every write got its own seq"
        assert published == list(range(1, 201)), "events are published in seq order"
    finally:
        await db.close()


async def test_a_failing_job_rolls_back_alone(tmp_path: Path) -> None:
    db = await open_db(tmp_path)
    published: list[object] = []
    db.publisher = published.append
    try:
        await db.write(lambda tx: tx.execute(
            "INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at) "
            "VALUES ('s', 't', '/', 'm', 'x', 'x')"))

        def bad(tx: Tx) -> None:
            events.append(tx, "s", "message.delta", {"text": "lost"})
            raise ValueError("boom")

        good = db.write(lambda tx: events.append(tx, "s", "message.delta", {"text": "kept"}))
        results = await asyncio.gather(db.write(bad), good, return_exceptions=True)
        assert isinstance(results[0], ValueError)
        rows = await db.read(lambda tx: events.since(tx, "s", 0, 10))
        assert [e.data["text"] for e in rows] == ["kept"]
        assert rows[0].seq == 1, "the rolled-back job's seq is reused, leaving no gap"
        assert len(published) == 1, "a rolled-back job publishes nothing"
    finally:
        await db.close()


def _insert_session(tx: Tx, sid: str = "s") -> None:
    tx.execute(
        "INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at) "
        "VALUES (?, 't', '/', 'm', 'x', 'x')", (sid,))


async def test_before_commit_runs_once_per_key_after_the_job(tmp_path: Path) -> None:
    db = await open_db(tmp_path)
    published: list[str] = []
    db.publisher = published.append
    try:
        await db.write(_insert_session)
        calls: list[str] = []

        def count_at_end(label: str) -> Callable[[Tx], None]:
            def fn(tx: Tx) -> None:
                n = tx.one("SELECT COUNT(*) FROM events")
                assert n is not None
                calls.append(f"{label}:{n[0]}")
                tx.publish(f"finished {label}")
            return fn

        def job(tx: Tx) -> str:
            tx.before_commit("a", count_at_end("a"))
            events.append(tx, "s", "message.delta", {"text": "1"})
            tx.before_commit("a", count_at_end("a-again"))
            tx.before_commit("b", lambda t: t.before_commit("c", count_at_end("c")))
            events.append(tx, "s", "message.delta", {"text": "2"})
            assert calls == [], "finishers wait for the end of the job"
            return "done"

        assert await db.write(job) == "done"
        # The first registration of a key wins, it sees the job's final state, and a
        # finisher registered by a finisher runs too; each runs exactly once.
        assert calls == ["a:2", "c:2"]
        assert [p if isinstance(p, str) else p.event.seq for p in published] == [
            1, 2, "finished a", "finished c",
        ], "finishers publish after the job's own events, in registration order"

        await db.write(lambda tx: None)
        assert calls == ["a:2", "c:2"], "finishers belong to one job only"
    finally:
        await db.close()


async def test_a_raising_job_runs_no_finisher_and_publishes_nothing(tmp_path: Path) -> None:
    db = await open_db(tmp_path)
    published: list[object] = []
    db.publisher = published.append
    try:
        await db.write(_insert_session)
        ran: list[str] = []

        def raises_in_job(tx: Tx) -> None:
            tx.before_commit("k", lambda t: ran.append("job"))
            events.append(tx, "s", "message.delta", {"text": "lost"})
            raise ValueError("boom")

        def finisher_raises(t: Tx) -> None:
            t.publish("from the finisher")
            raise RuntimeError("finisher boom")

        def raises_in_finisher(tx: Tx) -> None:
            events.append(tx, "s", "message.delta", {"text": "lost too"})
            tx.before_commit("k", finisher_raises)

        good = db.write(lambda tx: events.append(tx, "s", "message.delta", {"text": "kept"}))
        results = await asyncio.gather(
            db.write(raises_in_job), db.write(raises_in_finisher), good, return_exceptions=True
        )
        assert isinstance(results[0], ValueError)
        assert isinstance(results[1], RuntimeError), "a failing finisher fails its job"
        assert ran == [], "a job that raised runs no finisher"
        rows = await db.read(lambda tx: events.since(tx, "s", 0, 10))
        assert [e.data["text"] for e in rows] == ["kept"], "both failed jobs rolled back"
        assert [p.event.data["text"] for p in published if isinstance(p, StoredEvent)] == ["kept"]
        assert len(published) == 1, "a failed job publishes nothing, its finisher's items neither"
    finally:
        await db.close()


async def test_session_changes_broadcast_one_summary_per_transaction(tmp_path: Path) -> None:
    """The store reports each changed session once (`SessionChanged`); the edge
    (`wire.announcing`) makes the `session.updated` broadcast of it."""
    db = await open_db(tmp_path)
    published: list[StoredEvent] = []
    db.publisher = wire.announcing(published.append)
    try:
        await db.write(lambda tx: sessions.insert(tx, "s", "t", "/", "m"))
        assert published == [], "creating a session is announced by its caller, not here"

        def turnish(tx: Tx) -> None:
            admissions.insert(tx, "adm_1", "p", "s", "r1", '{"text": "hi"}', "d")
            admissions.mark_started(tx, "adm_1", 1, "turn_1")
            messages.insert(tx, "s", "user", "hi", turn_id="turn_1")
            messages.insert(tx, "s", "assistant", "hello", turn_id="turn_1")
            sessions.add_usage(tx, "s", Usage(input_tokens=5, output_tokens=3))
            admissions.settle(tx, "adm_1", "completed", final_text="hello")
            sessions.touch(tx, "s")

        await db.write(turnish)
        updates = [p.event for p in published if p.event.type == "session.updated"]
        assert len(updates) == 1, "one broadcast however many changes the transaction made"
        event = updates[0]
        assert event.seq is None
        assert not published[0].stored
        session = event.data["session"]
        assert session["status"] == "idle", "the state at the end of the transaction"
        assert session["message_count"] == 2
        assert session["usage"]["input_tokens"] == 5
        stored = await db.read(lambda tx: sessions.get(tx, "s"))
        assert stored is not None
        assert session == events.as_data(wire.session(stored))
        assert stored.message_count == 2

        def delete_one(tx: Tx) -> None:
            tx.execute("DELETE FROM messages WHERE id = (SELECT MIN(id) FROM messages)")
            sessions.changed(tx, "s")

        published.clear()
        await db.write(delete_one)
        assert [p.event.data["session"]["message_count"] for p in published] == [1]
        listed = await db.read(lambda tx: [sessions.summary(tx, r) for r in sessions.page(tx, 10, None)])
        assert [s.message_count for s in listed] == [1]

        published.clear()
        await db.write(lambda tx: admissions.insert(tx, "adm_2", "p", "s", "r2", "{}", "d2"))
        await db.write(lambda tx: admissions.insert(tx, "adm_3", "p", "s", "r3", "{}", "d3"))
        assert [p.event.data["session"]["status"] for p in published] == ["queued"], (
            "a row queued behind another changes nothing the summary shows"
        )

        published.clear()

        def change_then_delete(tx: Tx) -> None:
            sessions.touch(tx, "s")
            sessions.delete(tx, "s")

        await db.write(change_then_delete)
        assert published == [], "nothing is announced of a session gone by the commit"
    finally:
        await db.close()


async def test_epoch_survives_reopen(tmp_path: Path) -> None:
    for expected in (1, 2, 3):
        db = await open_db(tmp_path)
        try:
            assert await db.write(runtime.bump_epoch) == expected
        finally:
            await db.close()


def _receipt(tx: Tx) -> AdmissionEvent:
    row = admissions.by_id(tx, "adm")
    assert row is not None
    return AdmissionEvent(receipt=wire.receipt(admissions.receipt(tx, row)))


async def test_long_texts_an_event_shares_with_its_admission_are_stored_once(
    tmp_path: Path,
) -> None:
    db = await open_db(tmp_path)
    published: list[StoredEvent] = []
    db.publisher = wire.announcing(published.append)
    prompt, answer = "p" * 50_000, "a" * 100_000
    try:
        def job(tx: Tx) -> None:
            _insert_session(tx)
            admissions.insert(tx, "adm", "owner", "s", "r", json.dumps({"text": prompt}), "d")
            events.append(tx, "s", "admission.queued", _receipt(tx), admission_id="adm")
            admissions.settle(tx, "adm", "completed", final_text=answer)
            events.append(tx, "s", "message.complete", {"text": answer, "status": "completed"},
                          admission_id="adm")
            events.append(tx, "s", "admission.settled", _receipt(tx), admission_id="adm")
            events.append(tx, "s", "message.complete", {"text": "a" * 5000 + "other"},
                          admission_id="adm")  # not the row's text: kept whole

        await db.write(job)
        replayed = await db.read(lambda tx: events.since(tx, "s", 0, 10))
        assert [e.data for e in replayed] == [p.event.data for p in published if p.stored], (
            "replay puts every text back as it went out live"
        )
        assert replayed[1].data["text"] == answer
        assert replayed[2].data["receipt"]["final_text"] == answer
        assert replayed[2].data["receipt"]["text"] == prompt
        sizes = await db.read(lambda tx: [r[0] for r in tx.all(
            "SELECT length(data) FROM events ORDER BY seq")])
        assert max(sizes[:3]) < 2000, sizes
        assert sizes[3] > 5000, "a text that is not the row's stays in the event"
    finally:
        await db.close()
