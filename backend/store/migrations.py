"""Numbered schema migrations, applied at start-up in one transaction.

Each migration is a small function; `MIGRATIONS[i]` brings the schema to
version i + 1.  A database whose version is newer than the code knows is
refused: an older Turnkey must not write a layout it does not understand.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

from backend.errors import StoreTooNew

_M001 = (
    """CREATE TABLE runtime (
        key   TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    )""",
    "INSERT INTO runtime (key, value) VALUES ('epoch', 0)",
    """CREATE TABLE sessions (
        session_id        TEXT PRIMARY KEY,
        title             TEXT NOT NULL,
        cwd               TEXT NOT NULL,
        model             TEXT NOT NULL,
        system_prompt     TEXT,
        parent_session_id TEXT,
        child_session_id  TEXT,
        created_at        TEXT NOT NULL,
        updated_at        TEXT NOT NULL,
        input_tokens      INTEGER NOT NULL DEFAULT 0,
        output_tokens     INTEGER NOT NULL DEFAULT 0,
        cached_tokens     INTEGER NOT NULL DEFAULT 0,
        cost_usd          REAL NOT NULL DEFAULT 0,
        usage_estimated   INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX sessions_updated ON sessions (updated_at DESC, session_id DESC)",
    """CREATE TABLE messages (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id  TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        turn_id     TEXT,
        role        TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'system_note')),
        content     TEXT NOT NULL,
        api_content TEXT,
        tool_calls  TEXT,
        call_id     TEXT,
        tool_name   TEXT,
        status      TEXT,
        note_kind   TEXT,
        active      INTEGER NOT NULL DEFAULT 1,
        compacted   INTEGER NOT NULL DEFAULT 0,
        created_at  TEXT NOT NULL
    )""",
    "CREATE INDEX messages_session ON messages (session_id, id)",
    """CREATE VIRTUAL TABLE messages_fts USING fts5 (
        content, session_id UNINDEXED, content='messages', content_rowid='id'
    )""",
    """CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts (rowid, content, session_id)
        VALUES (new.id, new.content, new.session_id);
    END""",
    """CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content, session_id)
        VALUES ('delete', old.id, old.content, old.session_id);
    END""",
    """CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content, session_id)
        VALUES ('delete', old.id, old.content, old.session_id);
        INSERT INTO messages_fts (rowid, content, session_id)
        VALUES (new.id, new.content, new.session_id);
    END""",
    """CREATE TABLE admissions (
        id             INTEGER PRIMARY KEY AUTOINCREMENT,
        admission_id   TEXT NOT NULL UNIQUE,
        principal      TEXT NOT NULL,
        session_id     TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        request_id     TEXT NOT NULL,
        payload_json   TEXT NOT NULL,
        payload_digest TEXT NOT NULL,
        status         TEXT NOT NULL
                       CHECK (status IN ('queued', 'started', 'unknown', 'terminal')),
        outcome        TEXT CHECK (outcome IN
                       ('completed', 'failed', 'interrupted', 'cancelled', 'rejected')),
        owner_epoch    INTEGER,
        turn_id        TEXT,
        created_at     TEXT NOT NULL,
        started_at     TEXT,
        settled_at     TEXT,
        final_text     TEXT,
        failure_reason TEXT,
        UNIQUE (principal, session_id, request_id)
    )""",
    "CREATE INDEX admissions_queue ON admissions (session_id, status, id)",
    "CREATE INDEX admissions_status ON admissions (status)",
    """CREATE TABLE events (
        session_id   TEXT NOT NULL,
        seq          INTEGER NOT NULL,
        type         TEXT NOT NULL,
        turn_id      TEXT,
        admission_id TEXT,
        ts           TEXT NOT NULL,
        data         TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID""",
)


def _m001(conn: sqlite3.Connection) -> None:
    # executescript would COMMIT behind our back; statements run one by one instead.
    for sql in _M001:
        conn.execute(sql)


