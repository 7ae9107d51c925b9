"""Every durable table at head, declared once: columns, keys, indexes, checks, references.

Both stores are held to this declaration.  PostgreSQL's tables are generated from it
(`pg_ddl`, used by store/pg_schema.py).  The SQLite file keeps its numbered migrations
(store/migrations.py), because an existing file must upgrade step by step; a test migrates
a blank file to head and compares it with this, column by column
(tests/unit/test_schema_declaration.py), and another does the same for a PostgreSQL
database (tests/integration/test_pg_schema.py).  store/copy.py takes its tables, their
columns and their order from here.

Types are neutral: TEXT, INT (a flag, a pid: INTEGER on both), BIG (a count, an id, a seq:
INTEGER on SQLite, BIGINT on PostgreSQL), REAL (epoch seconds, dollars: DOUBLE PRECISION on
PostgreSQL), BLOB (bytes: BYTEA on PostgreSQL).  An `identity` column is the table's row
id: AUTOINCREMENT on SQLite, an identity on PostgreSQL.  `notnull` is what SQLite holds
to: a primary key's columns are NOT NULL on PostgreSQL whatever it says, but a rowid table's
key (a TEXT one) takes NULL on SQLite, an old quirk of its, unless the column says NOT NULL.
Check and partial-index conditions are written in SQL both stores read.

What one store has and the other has not is declared where it lives: SQLite's FTS5 index and
its triggers in its migrations, PostgreSQL's search column, its triggers and the `backends`
table's heartbeat use in store/pg_schema.py and store/peers.py (`backends` is declared here,
`only` on PostgreSQL).

Tables are listed parents first: a table comes after every table it references, which is
the order the copy fills them in.
"""

from __future__ import annotations

from dataclasses import dataclass

TEXT, INT, BIG, REAL, BLOB = "text", "int", "big", "real", "blob"
SQLITE, POSTGRESQL = "sqlite", "postgresql"  # the dialects of store/db.py
_SQLITE_TYPES = {TEXT: "TEXT", INT: "INTEGER", BIG: "INTEGER", REAL: "REAL", BLOB: "BLOB"}
_PG_TYPES = {TEXT: "TEXT", INT: "INTEGER", BIG: "BIGINT", REAL: "DOUBLE PRECISION",
             BLOB: "BYTEA"}


@dataclass(frozen=True)
class Ref:
    """A foreign key: the referenced table and column, and what deleting its row does."""

    table: str
    column: str
    on_delete: str  # CASCADE or SET NULL


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    notnull: bool = False
    default: str | None = None  # a SQL literal
    unique: bool = False
    check: str | None = None
    ref: Ref | None = None
    identity: bool = False  # the row id (always the primary key alone)


@dataclass(frozen=True)
class Index:
    name: str
    columns: tuple[str, ...]  # each may end in " DESC"
    unique: bool = False
    where: str | None = None


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]  # the primary key's columns
    indexes: tuple[Index, ...] = ()
    unique: tuple[tuple[str, ...], ...] = ()  # table-level UNIQUE constraints
    checks: tuple[str, ...] = ()  # table-level CHECK constraints
    without_rowid: bool = False  # SQLite's storage only; nothing else differs
    only: str | None = None  # the one dialect that has this table, if not both

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)

    @property
    def identity(self) -> str | None:
        return next((c.name for c in self.columns if c.identity), None)


def _nn(name: str, type_: str, *, default: str | None = None, unique: bool = False,
        check: str | None = None, ref: Ref | None = None) -> Column:
    """A NOT NULL column (most are): keeps the declaration about one line a column."""
    return Column(name, type_, notnull=True, default=default, unique=unique, check=check, ref=ref)


_SESSION = Ref("sessions", "session_id", "CASCADE")


def _counter(name: str, type_: str = BIG) -> Column:
    return _nn(name, type_, default="0")


