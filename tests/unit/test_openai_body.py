"""The OpenAI-compatible request body is made from each message's JSON kept on the message
(`WireMessage.encoded`): the bytes are those of the body serialized whole, and a message that
changes (a new object: a kept view rebuilt or extended, a file rendered) is serialized anew."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
import pytest

from backend.providers.base import WireImage, WireMessage, WireToolCall
from backend.providers.openai import FORMAT, _encoded, _leading_system_joined, _wire_message
from backend.store import compression, messages, sessions
from backend.store.db import Tx
from backend.store.migrations import migrate
from backend.turn.transcript import Transcripts

MESSAGES = [
    WireMessage("system", "frozen prompt"),
    WireMessage("system", "memory block"),
    WireMessage("user", "héllo \U0001f600 \"quoted\" \n\x01"),
    WireMessage("assistant", "", tool_calls=(WireToolCall("c1", "read_file", '{"path": "a"}'),)),
    WireMessage("tool", "contents", tool_call_id="c1", name="read_file"),
    WireMessage("user", "see this", images=(WireImage("image/png", "aGVsbG8="),)),
    WireMessage("assistant", "done"),
]


def _body(messages: list[WireMessage], fragments: bool) -> bytes:
    wire = _leading_system_joined(messages)
    listed: list[Any] = [_encoded(m) for m in wire] if fragments else [_wire_message(m) for m in wire]
    return msgspec.json.encode({"model": "m", "messages": listed, "stream": True})


def test_the_body_from_kept_fragments_is_the_body_serialized_whole() -> None:
    whole = _body(MESSAGES, fragments=False)
    assert _body(MESSAGES, fragments=True) == whole
    assert _body(MESSAGES, fragments=True) == whole, "the second request reuses the fragments"
    kept = [m for m in MESSAGES[2:] if FORMAT in m.encoded]
    assert kept == [m for m in MESSAGES[2:] if not m.images], "images are not kept"


def test_a_replaced_message_is_serialized_anew() -> None:
    m = WireMessage("user", "before")
    _encoded(m)
    changed = replace(m, content="after")
    assert changed.encoded == {}, "replace() does not carry the old fragment"
    assert msgspec.json.decode(_encoded(changed)) == {"role": "user", "content": "after"}
    assert m == WireMessage("user", "before"), "the cache is not part of equality"


@pytest.fixture
def tx(tmp_path: Path) -> Iterator[Tx]:
    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    conn.row_factory = sqlite3.Row
    migrate(conn)
    tx = Tx(conn)
    sessions.insert(tx, "s", "t", "/", "m")
    yield tx
    conn.close()


def _sent(kept: Transcripts, tx: Tx) -> list[Any]:
    """The messages of the body built from the session's kept view, as the provider reads them."""
    view = kept.read(tx, "s")
    body = _body(view.wire_messages("sys"), fragments=True)
    listed: list[Any] = msgspec.json.decode(body)["messages"]
    return listed


def test_the_kept_view_sends_what_changed_not_the_old_fragment(tx: Tx) -> None:
    kept = Transcripts()
    messages.insert(tx, "s", "user", "q1")
    messages.insert(tx, "s", "assistant", "", tool_calls=[
        {"call_id": "c1", "name": "read_file", "arguments_raw": "{}"}])
    first = _sent(kept, tx)
    assert first[-1]["role"] == "tool"
    assert "No result was recorded" in first[-1]["content"]
    # The result arrives: the assistant row's messages are made again, with it.
    messages.insert(tx, "s", "tool", "the file", call_id="c1", tool_name="read_file", status="ok")
    assert _sent(kept, tx)[-1] == {"role": "tool", "tool_call_id": "c1", "content": "the file"}
    # A compression (a commit the kept view was not told of) rebuilds the view.
    ids = [r.id for r in messages.for_model(tx, "s")]
    messages.insert(tx, "s", "user", "q2")
    compression.hide(tx, "s", ids[0], ids[-1])
    messages.insert(tx, "s", "system_note", "sum", note_kind="summary",
                    api_content="<summary>sum</summary>", meta={"anchor": ids[0]})
    after = _sent(kept, tx)
    assert {"role": "user", "content": "<summary>sum</summary>"} in after
    assert {"role": "user", "content": "q2"} in after
    assert all("No result was recorded" not in str(m.get("content")) for m in after)