_M002 = (
    # One row per session while a turn holds it: the room card (see turn/lease.py).
    """CREATE TABLE turn_leases (
        session_id  TEXT PRIMARY KEY,
        holder      TEXT NOT NULL,
        pid         INTEGER NOT NULL,
        boot_token  TEXT NOT NULL,
        epoch       INTEGER NOT NULL,
        turn_id     TEXT NOT NULL,
        acquired_at REAL NOT NULL,
        expires_at  REAL NOT NULL
    )""",
    """CREATE TABLE approvals (
        approval_id TEXT PRIMARY KEY,
        session_id  TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        turn_id     TEXT NOT NULL,
        call_id     TEXT NOT NULL,
        tool        TEXT NOT NULL,
        summary     TEXT NOT NULL,
        reason      TEXT NOT NULL,
        rule_key    TEXT NOT NULL,
        status      TEXT NOT NULL CHECK (status IN ('pending', 'allowed', 'denied', 'expired')),
        decision    TEXT CHECK (decision IN ('once', 'session', 'always', 'deny')),
        epoch       INTEGER NOT NULL,
        created_at  TEXT NOT NULL,
        expires_at  TEXT NOT NULL,
        decided_at  TEXT
    )""",
    "CREATE INDEX approvals_pending ON approvals (status, session_id)",
    # session_id NULL: an `always` rule for every session; set: a `session` rule.
    """CREATE TABLE approval_rules (
        rule_id    TEXT PRIMARY KEY,
        session_id TEXT REFERENCES sessions (session_id) ON DELETE CASCADE,
        tool       TEXT NOT NULL,
        pattern    TEXT NOT NULL,
        created_at TEXT NOT NULL
    )""",
    """CREATE TABLE checkpoints (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id   TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        turn_id      TEXT NOT NULL,
        call_id      TEXT NOT NULL,
        path         TEXT NOT NULL,
        existed      INTEGER NOT NULL,
        content_hash TEXT,
        blob_path    TEXT,
        restored_at  TEXT,
        created_at   TEXT NOT NULL
    )""",
    "CREATE INDEX checkpoints_turn ON checkpoints (session_id, turn_id, id)",
    # Structured extras of a tool result (exit code, diff, spill path, duration).
    "ALTER TABLE messages ADD COLUMN meta TEXT",
)


def _m002(conn: sqlite3.Connection) -> None:
    for sql in _M002:
        conn.execute(sql)


def _m003(conn: sqlite3.Connection) -> None:
    # The cost ledger: one row per (session, provider, model, task), summed per call.
    conn.execute("""CREATE TABLE usage (
        session_id    TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        provider      TEXT NOT NULL,
        model         TEXT NOT NULL,
        task          TEXT NOT NULL CHECK (task IN ('turn', 'compression', 'title')),
        calls         INTEGER NOT NULL DEFAULT 0,
        input_tokens  INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cached_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd      REAL NOT NULL DEFAULT 0,
        estimated     INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (session_id, provider, model, task)
    )""")


_M004 = (
    # Each session's number of messages, kept by triggers so that every writer (the store,
    # a foreign-key cascade, a test seeding rows with plain SQL) keeps it right, and the
    # session summary reads it without counting rows (see sessions.to_session).
    "ALTER TABLE sessions ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0",
    """UPDATE sessions SET message_count =
        (SELECT COUNT(*) FROM messages m WHERE m.session_id = sessions.session_id)""",
    """CREATE TRIGGER messages_count_insert AFTER INSERT ON messages BEGIN
        UPDATE sessions SET message_count = message_count + 1
        WHERE session_id = new.session_id;
    END""",
    """CREATE TRIGGER messages_count_delete AFTER DELETE ON messages BEGIN
        UPDATE sessions SET message_count = message_count - 1
        WHERE session_id = old.session_id;
    END""",
    # Nothing moves a message to another session today; should anything ever, both follow.
    """CREATE TRIGGER messages_count_move AFTER UPDATE OF session_id ON messages
    WHEN old.session_id IS NOT new.session_id BEGIN
        UPDATE sessions SET message_count = message_count - 1
        WHERE session_id = old.session_id;
        UPDATE sessions SET message_count = message_count + 1
        WHERE session_id = new.session_id;
    END""",
)


def _m004(conn: sqlite3.Connection) -> None:
    for sql in _M004:
        conn.execute(sql)


_M005 = (
    # Context compression (backend/compress): the wire copy of pruned tool-call arguments
    # (people keep seeing the originals), each session's guard state, and one compressor
    # per session at a time.
    "ALTER TABLE messages ADD COLUMN api_tool_calls TEXT",
    "ALTER TABLE sessions ADD COLUMN compress_failures INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE sessions ADD COLUMN compress_cooldown_until REAL NOT NULL DEFAULT 0",
    "ALTER TABLE sessions ADD COLUMN compress_ineffective INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE sessions ADD COLUMN compress_probe_after REAL NOT NULL DEFAULT 0",
    """CREATE TABLE compression_locks (
        session_id  TEXT PRIMARY KEY REFERENCES sessions (session_id) ON DELETE CASCADE,
        holder      TEXT NOT NULL,
        pid         INTEGER NOT NULL,
        boot_token  TEXT NOT NULL,
        acquired_at REAL NOT NULL,
        expires_at  REAL NOT NULL
    )""",
)


