"""The wire copy: tool calls replayed with their results, and unpaired ones repaired."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from backend.store.messages import ModelRow
from backend.turn.context import MAX_IMAGE_BYTES, MAX_IMAGES_PER_RESULT, wire_messages


def rows(*specs: dict[str, Any]) -> list[ModelRow]:
    out = []
    for i, spec in enumerate(specs):
        values: dict[str, Any] = {
            "id": i, "api_content": None, "tool_calls": None, "api_tool_calls": None,
            "call_id": None, "tool_name": None, "status": None, "note_kind": None, "meta": None,
        } | spec
        if isinstance(values["tool_calls"], list):
            values["tool_calls"] = json.dumps(values["tool_calls"])
        out.append(ModelRow(**values))
    return out


def call(call_id: str, **extra: Any) -> dict[str, Any]:
    return {"call_id": call_id, "name": "terminal", "arguments": {"command": "ls"}, **extra}


def test_results_follow_their_calls_in_call_order_whatever_the_row_order() -> None:
    wire = wire_messages("sys", rows(
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "content": "B", "call_id": "b", "tool_name": "terminal", "status": "ok"},
        {"role": "tool", "content": "A", "call_id": "a", "tool_name": "terminal", "status": "ok"},
        {"role": "assistant", "content": "done"},
    ))
    assert [m.role for m in wire] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [m.tool_call_id for m in wire[3:5]] == ["a", "b"]
    assert [m.content for m in wire[3:5]] == ["A", "B"]
    assert wire[2].tool_calls[0].arguments == '{"command": "ls"}'


def test_a_call_without_result_gets_one_and_an_orphan_result_is_dropped() -> None:
    wire = wire_messages("sys", rows(
        {"role": "tool", "content": "orphan", "call_id": "zz", "status": "ok"},
        {"role": "assistant", "content": "x", "tool_calls": [call("a")]},
    ))
    assert [m.role for m in wire] == ["system", "assistant", "tool"]
    assert "not known" in wire[2].content


def test_raw_arguments_replay_verbatim_and_statuses_are_marked() -> None:
    wire = wire_messages("sys", rows(
        {"role": "assistant", "content": "", "tool_calls": [call("a", arguments_raw='{"bad"')]},
        {"role": "tool", "content": "Not run", "call_id": "a", "status": "denied"},
    ))
    assert wire[1].tool_calls[0].arguments == '{"bad"'
    assert wire[2].content.startswith("[status: denied]")


def test_notes_are_hidden_except_summaries() -> None:
    wire = wire_messages("sys", rows(
        {"role": "system_note", "content": "failed", "note_kind": "failed"},
        {"role": "system_note", "content": "summary text", "note_kind": "summary"},
    ))
    assert [(m.role, m.content) for m in wire] == [("system", "sys"), ("user", "summary text")]


def test_a_results_saved_images_go_with_it_unless_pruned_gone_too_big_or_too_many(
    tmp_path: Path
) -> None:
    png = tmp_path / "a.png"
    png.write_bytes(b"\x89PNG fake")
    good = {"mime_type": "image/png", "bytes": png.stat().st_size, "path": str(png)}
    attachments = [
        good,
        {"mime_type": "image/png", "bytes": 10, "path": str(tmp_path / "gone.png")},
        {"mime_type": "image/png", "bytes": MAX_IMAGE_BYTES + 1, "path": str(png)},
        {"mime_type": "audio/wav", "bytes": 10, "path": str(png)},
        *[good] * 6,
    ]
    meta = json.dumps({"attachments": attachments})
    mcp = {"call_id": "a", "name": "mcp__fake__picture", "arguments": {}}
    wire = wire_messages("sys", rows(
        {"role": "assistant", "content": "", "tool_calls": [mcp]},
        {"role": "tool", "content": "[image ...]", "call_id": "a", "status": "ok", "meta": meta},
    ))
    images = wire[2].images
    assert len(images) == MAX_IMAGES_PER_RESULT
    assert {(i.media_type, base64.b64decode(i.data)) for i in images} == {("image/png", b"\x89PNG fake")}
    pruned = wire_messages("sys", rows(
        {"role": "assistant", "content": "", "tool_calls": [mcp]},
        {"role": "tool", "content": "[image ...]", "api_content": "[old result cleared]",
         "call_id": "a", "status": "ok", "meta": meta},
    ))
    assert pruned[2].images == (), "a pruned result sends no image either"
