"""The PostgreSQL store's schema: numbered migrations, applied at start-up in one transaction.

The tables are store/schema.py's, their DDL generated from it (PostgreSQL's types: times
kept as epoch seconds are DOUBLE PRECISION, row ids are identities).  What only this store
has is written here, apart: full-text search is a generated `tsvector` column with a GIN
index (instead of FTS5), accents folded by `unaccent`, and the message counter is kept by a
plpgsql trigger.  Its own version line started at 1 with the SQLite file's version 11;
version 2 is the SQLite file's 12, version 4 its 13, version 5 its 14, version 6 its 15,
version 7 its 16, version 8 its 17, version 9 its 18 (`SQLITE_EQUIVALENT`; version 3 added a
column only this store has).  A later change to the layout changes the declaration and adds a
step here and a migration to store/migrations.py.

`backends` is this store's own (declared `only` on PostgreSQL): one row per running backend
process (its epoch), with a heartbeat, so a backend on another host can tell a live peer's
work from a dead one's without pids (store/peers.py).

Starting migrations takes a transaction-scoped advisory lock, so two backends
starting at once on an empty database do not both create it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from backend.errors import StoreTooNew
from backend.store import schema

SEARCHED_CHARS = 100_000  # of each message, in the search column
MIGRATE_LOCK = 7_305_001  # pg_advisory_xact_lock key: one migrating backend at a time

# --- what only PostgreSQL has (the tables themselves are store/schema.py's) -------------

_BEFORE_TABLES: tuple[str, ...] = (
    # Search folds accents, as SQLite's FTS5 (unicode61) does: "naive" finds "naïve".
    # unaccent is a trusted extension: a database's owner may create it.
    "CREATE EXTENSION IF NOT EXISTS unaccent",
    """CREATE FUNCTION tk_fold(text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $$ SELECT unaccent('unaccent'::regdictionary, $1) $$""",
)

_AFTER_TABLES: tuple[str, ...] = (
    "INSERT INTO runtime (key, value) VALUES ('epoch', 0)",
    # Search instead of FTS5: a generated column, the messages table's last, with a GIN index.
    # A tsvector holds at most 1 MB: a message is searched by its first SEARCHED_CHARS.
    f"""ALTER TABLE messages ADD COLUMN search TSVECTOR GENERATED ALWAYS AS
        (to_tsvector('simple', tk_fold(left(content, {SEARCHED_CHARS})))) STORED""",
    "CREATE INDEX messages_search ON messages USING GIN (search)",
    # The session's number of messages, kept by a trigger like the SQLite file's, so every
    # writer (a cascade, a copy, a test's plain SQL) keeps it right.
    """CREATE FUNCTION messages_count() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            UPDATE sessions SET message_count = message_count - 1
            WHERE session_id = OLD.session_id;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            UPDATE sessions SET message_count = message_count + 1
            WHERE session_id = NEW.session_id;
        END IF;
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER messages_count_insert AFTER INSERT OR DELETE ON messages "
    "FOR EACH ROW EXECUTE FUNCTION messages_count()",
    "CREATE TRIGGER messages_count_move AFTER UPDATE OF session_id ON messages FOR EACH ROW "
    "WHEN (OLD.session_id IS DISTINCT FROM NEW.session_id) EXECUTE FUNCTION messages_count()",
)
PG_ONLY_COLUMNS = (("messages", "search"),)  # beside the declaration's (a test compares)
PG_ONLY_INDEXES = ("messages_search",)

# --- the version line ----------------------------------------------------------------