def _m005(conn: sqlite3.Connection) -> None:
    for sql in _M005:
        conn.execute(sql)


def _m006(conn: sqlite3.Connection) -> None:
    # Extra principals minted by token.create.  Only a SHA-256 of the secret is kept: the
    # secret itself is shown once, in token.create's result, and is never written anywhere.
    conn.execute("""CREATE TABLE tokens (
        token_id   TEXT PRIMARY KEY,
        token_hash TEXT NOT NULL UNIQUE,
        scopes     TEXT NOT NULL,
        label      TEXT NOT NULL,
        created_at TEXT NOT NULL,
        revoked    INTEGER NOT NULL DEFAULT 0,
        revoked_at TEXT
    )""")


def _m007(conn: sqlite3.Connection) -> None:
    # Whether a person chose the title.  An untitled session is named from its first prompt
    # (store/sessions.name_untitled); until now the only sign of one was the default title, so
    # a session still called that with nothing ever submitted is the one taken as untitled.
    conn.execute("ALTER TABLE sessions ADD COLUMN titled INTEGER NOT NULL DEFAULT 1")
    conn.execute("""UPDATE sessions SET titled = 0 WHERE title = 'New session' AND NOT EXISTS
                    (SELECT 1 FROM admissions a WHERE a.session_id = sessions.session_id)""")


def _m008(conn: sqlite3.Connection) -> None:
    # A turn's rows (open_calls at turn close, under the write lock, read them twice), and the
    # model's view of a session (for_model, every request): both scanned the whole session.
    conn.execute("CREATE INDEX messages_turn ON messages (session_id, turn_id, role)")
    conn.execute("CREATE INDEX messages_model ON messages (session_id, id) "
                 "WHERE active = 1 AND compacted = 0")


def _m009(conn: sqlite3.Connection) -> None:
    # What a compression takes out of the model's view: every row strictly between the two ids,
    # one row per compression, written in its commit.  Flagging each row `compacted` instead
    # rewrote the whole session (100k rows: half a second holding the single writer).
    conn.execute("""CREATE TABLE compacted_ranges (
        session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        after_id   INTEGER NOT NULL,
        before_id  INTEGER NOT NULL,
        PRIMARY KEY (session_id, after_id, before_id)
    ) WITHOUT ROWID""")


def _m010(conn: sqlite3.Connection) -> None:
    # Scheduled prompts (store/schedules.py).  `principal` is the token that created the
    # schedule; `new_session` the JSON of the session each firing starts (when `session_id`
    # is null).  Times are UTC RFC 3339; `next_fire_at` null: it fires no more.
    conn.execute("""CREATE TABLE schedules (
        schedule_id       TEXT PRIMARY KEY,
        principal         TEXT NOT NULL,
        session_id        TEXT,
        new_session       TEXT,
        text              TEXT NOT NULL,
        cron              TEXT,
        at                TEXT,
        timezone          TEXT NOT NULL,
        missed            TEXT NOT NULL CHECK (missed IN ('run_once', 'skip')),
        enabled           INTEGER NOT NULL,
        disabled_reason   TEXT,
        next_fire_at      TEXT,
        last_fired_at     TEXT,
        last_admission_id TEXT,
        last_session_id   TEXT,
        created_at        TEXT NOT NULL,
        updated_at        TEXT NOT NULL,
        CHECK ((session_id IS NULL) != (new_session IS NULL)),
        CHECK ((cron IS NULL) != (at IS NULL))
    )""")
    conn.execute("CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE enabled")
    # One row per firing: its primary key is what makes a second firing of the same
    # (schedule, time) impossible, whichever process or restart tries it.
    conn.execute("""CREATE TABLE schedule_fires (
        schedule_id  TEXT NOT NULL REFERENCES schedules (schedule_id) ON DELETE CASCADE,
        fire_at      TEXT NOT NULL,
        admission_id TEXT,
        session_id   TEXT,
        PRIMARY KEY (schedule_id, fire_at)
    ) WITHOUT ROWID""")


