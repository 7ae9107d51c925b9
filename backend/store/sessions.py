"""The sessions table: conversations, their frozen system prompt and usage counters."""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from backend.ids import now
from backend.store import events, snippets
from backend.store.db import POSTGRESQL, Tx
from backend.store.records import Record
from shared.folders import folder_warning
from shared.literals import SessionStatus

UNTITLED = "New session"  # the title of a session nobody named yet (`titled` false)


class SessionRecord(Record, frozen=True):
    """A sessions row."""

    session_id: str
    title: str
    cwd: str
    model: str
    system_prompt: str | None
    parent_session_id: str | None
    child_session_id: str | None
    created_at: str
    updated_at: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cost_usd: float
    usage_estimated: bool
    message_count: int
    compress_failures: int
    compress_cooldown_until: float
    compress_ineffective: int
    compress_probe_after: float
    titled: bool  # a person chose the title; else the first prompt names the session
    delegated_from: str | None = None  # a sub-agent's: the session whose delegate call made it
    delegated_call: str | None = None  # ... and that call's id
    provider: str | None = None  # the provider its turns start on; None: the default one
    forked_from: str | None = None  # a branch's: the session it was forked from (migration 15)
    forked_at: str | None = None  # ... and the message_id of the prompt it was forked at
    view_changes: int = 0  # answers chosen (store/answers.py): part of the model view's token


def insert(tx: Tx, session_id: str, title: str, cwd: str, model: str, titled: bool = True,
           provider: str | None = None) -> None:
    ts = now()
    tx.execute(
        "INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at, titled, "
        "provider) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (session_id, title, cwd, model, ts, ts, titled, provider),
    )


def name_untitled(tx: Tx, session_id: str, title: str) -> bool:
    """Names the session `title` unless it has a title already (a person's, or one a prompt
    gave it); returns whether it did.  Either way the title is then settled: later prompts
    never rename."""
    cur = tx.execute(
        "UPDATE sessions SET title = ?, titled = 1, updated_at = ? WHERE session_id = ? AND titled = 0",
        (title, now(), session_id),
    )
    if cur.rowcount:
        changed(tx, session_id)
    return bool(cur.rowcount)


def row(tx: Tx, session_id: str) -> SessionRecord | None:
    r = tx.one("SELECT * FROM sessions WHERE session_id = ?", (session_id,))
    return SessionRecord.from_row(r) if r is not None else None