# Each version's new tables, by name, parents first; their DDL is generated from
# store/schema.py.  A blank database takes every step, as one at an older version takes the
# steps after it.  Every table of the declaration is created by exactly one step
# (tests/unit/test_schema_declaration.py).
STEP_TABLES: tuple[tuple[str, ...], ...] = (
    ("runtime", "sessions", "messages", "admissions", "events", "turn_leases", "approvals",
     "approval_rules", "checkpoints", "usage", "compression_locks", "tokens",
     "compacted_ranges", "schedules", "schedule_fires", "backends"),
    # Messaging doors: the SQLite file's version 12.
    ("door_rooms", "door_sent", "door_outbox", "door_inbox", "door_cursor"),
    # Attachments: the SQLite file's version 16, and the bytes this store holds itself.
    ("attachments", "admission_attachments", "attachment_data", "attachment_partial"),
    # Questions back to the person: the SQLite file's version 17.
    ("questions",),
)
STEPS: tuple[tuple[str, ...], ...] = (
    (*_BEFORE_TABLES, *schema.pg_ddl(STEP_TABLES[0]), *_AFTER_TABLES),
    schema.pg_ddl(STEP_TABLES[1]),
    # A peer whose heartbeat stopped is declared dead, for everyone, at once (store/peers.py).
    # Step 1 creates `backends` from today's declaration, so a blank database has it already.
    ("ALTER TABLE backends ADD COLUMN IF NOT EXISTS dead_at DOUBLE PRECISION",),
    # A token's expiry: the SQLite file's version 13.  Step 1 is today's declaration, so a
    # blank database has the column already.
    ("ALTER TABLE tokens ADD COLUMN IF NOT EXISTS expires_at TEXT",),
    # A session's own provider: the SQLite file's version 14.  Step 1 is today's
    # declaration, so a blank database has the column already.
    ("ALTER TABLE sessions ADD COLUMN IF NOT EXISTS provider TEXT",),
    # Branches and answers: the SQLite file's version 15 (store/answers.py, store/branches.py).
    # Step 1 is today's declaration, so a blank database has them already.
    ("ALTER TABLE sessions ADD COLUMN IF NOT EXISTS forked_from TEXT "
     "REFERENCES sessions (session_id) ON DELETE SET NULL",
     "ALTER TABLE sessions ADD COLUMN IF NOT EXISTS forked_at TEXT",
     "ALTER TABLE sessions ADD COLUMN IF NOT EXISTS view_changes BIGINT NOT NULL DEFAULT 0",
     "CREATE INDEX IF NOT EXISTS sessions_forked ON sessions (forked_from, forked_at) "
     "WHERE forked_from IS NOT NULL"),
    # Attachments: the SQLite file's version 16 (store/attachments.py).
    schema.pg_ddl(STEP_TABLES[2]),
    # Questions back to the person: the SQLite file's version 17 (store/questions.py).
    schema.pg_ddl(STEP_TABLES[3]),
    # The background review's calls in the cost ledger: the SQLite file's version 18.  A
    # column's CHECK is named `<table>_<column>_check`; step 1 is today's declaration, so a
    # blank database already has the new one, which this replaces with itself.
    ("ALTER TABLE usage DROP CONSTRAINT IF EXISTS usage_task_check, ADD CONSTRAINT "
     "usage_task_check CHECK (task IN ('turn', 'compression', 'title', 'review'))",),
)
SCHEMA_VERSION = len(STEPS)
SQLITE_EQUIVALENT = 18  # the SQLite file's version this schema's tables match


def migrate(conn: Any, name: str = "this database") -> int:
    """Brings the schema to SCHEMA_VERSION in one transaction; returns the version.
    `conn` is a psycopg connection in autocommit mode."""
    conn.execute("BEGIN")
    try:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                     "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
        row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
        current = int(row[0])
        if current > SCHEMA_VERSION:
            raise StoreTooNew(
                f"{name} has schema version {current}, but this Turnkey knows only up to "
                f"{SCHEMA_VERSION}; run a newer Turnkey or point store at another database")
        now = datetime.now(UTC).isoformat()
        for version in range(current + 1, SCHEMA_VERSION + 1):
            _apply(conn, STEPS[version - 1])
            conn.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)",
                         (version, now))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return SCHEMA_VERSION


def _apply(conn: Any, statements: Sequence[str]) -> None:
    for sql in statements:
        conn.execute(sql)  # no parameters: psycopg sends the text as it is
