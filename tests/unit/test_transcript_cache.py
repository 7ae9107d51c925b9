"""The kept model view (backend/turn/transcript.py) is, after any appends and compressions, the
view and the wire copy built from scratch: random transcripts, appended in random steps, on a
real migrated SQLite file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.compress import tokens as tok
from backend.providers.base import ChatRequest
from backend.store import compression, messages, sessions
from backend.store.db import Tx
from backend.store.migrations import migrate
from backend.turn.context import wire_messages
from backend.turn.transcript import Transcripts


@pytest.fixture
def tx(tmp_path: Path) -> Iterator[Tx]:
    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    conn.row_factory = sqlite3.Row
    migrate(conn)
    tx = Tx(conn)
    sessions.insert(tx, "s", "t", "/", "m")
    yield tx
    conn.close()


# One stored row: (role, call ids it makes | the call id it answers, text).
Row = tuple[str, tuple[str, ...], str]
CALL_IDS = st.sampled_from(["c1", "c2", "c3", "c4", "c5"])
ROWS = st.one_of(
    st.tuples(st.just("user"), st.just(()), st.text(max_size=5)),
    st.tuples(st.just("user+file"), st.just(()), st.text(max_size=5)),
    st.tuples(st.just("assistant"), st.lists(CALL_IDS, max_size=2, unique=True).map(tuple),
              st.text(max_size=5)),
    st.tuples(st.just("tool"), CALL_IDS.map(lambda c: (c,)), st.text(max_size=5)),
    st.tuples(st.just("system_note"), st.just(()), st.text(max_size=5)),
)


def store(tx: Tx, row: Row) -> None:
    role, ids, text = row
    if role == "assistant":
        calls: list[dict[str, Any]] | None = [
            {"call_id": c, "name": "read_file", "arguments_raw": f'{{"p": "{c}"}}'} for c in ids]
        messages.insert(tx, "s", "assistant", text, tool_calls=calls or None)
    elif role == "tool":
        messages.insert(tx, "s", "tool", text, call_id=ids[0], tool_name="read_file", status="ok")
    elif role == "system_note":
        messages.insert(tx, "s", "system_note", text, note_kind="interrupted")
    elif role == "user+file":
        messages.insert(tx, "s", "user", text, meta={"attachments": [
            {"sha256": "ab" * 32, "name": "a.png", "mime_type": "image/png", "kind": "image"}]})
    else:
        messages.insert(tx, "s", "user", text)


def compress(tx: Tx) -> None:
    """What a compression commits: a range hidden, a summary note anchored before it."""
    ids = [r.id for r in messages.for_model(tx, "s")]
    if len(ids) < 4:
        return
    compression.hide(tx, "s", ids[0], ids[-2])
    messages.insert(tx, "s", "system_note", "summary text", note_kind="summary",
                    api_content="<summary>summary text</summary>", meta={"anchor": ids[0]})


STEPS = st.lists(st.one_of(st.lists(ROWS, min_size=1, max_size=6), st.just("compress")),
                 min_size=1, max_size=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_the_kept_view_is_the_view_built_from_scratch(tx: Tx, steps: list[Any]) -> None:
    tx.execute("DELETE FROM messages")
    tx.execute("DELETE FROM compacted_ranges")
    kept = Transcripts()
    for step in steps:
        if step == "compress":
            compress(tx)
        else:
            for row in step:
                store(tx, row)
        view = kept.read(tx, "s")
        rows = messages.for_model(tx, "s")
        assert wire_messages("sys", rows)[1:] == view.wire
        assert [r.id for r in view.ordered] == [r.id for r in
                                               _model_order(rows)]
        assert view.wire_messages("sys") == wire_messages("sys", rows)
        assert view.chars() + len("sys") == tok.request_chars(
            ChatRequest(model="m", messages=wire_messages("sys", rows)))
        assert view.has_files() == any(m.files for m in wire_messages("sys", rows))
        assert kept.current(tx, "s"), "a view just read is current"


def _model_order(rows: list[messages.ModelRow]) -> list[messages.ModelRow]:
    from backend.turn.context import in_model_order
    return in_model_order(rows)


def test_a_compression_in_this_process_is_forgotten_and_the_token_catches_the_rest(tx: Tx) -> None:
    kept = Transcripts()
    assert not kept.current(tx, "s"), "no view kept yet"
    for i in range(6):
        store(tx, ("user", (), f"q{i}"))
    first = kept.read(tx, "s")
    assert len(first.wire) == 6
    assert kept.current(tx, "s")
    store(tx, ("user", (), "appended"))
    assert kept.current(tx, "s"), "appends leave the view current: they are read as new rows"
    compress(tx)  # a commit the cache was not told of: the token has moved
    assert not kept.current(tx, "s"), "a moved token: the view must be rebuilt"
    after = kept.read(tx, "s")
    assert after is not first
    assert after.wire == wire_messages("sys", messages.for_model(tx, "s"))[1:]
    store(tx, ("user", (), "more"))
    assert kept.read(tx, "s") is after, "an append extends the same view"
    kept.forget("s")
    assert not kept.current(tx, "s")
    assert kept.read(tx, "s") is not after
    tx.execute("UPDATE sessions SET view_changes = view_changes + 1")  # another answer shown
    assert not kept.current(tx, "s")


def test_only_so_many_sessions_are_kept(tx: Tx) -> None:
    kept = Transcripts(keep=2)
    for sid in ("a", "b", "c"):
        sessions.insert(tx, sid, "t", "/", "m")
        messages.insert(tx, sid, "user", sid)
        kept.read(tx, sid)
    assert list(kept._views) == ["b", "c"]