def _m011(conn: sqlite3.Connection) -> None:
    # Sub-agents (the delegate tool): a child session names the session and the tool call
    # that started it.  Not parent_session_id, which is compression's rotation.  Deleting the
    # parent keeps the child, unlinked, so its work stays in the list.  One child per call:
    # a retried call finds its child instead of starting a second.
    conn.execute("ALTER TABLE sessions ADD COLUMN delegated_from TEXT "
                 "REFERENCES sessions (session_id) ON DELETE SET NULL")
    conn.execute("ALTER TABLE sessions ADD COLUMN delegated_call TEXT")
    conn.execute("CREATE UNIQUE INDEX sessions_delegated ON sessions (delegated_from, delegated_call) "
                 "WHERE delegated_from IS NOT NULL")
    # The session list shows sessions people started; this keeps its page an index walk.
    conn.execute("CREATE INDEX sessions_top ON sessions (updated_at DESC, session_id DESC) "
                 "WHERE delegated_from IS NULL")


def _m012(conn: sqlite3.Connection) -> None:
    # Messaging doors (backend/doors/).  A room's binding to a session, and how far into that
    # session's events the room has been sent: the event log is the door's outbox, written in
    # the same transaction as what it reports.  door_sent keeps the platform's id of a message
    # the door posted (a reply it edits, an approval a reaction answers); door_outbox holds
    # the door's own replies (refusals, command answers) until sent; door_inbox the platform
    # messages already acted on, so a redelivered command acts once; door_cursor where the
    # door's sync left off.
    conn.execute("""CREATE TABLE door_rooms (
        door          TEXT NOT NULL,
        room_id       TEXT NOT NULL,
        session_id    TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        delivered_seq INTEGER NOT NULL,
        bound_at      TEXT NOT NULL,
        PRIMARY KEY (door, room_id)
    ) WITHOUT ROWID""")
    conn.execute("CREATE INDEX door_rooms_session ON door_rooms (session_id)")
    conn.execute("""CREATE TABLE door_sent (
        door     TEXT NOT NULL,
        room_id  TEXT NOT NULL,
        key      TEXT NOT NULL,
        event_id TEXT NOT NULL,
        PRIMARY KEY (door, room_id, key)
    ) WITHOUT ROWID""")
    conn.execute("CREATE INDEX door_sent_event ON door_sent (door, event_id)")
    conn.execute("""CREATE TABLE door_outbox (
        door      TEXT NOT NULL,
        room_id   TEXT NOT NULL,
        key       TEXT NOT NULL,
        content   TEXT NOT NULL,
        queued_at REAL NOT NULL,
        sent_at   REAL,
        PRIMARY KEY (door, room_id, key)
    ) WITHOUT ROWID""")
    conn.execute("CREATE INDEX door_outbox_unsent ON door_outbox (door, queued_at) "
                 "WHERE sent_at IS NULL")
    conn.execute("""CREATE TABLE door_inbox (
        door       TEXT NOT NULL,
        event_id   TEXT NOT NULL,
        handled_at REAL NOT NULL,
        PRIMARY KEY (door, event_id)
    ) WITHOUT ROWID""")
    conn.execute("""CREATE TABLE door_cursor (
        door  TEXT PRIMARY KEY,
        since TEXT NOT NULL
    ) WITHOUT ROWID""")


def _m013(conn: sqlite3.Connection) -> None:
    # A token may expire (token.create's expires_in_s): the instant, as RFC 3339 UTC text like
    # created_at, compared as text (one fixed format, so text order is time order).  Null:
    # it never expires, as every token minted before this did not.
    conn.execute("ALTER TABLE tokens ADD COLUMN expires_at TEXT")


def _m014(conn: sqlite3.Connection) -> None:
    # The provider a session's turns start on (session.update's `provider`), a name of
    # config.toml's [providers.NAME].  Null: the default provider, as for every session
    # made before this.
    conn.execute("ALTER TABLE sessions ADD COLUMN provider TEXT")


def _m015(conn: sqlite3.Connection) -> None:
    # Branches and answers (store/answers.py, store/branches.py).  A session forked at one of
    # another's prompts names that session and the prompt's message id; deleting the original
    # keeps the branch, unlinked.  `view_changes` counts the times rows of the session left or
    # rejoined the model's view because another answer to a prompt was chosen (regenerate,
    # session.choose): the model's view, kept between requests, is rebuilt when it moves.
    conn.execute("ALTER TABLE sessions ADD COLUMN forked_from TEXT "
                 "REFERENCES sessions (session_id) ON DELETE SET NULL")
    conn.execute("ALTER TABLE sessions ADD COLUMN forked_at TEXT")
    conn.execute("ALTER TABLE sessions ADD COLUMN view_changes INTEGER NOT NULL DEFAULT 0")
    conn.execute("CREATE INDEX sessions_forked ON sessions (forked_from, forked_at) "
                 "WHERE forked_from IS NOT NULL")