TABLES: tuple[Table, ...] = (
    Table("runtime", (Column("key", TEXT), _nn("value", BIG)), key=("key",)),
    Table("sessions", (
        Column("session_id", TEXT), _nn("title", TEXT), _nn("cwd", TEXT), _nn("model", TEXT),
        Column("system_prompt", TEXT), Column("parent_session_id", TEXT),
        Column("child_session_id", TEXT), _nn("created_at", TEXT), _nn("updated_at", TEXT),
        _counter("input_tokens"), _counter("output_tokens"), _counter("cached_tokens"),
        _counter("cost_usd", REAL), _counter("usage_estimated", INT),
        _counter("message_count"),  # kept by triggers on messages, in each store
        _counter("compress_failures", INT), _counter("compress_cooldown_until", REAL),
        _counter("compress_ineffective", INT), _counter("compress_probe_after", REAL),
        _nn("titled", INT, default="1"),
        Column("delegated_from", TEXT, ref=Ref("sessions", "session_id", "SET NULL")),
        Column("delegated_call", TEXT),
        Column("provider", TEXT),  # null: the default provider (migration 14)
        # A branch: the session it was forked from and the prompt it was forked at (migration
        # 15); the times an answer's choice changed the model's view (store/answers.py).
        Column("forked_from", TEXT, ref=Ref("sessions", "session_id", "SET NULL")),
        Column("forked_at", TEXT), _counter("view_changes"),
    ), key=("session_id",), indexes=(
        Index("sessions_updated", ("updated_at DESC", "session_id DESC")),
        Index("sessions_delegated", ("delegated_from", "delegated_call"), unique=True,
              where="delegated_from IS NOT NULL"),
        Index("sessions_top", ("updated_at DESC", "session_id DESC"),
              where="delegated_from IS NULL"),
        Index("sessions_forked", ("forked_from", "forked_at"), where="forked_from IS NOT NULL"),
    )),
    Table("messages", (
        Column("id", BIG, identity=True), _nn("session_id", TEXT, ref=_SESSION),
        Column("turn_id", TEXT),
        _nn("role", TEXT, check="role IN ('user', 'assistant', 'tool', 'system_note')"),
        _nn("content", TEXT), Column("api_content", TEXT), Column("tool_calls", TEXT),
        Column("call_id", TEXT), Column("tool_name", TEXT), Column("status", TEXT),
        Column("note_kind", TEXT), _nn("active", INT, default="1"), _counter("compacted", INT),
        _nn("created_at", TEXT), Column("meta", TEXT), Column("api_tool_calls", TEXT),
    ), key=("id",), indexes=(
        Index("messages_session", ("session_id", "id")),
        Index("messages_turn", ("session_id", "turn_id", "role")),
        Index("messages_model", ("session_id", "id"), where="active = 1 AND compacted = 0"),
    )),
    Table("admissions", (
        Column("id", BIG, identity=True), _nn("admission_id", TEXT, unique=True),
        _nn("principal", TEXT), _nn("session_id", TEXT, ref=_SESSION), _nn("request_id", TEXT),
        _nn("payload_json", TEXT), _nn("payload_digest", TEXT),
        _nn("status", TEXT, check="status IN ('queued', 'started', 'unknown', 'terminal')"),
        Column("outcome", TEXT, check="outcome IN "
               "('completed', 'failed', 'interrupted', 'cancelled', 'rejected')"),
        Column("owner_epoch", BIG), Column("turn_id", TEXT), _nn("created_at", TEXT),
        Column("started_at", TEXT), Column("settled_at", TEXT), Column("final_text", TEXT),
        Column("failure_reason", TEXT),
    ), key=("id",), unique=(("principal", "session_id", "request_id"),), indexes=(
        Index("admissions_queue", ("session_id", "status", "id")),
        Index("admissions_status", ("status",)),
    )),
    Table("events", (
        _nn("session_id", TEXT), _nn("seq", BIG), _nn("type", TEXT), Column("turn_id", TEXT),
        Column("admission_id", TEXT), _nn("ts", TEXT), _nn("data", TEXT),
    ), key=("session_id", "seq"), without_rowid=True),
    Table("turn_leases", (
        Column("session_id", TEXT), _nn("holder", TEXT), _nn("pid", INT), _nn("boot_token", TEXT),
        _nn("epoch", BIG), _nn("turn_id", TEXT), _nn("acquired_at", REAL), _nn("expires_at", REAL),
    ), key=("session_id",)),
    Table("approvals", (
        Column("approval_id", TEXT), _nn("session_id", TEXT, ref=_SESSION), _nn("turn_id", TEXT),
        _nn("call_id", TEXT), _nn("tool", TEXT), _nn("summary", TEXT), _nn("reason", TEXT),
        _nn("rule_key", TEXT),
        _nn("status", TEXT, check="status IN ('pending', 'allowed', 'denied', 'expired')"),
        Column("decision", TEXT, check="decision IN ('once', 'session', 'always', 'deny')"),
        _nn("epoch", BIG), _nn("created_at", TEXT), _nn("expires_at", TEXT),
        Column("decided_at", TEXT),
    ), key=("approval_id",), indexes=(Index("approvals_pending", ("status", "session_id")),)),
    # session_id NULL: an `always` rule for every session; set: a `session` rule.
    Table("approval_rules", (
        Column("rule_id", TEXT), Column("session_id", TEXT, ref=_SESSION), _nn("tool", TEXT),
        _nn("pattern", TEXT), _nn("created_at", TEXT),
    ), key=("rule_id",)),
    Table("checkpoints", (
        Column("id", BIG, identity=True), _nn("session_id", TEXT, ref=_SESSION), _nn("turn_id", TEXT),
        _nn("call_id", TEXT), _nn("path", TEXT), _nn("existed", INT), Column("content_hash", TEXT),
        Column("blob_path", TEXT), Column("restored_at", TEXT), _nn("created_at", TEXT),
    ), key=("id",), indexes=(Index("checkpoints_turn", ("session_id", "turn_id", "id")),)),
    Table("usage", (
        _nn("session_id", TEXT, ref=_SESSION), _nn("provider", TEXT), _nn("model", TEXT),
        _nn("task", TEXT, check="task IN ('turn', 'compression', 'title', 'review')"),
        _counter("calls"), _counter("input_tokens"), _counter("output_tokens"),
        _counter("cached_tokens"), _counter("cost_usd", REAL), _counter("estimated", INT),
    ), key=("session_id", "provider", "model", "task")),
    Table("compression_locks", (
        Column("session_id", TEXT, ref=_SESSION), _nn("holder", TEXT), _nn("pid", INT),
        _nn("boot_token", TEXT), _nn("acquired_at", REAL), _nn("expires_at", REAL),
    ), key=("session_id",)),
    Table("tokens", (
        Column("token_id", TEXT), _nn("token_hash", TEXT, unique=True), _nn("scopes", TEXT),
        _nn("label", TEXT), _nn("created_at", TEXT), _counter("revoked", INT),
        Column("revoked_at", TEXT),
        Column("expires_at", TEXT),  # null: it never expires (migration 13)
    ), key=("token_id",)),
    Table("compacted_ranges", (
        _nn("session_id", TEXT, ref=_SESSION), _nn("after_id", BIG), _nn("before_id", BIG),
    ), key=("session_id", "after_id", "before_id"), without_rowid=True),
    Table("schedules", (
        Column("schedule_id", TEXT), _nn("principal", TEXT), Column("session_id", TEXT),
        Column("new_session", TEXT), _nn("text", TEXT), Column("cron", TEXT), Column("at", TEXT),
        _nn("timezone", TEXT), _nn("missed", TEXT, check="missed IN ('run_once', 'skip')"),
        _nn("enabled", INT), Column("disabled_reason", TEXT), Column("next_fire_at", TEXT),
        Column("last_fired_at", TEXT), Column("last_admission_id", TEXT),
        Column("last_session_id", TEXT), _nn("created_at", TEXT), _nn("updated_at", TEXT),
    ), key=("schedule_id",), checks=(
        "(session_id IS NULL) != (new_session IS NULL)", "(cron IS NULL) != (at IS NULL)",
    ), indexes=(Index("schedules_due", ("next_fire_at",), where="enabled <> 0"),)),
    Table("schedule_fires", (
        _nn("schedule_id", TEXT, ref=Ref("schedules", "schedule_id", "CASCADE")),
        _nn("fire_at", TEXT), Column("admission_id", TEXT), Column("session_id", TEXT),
    ), key=("schedule_id", "fire_at"), without_rowid=True),
    Table("door_rooms", (
        _nn("door", TEXT), _nn("room_id", TEXT), _nn("session_id", TEXT, ref=_SESSION),
        _nn("delivered_seq", BIG), _nn("bound_at", TEXT),
    ), key=("door", "room_id"), without_rowid=True,
        indexes=(Index("door_rooms_session", ("session_id",)),)),
    Table("door_sent", (
        _nn("door", TEXT), _nn("room_id", TEXT), _nn("key", TEXT), _nn("event_id", TEXT),
    ), key=("door", "room_id", "key"), without_rowid=True,
        indexes=(Index("door_sent_event", ("door", "event_id")),)),
    Table("door_outbox", (
        _nn("door", TEXT), _nn("room_id", TEXT), _nn("key", TEXT), _nn("content", TEXT),
        _nn("queued_at", REAL), Column("sent_at", REAL),
    ), key=("door", "room_id", "key"), without_rowid=True,
        indexes=(Index("door_outbox_unsent", ("door", "queued_at"), where="sent_at IS NULL"),)),
    Table("door_inbox", (_nn("door", TEXT), _nn("event_id", TEXT), _nn("handled_at", REAL)),
          key=("door", "event_id"), without_rowid=True),
    Table("door_cursor", (_nn("door", TEXT), _nn("since", TEXT)), key=("door",),
          without_rowid=True),
    # Attachments (migration 16, store/attachments.py): each file held, whole and checked,
    # once by its SHA-256 (a thumbnail is a file too); the files each admission names, in
    # order.  With SQLite the bytes are files in DIR/attachments/; with PostgreSQL they are
    # `attachment_data`'s parts and an upload in progress is `attachment_partial`'s chunks.
    Table("attachments", (
        _nn("sha256", TEXT), _nn("mime_type", TEXT), _nn("bytes", BIG),
        _nn("kind", TEXT, check="kind IN ('image', 'pdf', 'text')"),
        Column("width", INT), Column("height", INT), Column("pages", INT),
        Column("thumbnail", TEXT), _nn("created_at", REAL),
    ), key=("sha256",), without_rowid=True,
        indexes=(Index("attachments_thumbnail", ("thumbnail",),
                       where="thumbnail IS NOT NULL"),)),
    Table("admission_attachments", (
        _nn("admission_id", TEXT, ref=Ref("admissions", "admission_id", "CASCADE")),
        _nn("position", INT), _nn("sha256", TEXT), _nn("name", TEXT),
    ), key=("admission_id", "position"), without_rowid=True,
        indexes=(Index("admission_attachments_sha", ("sha256",)),)),
    Table("attachment_data", (
        _nn("sha256", TEXT), _nn("part", INT), _nn("data", BLOB),
    ), key=("sha256", "part"), only=POSTGRESQL),
    Table("attachment_partial", (
        _nn("sha256", TEXT), _nn("at", BIG), _nn("data", BLOB), _nn("received_at", REAL),
    ), key=("sha256", "at"), only=POSTGRESQL),
    # Questions the model asked the person (migration 17, store/questions.py): what waits
    # for an answer, and the answer.  `choices` is a JSON list of strings.
    Table("questions", (
        Column("question_id", TEXT), _nn("session_id", TEXT, ref=_SESSION), _nn("turn_id", TEXT),
        _nn("call_id", TEXT), _nn("question", TEXT), _nn("choices", TEXT),
        _nn("allow_other", INT),
        _nn("status", TEXT,
            check="status IN ('pending', 'answered', 'expired', 'cancelled')"),
        _nn("created_at", TEXT), _nn("expires_at", TEXT), Column("answer", TEXT),
        Column("choice", INT), Column("answered_at", TEXT),
        Column("answered_by", TEXT, check="answered_by IN ('user', 'timeout', 'stopped')"),
        Column("followup_admission_id", TEXT),
    ), key=("question_id",), indexes=(Index("questions_pending", ("status", "session_id")),)),
    # Backend processes on a shared database, by epoch, with a heartbeat (store/peers.py).
    Table("backends", (
        Column("epoch", BIG), _nn("host", TEXT), _nn("pid", INT), _nn("pid_start", TEXT),
        _nn("boot_token", TEXT), _nn("started_at", REAL), _nn("heartbeat_at", REAL),
        _counter("stopped", INT),
        Column("dead_at", REAL),  # when a peer declared it dead (its heartbeat stopped)
    ), key=("epoch",), only=POSTGRESQL),
)
BY_NAME = {t.name: t for t in TABLES}


