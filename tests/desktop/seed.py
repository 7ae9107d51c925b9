"""Seeds a long session straight into the backend's SQLite file, for long-transcript tests.

`seed_long_session(data_dir, n)` writes one session with exactly `n` messages in one
transaction with plain sqlite3, the way `backend/store/messages.py` writes rows (same
columns, `json.dumps` of tool calls and meta, RFC 3339 millisecond timestamps, `content`
never NULL, `active`/`compacted` left to their defaults).  The full-text index stays in
sync through the schema's own `messages_fts_insert` trigger, and the session's stored
`message_count` through its `messages_count_insert` trigger (left to fire per row, about
1.3 s per 100k rows), so nothing else needs updating.

Preconditions: a backend has started on `data_dir` once (the schema exists), and no
backend runs on it while seeding (stop it, seed, start it again).

The mix is a plausible coding session: turns of a user prompt, often an assistant row
with one to three tool calls followed by their results (ok, sometimes error, one with a
diff), a final assistant answer in markdown with code blocks, and now and then a closing
`system_note` (an interrupted or failed turn).  Turn ids look like the backend's
(`turn_` + 12 hex of a ms clock + 12 hex), call ids like its normalized ones.

For paging tests the layout is fixed at one place: when `n >= SPLIT_MIN`, the row just
before the newest page of `PAGE` rows is an assistant row with two tool calls, and both
results open the newest page (see `SeededSession.split_*`).
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

PAGE = 100  # what session.resume and the window's fetch_older read
SPLIT_MIN = PAGE + 12
TITLE = "A very long session"
MODEL = "fake-model"
SYSTEM_PROMPT = "You are Turnkey, a careful coding agent. (seeded)"


@dataclass
class SeededSession:
    session_id: str
    n: int
    first_rowid: int
    last_rowid: int
    split_call_ids: list[str] = field(default_factory=list)  # calls just above the newest page
    split_turn_id: str | None = None
    seconds: float = 0.0  # how long the seeding took

    def message_id(self, index: int) -> str:
        """The message_id of the `index`-th seeded row (0-based, negative from the end)."""
        rowid = (self.first_rowid + index) if index >= 0 else (self.last_rowid + 1 + index)
        return f"{rowid:016d}"


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _new_id(prefix: str, t: datetime, rng: random.Random) -> str:
    return f"{prefix}_{int(t.timestamp() * 1000):012x}{rng.getrandbits(48):012x}"


class _Writer:
    """Builds the rows in order; one tuple per row, in `messages.insert`'s column order."""

    def __init__(self, sid: str, start: datetime, rng: random.Random) -> None:
        self.sid = sid
        self.t = start
        self.rng = rng
        self.rows: list[tuple[Any, ...]] = []
        self.turn_no = 0
        self.calls_in_turn: dict[str, int] = {}
        self.tails: set[str] = set()

    def _row(self, turn: str | None, role: str, content: str, *, status: str | None = None,
             note_kind: str | None = None, tool_calls: list[dict[str, Any]] | None = None,
             call_id: str | None = None, tool_name: str | None = None,
             meta: dict[str, Any] | None = None) -> None:
        self.t += timedelta(milliseconds=self.rng.randint(300, 4000))
        self.rows.append((
            self.sid, turn, role, content, None, status, note_kind,
            json.dumps(tool_calls) if tool_calls else None, call_id, tool_name,
            json.dumps(meta) if meta else None, _stamp(self.t),
        ))

    def _turn_id(self) -> str:
        self.turn_no += 1
        self.t += timedelta(seconds=self.rng.randint(5, 120))  # the person reads, then types
        while True:
            turn = _new_id("turn", self.t, self.rng)
            if turn[-8:] not in self.tails:  # call ids use these 8 hex: keep them unique
                self.tails.add(turn[-8:])
                return turn

    # --- pieces ---------------------------------------------------------------------

    def user(self, turn: str) -> None:
        k = self.turn_no
        asks = (
            f"Please look at `src/module_{k % 97}.py` and tell me why `load_{k}` is slow.",
            f"Run the tests for package {k % 13} and fix what fails.",
            f"Can you refactor the parser (turn {k})? Keep the public API.",
            f"What does this error mean?\n\n```\nKeyError: 'item_{k}'\n```",
        )
        self._row(turn, "user", asks[k % len(asks)])

    def answer(self, turn: str, status: str | None = None) -> None:
        k = self.turn_no
        code = "\n".join(f"    total += weight_{j} * value_{j}" for j in range(self.rng.randint(1, 6)))
        text = (
            f"## Step {k}\n\n"
            f"The slow part is the **nested loop** in `load_{k}`; each pass re-reads the file.\n\n"
            f"```python\ndef load_{k}(path):\n    total = 0\n{code}\n    return total\n```\n\n"
            f"- cached the parsed rows\n- removed the second pass\n"
        )
        if k % 3 == 0:
            text += f"\nRun `pytest -k load_{k}` to check; it passed here in {k % 7 + 1}.{k % 10} s.\n"
        self._row(turn, "assistant", text, status=status)

    def calls(self, turn: str, count: int) -> list[dict[str, Any]]:
        k = self.turn_no
        made: list[dict[str, Any]] = []
        used = self.calls_in_turn.setdefault(turn, 0)
        self.calls_in_turn[turn] = used + count
        for i in range(count):
            cid = f"call_{turn[-8:]}_{used + i}"  # unique in the session, like the backend's
            if (k + i) % 3 == 0:
                made.append({"call_id": cid, "name": "terminal",
                             "arguments": {"command": f"pytest -q tests/test_mod_{k % 97}.py"}})
            elif (k + i) % 3 == 1:
                made.append({"call_id": cid, "name": "read_file",
                             "arguments": {"path": f"src/module_{k % 97}.py"}})
            else:
                made.append({"call_id": cid, "name": "edit_file",
                             "arguments": {"path": f"src/module_{k % 97}.py",
                                           "old": "total = 0", "new": "total = 0.0"}})
        lead = "" if k % 2 else f"Let me look at module {k % 97} first."
        self._row(turn, "assistant", lead, tool_calls=made)
        return made

    def result(self, turn: str, call: dict[str, Any]) -> None:
        name, k = call["name"], self.turn_no
        meta: dict[str, Any] = {"duration_ms": self.rng.randint(3, 2500)}
        status = "ok"
        if name == "terminal":
            failed = k % 5 == 0
            status = "error" if failed else "ok"
            meta["exit_code"] = 1 if failed else 0
            out = "\n".join(
                f"tests/test_mod_{k % 97}.py::test_{j} {'FAILED' if failed and j == 0 else 'PASSED'}"
                for j in range(self.rng.randint(2, 8)))
        elif name == "read_file":
            out = "\n".join(f"{j + 1:4d}  line {j} of module {k % 97}"
                            for j in range(self.rng.randint(5, 30)))
        else:
            meta["diff"] = (f"--- a/src/module_{k % 97}.py\n+++ b/src/module_{k % 97}.py\n"
                            "@@ -1,3 +1,3 @@\n def load():\n-    total = 0\n+    total = 0.0\n")
            out = f"Edited src/module_{k % 97}.py (1 replacement)."
        self._row(turn, "tool", out, status=status, call_id=call["call_id"], tool_name=name, meta=meta)

    def note(self, turn: str, kind: str) -> None:
        text = ("Interrupted by the user." if kind == "interrupted"
                else "The turn failed: provider_error: the model server closed the stream")
        self._row(turn, "system_note", text, note_kind=kind)

    # --- turns ----------------------------------------------------------------------

    def turn(self) -> None:
        """One turn of a varied shape (2 to 9 rows)."""
        turn = self._turn_id()
        self.user(turn)
        shape = self.rng.random()
        if shape < 0.45:
            for call in self.calls(turn, self.rng.randint(1, 3)):
                self.result(turn, call)
            if self.rng.random() < 0.3:  # a second round
                for call in self.calls(turn, 1):
                    self.result(turn, call)
        if shape > 0.97:
            self.note(turn, "interrupted" if self.rng.random() < 0.7 else "failed")
            return
        self.answer(turn)

    def exactly(self, count: int) -> None:
        """Whole turns adding up to exactly `count` rows."""
        goal = len(self.rows) + count
        while goal - len(self.rows) > 12:
            self.turn()
        left = goal - len(self.rows)
        if left == 1:  # a closing note of the last turn (an interrupted one)
            last = self.rows[-1][1] if self.rows else self._turn_id()
            self.note(last, "interrupted")
        elif left >= 2:
            turn = self._turn_id()
            self.user(turn)
            if left == 3:
                self.answer(turn, status="interrupted")
                self.note(turn, "interrupted")
            elif left >= 4:
                rest = left - 2  # rounds of one calls row and 1 to 3 results, then the answer
                while rest > 0:
                    size = rest if rest <= 4 else (3 if rest == 5 else 4)
                    for call in self.calls(turn, size - 1):
                        self.result(turn, call)
                    rest -= size
                self.answer(turn)
            else:
                self.answer(turn)
        assert len(self.rows) == goal, (len(self.rows), goal)