def exists(tx: Tx, session_id: str) -> bool:
    return tx.one("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)) is not None


def get(tx: Tx, session_id: str) -> SessionSummary | None:
    r = row(tx, session_id)
    return summary(tx, r) if r else None


def update(tx: Tx, session_id: str, fields: dict[str, Any]) -> None:
    fields = {**fields, "updated_at": now()}
    sets = ", ".join(f"{k} = :{k}" for k in fields)
    tx.execute(f"UPDATE sessions SET {sets} WHERE session_id = :sid", {**fields, "sid": session_id})
    changed(tx, session_id)


def touch(tx: Tx, session_id: str) -> None:
    tx.execute("UPDATE sessions SET updated_at = ? WHERE session_id = ?", (now(), session_id))
    changed(tx, session_id)


def changed(tx: Tx, session_id: str) -> None:
    """Something the session's summary shows changed in this transaction (its status,
    usage, message_count, updated_at, title, model or provider).

    At the end of the transaction, once per session however often this is called, the
    summary as `session.get` would return it then is reported (`SessionChanged`), which
    the edge broadcasts (no seq, to every reader) as `session.updated`, so a session
    browser follows every session without subscribing to each.  Nothing is reported if
    the transaction rolls back, or if the session no longer exists by then.
    """
    tx.before_commit(("session.updated", session_id), lambda t: _report_summary(t, session_id))


def _report_summary(tx: Tx, session_id: str) -> None:
    r = row(tx, session_id)
    if r is not None:
        tx.publish(SessionChanged(ts=now(), summary=summary(tx, r)))


def store_system_prompt(tx: Tx, session_id: str, prompt: str) -> str:
    """Stores the prompt only if none is stored yet; returns the stored one (first wins)."""
    tx.execute(
        "UPDATE sessions SET system_prompt = ? WHERE session_id = ? AND system_prompt IS NULL",
        (prompt, session_id),
    )
    r = tx.one("SELECT system_prompt FROM sessions WHERE session_id = ?", (session_id,))
    assert r is not None
    return str(r[0])


def clear_system_prompt(tx: Tx, session_id: str) -> None:
    """Drops the frozen prompt: the next request builds (and freezes) it again."""
    tx.execute("UPDATE sessions SET system_prompt = NULL WHERE session_id = ?", (session_id,))


def link_rotation(tx: Tx, parent: str, child: str) -> None:
    """Records that `parent`'s conversation continues in `child` (compression's rotation)."""
    tx.execute("UPDATE sessions SET parent_session_id = ? WHERE session_id = ?",
               (parent, child))
    tx.execute("UPDATE sessions SET child_session_id = ? WHERE session_id = ?",
               (child, parent))


class Counts(Protocol):
    """One call's usage, as a provider reports it (the wire's `Usage` is one)."""

    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cached_tokens(self) -> int: ...
    @property
    def cost_usd(self) -> float: ...
    @property
    def estimated(self) -> bool: ...


def add_usage(tx: Tx, session_id: str, usage: Counts) -> None:
    tx.execute(
        "UPDATE sessions SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
        "cached_tokens = cached_tokens + ?, cost_usd = cost_usd + ?, "
        "usage_estimated = CASE WHEN ? > usage_estimated THEN 1 ELSE usage_estimated END "
        "WHERE session_id = ?",
        (usage.input_tokens, usage.output_tokens, usage.cached_tokens, usage.cost_usd,
         int(usage.estimated), session_id),
    )
    changed(tx, session_id)


def delete(tx: Tx, session_id: str) -> None:
    # A parent whose rotated child goes takes prompts itself again.
    tx.execute("UPDATE sessions SET child_session_id = NULL WHERE child_session_id = ?", (session_id,))
    # Its sub-agents' sessions stay, unlinked (ON DELETE SET NULL): listed from now on, so
    # session lists hear of each (a session.updated broadcast) in this commit.
    subagents = [str(r[0]) for r in tx.all(
        "SELECT session_id FROM sessions WHERE delegated_from = ?", (session_id,))]
    tx.execute("DELETE FROM events WHERE session_id = ?", (session_id,))
    tx.execute("DELETE FROM turn_leases WHERE session_id = ?", (session_id,))
    tx.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
    for child in subagents:
        changed(tx, child)


def status(tx: Tx, session_id: str) -> SessionStatus:
    """Derived from the admissions, which are the durable truth about running work.  A
    background review (principal `review`, turn/review.py) is not people's work: a session
    whose review runs or waits is as idle as without it.

    Each test is an index probe, never a scan of the queue: this runs for every
    `session.updated` broadcast, so its cost must not grow with a long queue.
    """
    r = tx.one(
        "SELECT EXISTS (SELECT 1 FROM admissions WHERE session_id = ?1 AND status = 'started' "
        "AND principal <> 'review'), "
        "EXISTS (SELECT 1 FROM approvals WHERE status = 'pending' AND session_id = ?1), "
        "EXISTS (SELECT 1 FROM questions WHERE status = 'pending' AND session_id = ?1), "
        "EXISTS (SELECT 1 FROM admissions WHERE session_id = ?1 AND status = 'unknown'), "
        "EXISTS (SELECT 1 FROM admissions WHERE session_id = ?1 AND status = 'queued' "
        "AND principal <> 'review')",
        (session_id,),
    )
    assert r is not None
    started, waiting, asking, unknown, queued = r
    if started:
        # A question pending after its turn ended (a restart) leaves the session as it is:
        # the answer becomes a prompt of its own.
        return "waiting_approval" if waiting else "waiting_answer" if asking else "running"
    if unknown:
        return "unknown"
    return "queued" if queued else "idle"


class SessionSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A session as people see it in a list: the columns of its row they see (never the
    system prompt or compression's bookkeeping), and what is worked out when it is read."""

    session_id: str
    title: str
    cwd: str
    model: str
    created_at: str
    updated_at: str
    status: SessionStatus
    message_count: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cost_usd: float
    usage_estimated: bool
    parent_session_id: str | None
    child_session_id: str | None
    latest_seq: int
    delegated_from: str | None
    delegated_call: str | None
    folder_warning: str | None
    provider: str | None = None
    forked_from: str | None = None
    forked_at: str | None = None


class SessionChanged(events.Report, frozen=True, tag="session"):
    """A session's summary changed in the committed job (`changed`): `session.updated`."""

    summary: SessionSummary


def summary(tx: Tx, r: SessionRecord) -> SessionSummary:
    """The summary of a `sessions` row; `message_count` is the column the triggers on
    `messages` keep (migration 4), so no rows are counted here.  `folder_warning` is judged
    now, from the folder and the home folder as they are (no column holds it)."""
    sid = r.session_id
    return SessionSummary(
        session_id=sid, title=r.title, cwd=r.cwd, model=r.model,
        created_at=r.created_at, updated_at=r.updated_at, status=status(tx, sid),
        message_count=r.message_count, input_tokens=r.input_tokens,
        output_tokens=r.output_tokens, cached_tokens=r.cached_tokens, cost_usd=r.cost_usd,
        usage_estimated=r.usage_estimated,
        parent_session_id=r.parent_session_id, child_session_id=r.child_session_id,
        latest_seq=events.latest_seq(tx, sid),
        delegated_from=r.delegated_from, delegated_call=r.delegated_call,
        folder_warning=folder_warning(r.cwd), provider=r.provider,
        forked_from=r.forked_from, forked_at=r.forked_at,
    )


class Which(msgspec.Struct, frozen=True):
    """Which sessions a listing shows: by default those people started (no sub-agents);
    `delegated` adds the sub-agents' too; `delegated_from` only the sub-agents of one."""

    delegated: bool = False
    delegated_from: str | None = None

    def sql(self, alias: str = "") -> tuple[str, tuple[str, ...]]:
        col = f"{alias}delegated_from"
        if self.delegated_from is not None:
            return f"{col} = ?", (self.delegated_from,)
        return ("TRUE", ()) if self.delegated else (f"{col} IS NULL", ())


PEOPLES = Which()  # the sessions people started


def page(tx: Tx, limit: int, cursor: tuple[str, str] | None,
         which: Which = PEOPLES) -> list[SessionRecord]:
    """Sessions by last activity, newest first; `cursor` is the (updated_at, id) to go past."""
    where, args = which.sql()
    if cursor is not None:
        where += " AND (updated_at, session_id) < (?, ?)"
        args += (cursor[0], cursor[1])
    rows = tx.all(
        f"SELECT * FROM sessions WHERE {where} ORDER BY updated_at DESC, session_id DESC LIMIT ?",
        (*args, limit),
    )
    return [SessionRecord.from_row(r) for r in rows]


def insert_delegated(tx: Tx, session_id: str, parent: SessionRecord, call_id: str,
                     title: str) -> None:
    """A sub-agent's session: the parent's folder, provider and model, linked to the parent's
    call."""
    ts = now()
    tx.execute(
        "INSERT INTO sessions (session_id, title, cwd, model, created_at, updated_at, titled, "
        "delegated_from, delegated_call, provider) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?)",
        (session_id, title, parent.cwd, parent.model, ts, ts, parent.session_id, call_id,
         parent.provider),
    )


def delegated_child(tx: Tx, parent_id: str, call_id: str) -> str | None:
    """The session a delegate call of `parent_id` started, if any."""
    r = tx.one("SELECT session_id FROM sessions WHERE delegated_from = ? AND delegated_call = ?",
               (parent_id, call_id))
    return str(r[0]) if r is not None else None


def delegation_depth(tx: Tx, session_id: str) -> int:
    """How many delegations below a person's session this one is (0: a person's own)."""
    r = tx.one(
        "WITH RECURSIVE up (sid, depth) AS (SELECT ?, 0 UNION ALL "
        "SELECT s.delegated_from, up.depth + 1 FROM sessions s JOIN up ON s.session_id = up.sid "
        "WHERE s.delegated_from IS NOT NULL AND up.depth < 64) SELECT MAX(depth) FROM up",
        (session_id,),
    )
    return int(r[0]) if r is not None and r[0] is not None else 0


class SearchHit(msgspec.Struct, frozen=True):
    """A session a search found, and its best-matching message's row id (by bm25); None
    when only its title matched."""

    session: SessionRecord
    message_rowid: int | None


def search(tx: Tx, query: str, limit: int, offset: int, which: Which = PEOPLES) -> list[SearchHit]:
    """Full-text search over titles and message text, best match first."""
    if tx.dialect == POSTGRESQL:
        return _search_pg(tx, query, limit, offset, which)
    fts = _fts_query(query)
    if not fts:
        return []
    where, args = which.sql("s.")
    # bm25() is valid only in the FTS query itself; MATERIALIZED stops SQLite from
    # folding that query into the aggregate below, where bm25() would be refused.
    # With MIN() the only aggregate, SQLite takes the bare `best` from the row of the min.
    rows = tx.all(
        f"""
        WITH matches AS MATERIALIZED (
            SELECT rowid AS id, bm25(messages_fts) AS score
            FROM messages_fts WHERE messages_fts MATCH ?
        ),
        hits AS (
            SELECT m.session_id AS sid, MIN(matches.score) AS score, matches.id AS best
            FROM matches JOIN messages m ON m.id = matches.id GROUP BY m.session_id
        )
        SELECT s.*, h.best AS best_message,
               CASE WHEN s.title LIKE ? ESCAPE '\\' THEN -1e9 ELSE COALESCE(h.score, 0) END
               AS rank
        FROM sessions s LEFT JOIN hits h ON h.sid = s.session_id
        WHERE (h.sid IS NOT NULL OR s.title LIKE ? ESCAPE '\\') AND {where}
        ORDER BY rank, s.updated_at DESC LIMIT ? OFFSET ?
        """,
        (fts, _like(query), _like(query), *args, limit, offset),
    )
    return [SearchHit(SessionRecord.from_row(r), r["best_message"]) for r in rows]


def _search_pg(tx: Tx, query: str, limit: int, offset: int, which: Which) -> list[SearchHit]:
    """`search` on PostgreSQL: its own full-text search (the messages' generated `search`
    tsvector, a GIN index) with each word a prefix term, ranked by ts_rank; a title match
    first, as on SQLite.  DISTINCT ON keeps each session's best message."""
    words = [w for w in query.split() if w.strip()]
    if not words:
        return []
    tsquery = " & ".join("'" + w.replace("\\", "\\\\").replace("'", "''") + "':*" for w in words)
    where, args = which.sql("s.")
    rows = tx.all(
        f"""
        WITH q AS (SELECT to_tsquery('simple', tk_fold(?)) AS q),
        hits AS (
            SELECT DISTINCT ON (m.session_id) m.session_id AS sid, m.id AS best,
                   ts_rank(m.search, q.q) AS score
            FROM messages m, q WHERE m.search @@ q.q
            ORDER BY m.session_id, ts_rank(m.search, q.q) DESC, m.id
        )
        SELECT s.*, h.best AS best_message,
               CASE WHEN s.title ILIKE ? ESCAPE '\\' THEN -1e9 ELSE -COALESCE(h.score, 0) END
               AS rank
        FROM sessions s LEFT JOIN hits h ON h.sid = s.session_id
        WHERE (h.sid IS NOT NULL OR s.title ILIKE ? ESCAPE '\\') AND {where}
        ORDER BY rank, s.updated_at DESC LIMIT ? OFFSET ?
        """,
        (tsquery, _like(query), _like(query), *args, limit, offset),
    )
    return [SearchHit(SessionRecord.from_row(r), r["best_message"]) for r in rows]


def _matches_pg(tx: Tx, query: str, wanted: set[int]) -> dict[int, tuple[str, list[snippets.Span]]]:
    """The snippets of `wanted` messages on PostgreSQL: marked here, in Python, on the text."""
    if not wanted:
        return {}
    rows = tx.all(f"SELECT id, content FROM messages WHERE id IN ({', '.join('?' * len(wanted))})",
                  tuple(wanted))
    return {r["id"]: snippets.render(r["content"], snippets.word_spans(r["content"], query))
            for r in rows}


SNIPPET_TOKENS = 12  # how many words snippet() takes around a match
_SNIPPET_TRIES = 3


class Match(msgspec.Struct, frozen=True):
    """Where a search matched one session: its best message (None: the title matched), a
    snippet of plain text and the matched words as [start, end) offsets into it."""

    session_id: str
    message_rowid: int | None
    snippet: str
    highlights: list[snippets.Span]


def matches(tx: Tx, query: str, hits: list[SearchHit]) -> list[Match]:
    """Where each hit matched, in order: its best message's snippet, or else its title.

    One query for all the hits' messages, whose snippet() runs only on those rows: the
    unary `+` keeps SQLite from looking each row id up on its own, which would expand the
    query's prefix terms once per row."""
    wanted = {h.message_rowid for h in hits if h.message_rowid is not None}
    found: dict[int, tuple[str, list[snippets.Span]]] = {}
    fts = _fts_query(query)
    if tx.dialect == POSTGRESQL:
        found, fts = _matches_pg(tx, query, wanted), ""
    for _ in range(_SNIPPET_TRIES):
        if not wanted or not fts:
            break
        marks = snippets.Markers()
        rows = tx.all(
            "SELECT rowid AS id, snippet(messages_fts, 0, ?, ?, ?, ?) AS marked, "
            "instr(content, ?) AS clash FROM messages_fts "
            f"WHERE messages_fts MATCH ? AND +rowid IN ({', '.join('?' * len(wanted))})",
            (marks.open, marks.close, marks.cut, SNIPPET_TOKENS, marks.nonce, fts, *wanted),
        )
        for r in rows:
            if not r["clash"]:  # never parse text holding the markers' nonce
                text, spans, before, after = snippets.parse(r["marked"], marks)
                found[r["id"]] = snippets.render(text, spans, before, after)
        wanted = {r["id"] for r in rows if r["clash"]}  # a fresh nonce for those
    out = []
    for h in hits:
        title = h.session.title
        rowid = h.message_rowid if h.message_rowid in found else None
        text, spans = found[rowid] if rowid is not None else snippets.render(
            title, snippets.title_spans(title, query), markdown=False)
        out.append(Match(h.session.session_id, rowid, text, spans))
    return out


def _fts_query(query: str) -> str:
    """Each word becomes a quoted prefix term, so user text can never be FTS syntax."""
    words = [w.replace('"', '""') for w in query.split() if w.strip()]
    return " ".join(f'"{w}"*' for w in words)


def _like(query: str) -> str:
    q = query.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{q}%"