def tables(dialect: str) -> tuple[Table, ...]:
    """The tables `dialect` has, parents first."""
    return tuple(t for t in TABLES if t.only in (None, dialect))


def shared_tables() -> tuple[Table, ...]:
    """The tables both stores have: what the copy fills, in this order."""
    return tuple(t for t in TABLES if t.only is None)


def sqlite_type(column: Column) -> str:
    return _SQLITE_TYPES[column.type]


def pg_type(column: Column) -> str:
    return _PG_TYPES[column.type]


# --- PostgreSQL's DDL ----------------------------------------------------------------


def pg_ddl(names: tuple[str, ...]) -> tuple[str, ...]:
    """CREATE TABLE and CREATE INDEX statements for the tables `names`, in that order."""
    out: list[str] = []
    for name in names:
        table = BY_NAME[name]
        out.append(_pg_table(table))
        out.extend(_pg_index(table, index) for index in table.indexes)
    return tuple(out)


def _pg_table(table: Table) -> str:
    lines = [_pg_column(table, c) for c in table.columns]
    if len(table.key) > 1:
        lines.append(f"PRIMARY KEY ({', '.join(table.key)})")
    lines.extend(f"UNIQUE ({', '.join(u)})" for u in table.unique)
    lines.extend(f"CHECK ({c})" for c in table.checks)
    body = ",\n    ".join(lines)
    return f"CREATE TABLE {table.name} (\n    {body}\n)"


def _pg_column(table: Table, column: Column) -> str:
    parts = [column.name, pg_type(column)]
    if column.identity:
        parts.append("GENERATED BY DEFAULT AS IDENTITY")
    if table.key == (column.name,):
        parts.append("PRIMARY KEY")
    elif column.notnull:
        parts.append("NOT NULL")
    if column.unique:
        parts.append("UNIQUE")
    if column.default is not None:
        parts.append(f"DEFAULT {column.default}")
    if column.check:
        parts.append(f"CHECK ({column.check})")
    if column.ref:
        parts.append(f"REFERENCES {column.ref.table} ({column.ref.column}) "
                     f"ON DELETE {column.ref.on_delete}")
    return " ".join(parts)


def _pg_index(table: Table, index: Index) -> str:
    unique = "UNIQUE " if index.unique else ""
    where = f" WHERE {index.where}" if index.where else ""
    return (f"CREATE {unique}INDEX {index.name} ON {table.name} "
            f"({', '.join(index.columns)}){where}")