def seed_long_session(data_dir: Path, n: int, seed: int = 7) -> str:
    """Creates a session with exactly `n` messages in DIR/state.db; returns its session_id."""
    return seed_long_session_info(data_dir, n, seed).session_id


def seed_long_session_info(data_dir: Path, n: int, seed: int = 7) -> SeededSession:
    """`seed_long_session`, with what paging tests need to know about the layout."""
    assert n >= 1
    started = time.perf_counter()
    rng = random.Random(seed)
    now = datetime.now(UTC)
    start = now - timedelta(seconds=n * 8)  # about what n rows of a real session take
    sid = _new_id("ses", start, rng)
    w = _Writer(sid, start, rng)
    split_calls: list[str] = []
    split_turn: str | None = None
    if n >= SPLIT_MIN:
        # Everything before the newest page, but its last two rows: [user, assistant+2 calls].
        w.exactly(n - PAGE - 2)
        split_turn = w._turn_id()
        w.user(split_turn)
        calls = w.calls(split_turn, 2)
        split_calls = [c["call_id"] for c in calls]
        for call in calls:  # the newest page opens with both results
            w.result(split_turn, call)
        w.answer(split_turn)
        w.exactly(n - len(w.rows))
    else:
        w.exactly(n)
    assert len(w.rows) == n

    db = data_dir / "state.db"
    assert db.exists(), f"{db} does not exist: start a backend on {data_dir} once first"
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=10000")
        conn.execute("PRAGMA cache_size=-131072")  # 128 MiB: the FTS index merges in memory
        conn.execute("BEGIN IMMEDIATE")
        try:
            created, updated = _stamp(start), w.rows[-1][-1]
            calls_made = sum(1 for r in w.rows if r[2] == "assistant")  # one model call each
            usage = (calls_made * 1200, calls_made * 150, calls_made * 900, round(calls_made * 0.0004, 8))
            conn.execute(
                "INSERT INTO sessions (session_id, title, cwd, model, system_prompt, created_at, "
                "updated_at, input_tokens, output_tokens, cached_tokens, cost_usd) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (sid, TITLE, str(data_dir), MODEL, SYSTEM_PROMPT, created, updated,
                 *usage),
            )
            conn.execute(
                "INSERT INTO usage (session_id, provider, model, task, calls, input_tokens, "
                "output_tokens, cached_tokens, cost_usd) VALUES (?, 'main', ?, 'turn', ?, ?, ?, ?, ?)",
                (sid, MODEL, calls_made, *usage),
            )
            before = conn.execute("SELECT COALESCE(MAX(id), 0) FROM messages").fetchone()[0]
            _insert_messages(conn, sid, w.rows)
            first, last = conn.execute(
                "SELECT MIN(id), MAX(id) FROM messages WHERE session_id = ?", (sid,)).fetchone()
            assert first > before, "the session's rows come after every existing row"
            assert last - first + 1 == n, "rows of one session must be contiguous"
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()
    return SeededSession(sid, n, first, last, split_calls, split_turn,
                         seconds=time.perf_counter() - started)