def _m016(conn: sqlite3.Connection) -> None:
    # Attachments (store/attachments.py): the files held (their bytes are files in
    # DIR/attachments/, named by SHA-256) and the files each admission names, in order.
    conn.execute("""CREATE TABLE attachments (
        sha256     TEXT PRIMARY KEY,
        mime_type  TEXT NOT NULL,
        bytes      INTEGER NOT NULL,
        kind       TEXT NOT NULL CHECK (kind IN ('image', 'pdf', 'text')),
        width      INTEGER,
        height     INTEGER,
        pages      INTEGER,
        thumbnail  TEXT,
        created_at REAL NOT NULL
    ) WITHOUT ROWID""")
    conn.execute("CREATE INDEX attachments_thumbnail ON attachments (thumbnail) "
                 "WHERE thumbnail IS NOT NULL")
    conn.execute("""CREATE TABLE admission_attachments (
        admission_id TEXT NOT NULL REFERENCES admissions (admission_id) ON DELETE CASCADE,
        position     INTEGER NOT NULL,
        sha256       TEXT NOT NULL,
        name         TEXT NOT NULL,
        PRIMARY KEY (admission_id, position)
    ) WITHOUT ROWID""")
    conn.execute("CREATE INDEX admission_attachments_sha ON admission_attachments (sha256)")


def _m017(conn: sqlite3.Connection) -> None:
    # Questions back to the person (store/questions.py): the `clarify` tool's question, its
    # choices (a JSON list) and, once it is no longer pending, its answer and who gave it.
    conn.execute("""CREATE TABLE questions (
        question_id           TEXT PRIMARY KEY,
        session_id            TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        turn_id               TEXT NOT NULL,
        call_id               TEXT NOT NULL,
        question              TEXT NOT NULL,
        choices               TEXT NOT NULL,
        allow_other           INTEGER NOT NULL,
        status                TEXT NOT NULL
            CHECK (status IN ('pending', 'answered', 'expired', 'cancelled')),
        created_at            TEXT NOT NULL,
        expires_at            TEXT NOT NULL,
        answer                TEXT,
        choice                INTEGER,
        answered_at           TEXT,
        answered_by           TEXT CHECK (answered_by IN ('user', 'timeout', 'stopped')),
        followup_admission_id TEXT
    )""")
    conn.execute("CREATE INDEX questions_pending ON questions (status, session_id)")


def _m018(conn: sqlite3.Connection) -> None:
    # The background review's model calls go in the cost ledger as task 'review'.  SQLite
    # cannot change a CHECK, so the table is rebuilt under its own name: the new one made,
    # every row copied, the old one dropped, the new one renamed (nothing references `usage`,
    # and its only index is its primary key, which is made with it).
    conn.execute("""CREATE TABLE usage_new (
        session_id    TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        provider      TEXT NOT NULL,
        model         TEXT NOT NULL,
        task          TEXT NOT NULL CHECK (task IN ('turn', 'compression', 'title', 'review')),
        calls         INTEGER NOT NULL DEFAULT 0,
        input_tokens  INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cached_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd      REAL NOT NULL DEFAULT 0,
        estimated     INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (session_id, provider, model, task)
    )""")
    columns = ("session_id, provider, model, task, calls, input_tokens, output_tokens, "
               "cached_tokens, cost_usd, estimated")
    conn.execute(f"INSERT INTO usage_new ({columns}) SELECT {columns} FROM usage")
    conn.execute("DROP TABLE usage")
    conn.execute("ALTER TABLE usage_new RENAME TO usage")


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    _m001, _m002, _m003, _m004, _m005, _m006, _m007, _m008, _m009, _m010, _m011, _m012,
    _m013, _m014, _m015, _m016, _m017, _m018,
]
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection, name: str = "this database") -> int:
    """Brings the schema to SCHEMA_VERSION in one transaction; returns the version.
    `name` is how a refusal names the database (its path, when the caller knows it)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
        current = int(row[0])
        if current > SCHEMA_VERSION:
            raise StoreTooNew(
                f"{name} has schema version {current}, but this Turnkey knows only "
                f"up to {SCHEMA_VERSION}; run a newer Turnkey or use another data folder"
            )
        now = datetime.now(UTC).isoformat()
        for version in range(current + 1, SCHEMA_VERSION + 1):
            MIGRATIONS[version - 1](conn)
            conn.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                (version, now),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return SCHEMA_VERSION
