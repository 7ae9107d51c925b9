"""store/copy.py without a PostgreSQL server: the verification names every kind of difference,
a snapshot reads what it should from a real SQLite file, and the source is refused (and left
untouched) when it is not the current layout."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from backend.store import attachments, copy, migrations
from backend.store.copy import Snapshot, differences
from backend.store.dbfile import prepare


def snap(**changes: object) -> Snapshot:
    """A consistent two-session snapshot, with `changes` applied."""
    s = Snapshot(
        counts={t: 0 for t in copy.TABLES} | {"sessions": 2, "messages": 5, "events": 7,
                                              "runtime": 1},
        seqs={"ses_a": [1, 2, 3, 4], "ses_b": [1, 2, 3]},
        message_ids={"ses_a": [1, 2, 4], "ses_b": [3, 5]},
        message_counts={"ses_a": 3, "ses_b": 2},
    )
    for name, value in changes.items():
        setattr(s, name, value)
    return s


def test_equal_sides_have_no_difference() -> None:
    assert differences(snap(), snap()) == []


def test_a_missing_event_is_named_with_where_the_seqs_break() -> None:
    target = snap(seqs={"ses_a": [1, 2, 4], "ses_b": [1, 2, 3]})
    assert differences(snap(), target) == [
        "session ses_a: events 4 (1..4) in the file, 3 (1..4), first gap after 2 in PostgreSQL"]


def test_a_session_missing_on_one_side_is_named() -> None:
    target = snap(seqs={"ses_a": [1, 2, 3, 4]}, message_counts={"ses_a": 3})
    assert differences(snap(), target) == [
        "session ses_b: events 3 (1..3) in the file, none in PostgreSQL",
        "session ses_b: message_count 2 in the file, None in PostgreSQL",
    ]


def test_a_row_count_a_message_id_and_a_counter_each_count() -> None:
    target = snap(counts=snap().counts | {"tokens": 1},
                  message_ids={"ses_a": [1, 2, 6], "ses_b": [3, 5]},
                  message_counts={"ses_a": 4, "ses_b": 2})
    assert differences(snap(), target) == [
        "table tokens: 0 rows in the file, 1 in PostgreSQL",
        "session ses_a: messages 3 (1..4), first gap after 2 in the file, "
        "3 (1..6), first gap after 2 in PostgreSQL",
        "session ses_a: message_count 3 in the file, 4 in PostgreSQL",
    ]


def test_gaps_on_both_sides_still_fail() -> None:
    """Equal is not enough: replay relies on seqs counting up from 1 without a hole."""
    gappy = {"ses_a": [1, 2, 3, 4], "ses_b": [2, 3]}
    assert differences(snap(seqs=gappy), snap(seqs=gappy)) == [
        "session ses_b: its events' seqs have gaps (2 (2..3)) on both sides"]


def test_many_differences_are_cut_short_with_a_count() -> None:
    many = {f"ses_{i:03d}": [1] for i in range(30)}
    found = differences(snap(seqs=many | snap().seqs), snap())
    assert len(found) == copy.MAX_REPORTED + 1
    assert found[-1] == f"... and {30 - copy.MAX_REPORTED} more differences"


# --- reading the file ----------------------------------------------------------------


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """A migrated state.db with two sessions, messages and events."""
    path = tmp_path / "state.db"
    prepare(path)
    conn = sqlite3.connect(path, isolation_level=None)
    for sid in ("ses_a", "ses_b"):
        conn.execute("INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at)"
                     " VALUES (?, 't', '/', 'm', 'now', 'now')", (sid,))
    for sid, text in (("ses_a", "one"), ("ses_b", "two"), ("ses_a", "three")):
        conn.execute("INSERT INTO messages (session_id, role, content, created_at) "
                     "VALUES (?, 'user', ?, 'now')", (sid, text))
    for sid, seq in (("ses_a", 1), ("ses_a", 2), ("ses_b", 1)):
        conn.execute("INSERT INTO events (session_id, seq, type, ts, data) "
                     "VALUES (?, ?, 'x', 'now', '{}')", (sid, seq))
    conn.close()
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_snapshot_reads_counts_seqs_ids_and_counters(state: Path) -> None:
    conn = copy.open_source(state)
    try:
        s = copy.snapshot(conn)
    finally:
        conn.close()
    assert (s.counts["sessions"], s.counts["messages"], s.counts["events"]) == (2, 3, 3)
    assert s.seqs == {"ses_a": [1, 2], "ses_b": [1]}
    assert s.message_ids == {"ses_a": [1, 3], "ses_b": [2]}
    assert s.message_counts == {"ses_a": 2, "ses_b": 1}
    assert s.events == 3


def test_the_source_is_read_only(state: Path) -> None:
    before = digest(state)
    conn = copy.open_source(state)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        conn.execute("DELETE FROM events")
    conn.close()
    assert digest(state) == before


def test_a_closed_file_is_read_without_leaving_files_beside_it(state: Path) -> None:
    conn = copy.open_source(state)
    conn.execute("BEGIN")
    assert conn.execute("SELECT COUNT(*) FROM sessions").fetchone() == (2,)
    conn.close()
    assert sorted(p.name for p in state.parent.iterdir()) == ["state.db"]


def test_a_killed_writers_log_is_read_too(state: Path) -> None:
    """A backend killed with -9 leaves committed transactions in state.db-wal only."""
    writer = (
        "import os, sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute(\"INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at)"
        " VALUES ('ses_c', 't', '/', 'm', 'now', 'now')\")\n"
        "os._exit(0)\n")  # no checkpoint, no clean-up: as after kill -9
    subprocess.run([sys.executable, "-c", writer, str(state)], check=True)
    assert state.with_name("state.db-wal").stat().st_size > 0
    before = digest(state)
    conn = copy.open_source(state)
    try:
        assert copy.snapshot(conn).message_counts == {"ses_a": 2, "ses_b": 1, "ses_c": 0}
    finally:
        conn.close()
    assert digest(state) == before


def _set_version(path: Path, version: int) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DELETE FROM schema_migrations WHERE version > ?", (version,))
    conn.execute("INSERT OR IGNORE INTO schema_migrations VALUES (?, 'now')", (version,))
    conn.close()


def test_an_older_file_is_refused_and_left_as_it_was(state: Path) -> None:
    _set_version(state, migrations.SCHEMA_VERSION - 1)
    before = digest(state)
    with pytest.raises(copy.CopyRefused, match=r"older than this Turnkey's \d+; start the "
                                               r"backend on this folder once"):
        copy.open_source(state)
    assert digest(state) == before


def test_a_newer_file_is_refused(state: Path) -> None:
    _set_version(state, migrations.SCHEMA_VERSION + 1)
    with pytest.raises(copy.CopyRefused, match="knows only up to"):
        copy.open_source(state)


def test_a_table_it_does_not_know_is_refused_rather_than_dropped(state: Path) -> None:
    conn = sqlite3.connect(state, isolation_level=None)
    conn.execute("CREATE TABLE notes (x)")
    conn.close()
    with pytest.raises(copy.CopyRefused, match="unknown: notes; missing: none"):
        copy.open_source(state)


def test_missing_empty_and_foreign_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(copy.CopyRefused, match="does not exist"):
        copy.open_source(tmp_path / "state.db")
    (tmp_path / "state.db").write_bytes(b"")
    with pytest.raises(copy.CopyRefused, match="is empty"):
        copy.open_source(tmp_path / "state.db")
    (tmp_path / "state.db").write_bytes(b"not a database at all" * 100)
    with pytest.raises(copy.CopyRefused, match="could not be read"):
        copy.open_source(tmp_path / "state.db")


def test_binary_values_stop_the_copy_naming_the_table() -> None:
    with pytest.raises(copy.CopyFailed, match="table messages holds binary data"):
        copy._check_values("messages", (7, b"\x00\x01"))


# --- attachments' bytes ----------------------------------------------------------------


def test_a_files_bytes_missing_or_short_in_postgresql_are_named() -> None:
    a, b = "a" * 64, "b" * 64
    source = snap(held={a: 10, b: 20})
    assert differences(source, snap(held={a: 10, b: 20})) == []
    assert differences(source, snap(held={a: 10, b: 19})) == [
        f"attachment {'b' * 12}: 20 bytes in the data folder, 19 bytes in PostgreSQL"]
    assert differences(source, snap(held={a: 10})) == [
        f"attachment {'b' * 12}: 20 bytes in the data folder, missing in PostgreSQL"]
    assert differences(source, snap()) == [], "a side not read is not compared"


def test_a_snapshot_reads_the_files_the_store_records_from_the_folder(state: Path) -> None:
    root = state.parent / "attachments"
    data = b"some notes\n"
    held = hashlib.sha256(data).hexdigest()
    gone = "c" * 64
    conn = sqlite3.connect(state, isolation_level=None)
    for sha in (held, gone):
        conn.execute("INSERT INTO attachments (sha256, mime_type, bytes, kind, created_at) "
                     "VALUES (?, 'text/plain', 11, 'text', 0)", (sha,))
    conn.close()
    attachments.write_file(root, held, data)
    source = copy.open_source(state)
    try:
        assert copy.snapshot(source, root).held == {held: len(data), gone: -1}
        assert copy.snapshot(source).held is None
    finally:
        source.close()


def test_a_file_changed_on_disk_stops_the_copy(tmp_path: Path) -> None:
    data = b"original"
    sha = hashlib.sha256(data).hexdigest()
    attachments.write_file(tmp_path, sha, data)
    assert copy._file_bytes(tmp_path, sha) == data
    attachments.file_path(tmp_path, sha).write_bytes(b"changed!")
    with pytest.raises(copy.CopyFailed, match="does not hold the bytes its name says"):
        copy._file_bytes(tmp_path, sha)
    with pytest.raises(copy.CopyFailed, match="cannot be read"):
        copy._file_bytes(tmp_path, "d" * 64)