INSERT_MESSAGE = (
    "INSERT INTO messages (session_id, turn_id, role, content, api_content, status, "
    "note_kind, tool_calls, call_id, tool_name, meta, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
FTS_TRIGGER = "messages_fts_insert"
# What that trigger does for each new row (backend/store/migrations.py), as one statement.
FTS_BODY = ("INSERT INTO messages_fts (rowid, content, session_id) "
            "VALUES (new.id, new.content, new.session_id);")
FTS_BULK = ("INSERT INTO messages_fts (rowid, content, session_id) "
            "SELECT id, content, session_id FROM messages WHERE session_id = ? AND id > ? ORDER BY id")


def _insert_messages(conn: sqlite3.Connection, sid: str, rows: list[tuple[Any, ...]]) -> None:
    """The rows, and their full-text index entries exactly as the schema's trigger writes them.

    Firing the trigger once per row costs ~2.5 s per 100k rows; when the trigger is the one
    this file knows, it is set aside inside the transaction, the index is filled with one
    INSERT ... SELECT doing the same per row, and the trigger is put back unchanged.  Any
    other trigger body (a newer schema) just fires as usual.
    """
    found = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?",
                         (FTS_TRIGGER,)).fetchone()
    body = " ".join(found[0].split()) if found else ""
    if not body.endswith(f"BEGIN {FTS_BODY} END"):
        conn.executemany(INSERT_MESSAGE, rows)
        return
    before = conn.execute("SELECT COALESCE(MAX(id), 0) FROM messages").fetchone()[0]
    conn.execute(f"DROP TRIGGER {FTS_TRIGGER}")
    conn.executemany(INSERT_MESSAGE, rows)
    conn.execute(FTS_BULK, (sid, before))
    conn.execute(found[0])
