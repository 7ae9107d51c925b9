"""The tool round's pure part: validating, normalizing, capping and deduping the model's calls."""

from __future__ import annotations

import json

from backend.providers.base import ToolCallChunk
from backend.tools.registry import BUILTINS
from backend.turn.tool_round import MAX_CALLS_PER_BATCH, prepare, signature, stored_calls


def chunk(i: int, name: str, args: str | dict[str, object], call_id: str = "") -> ToolCallChunk:
    raw = args if isinstance(args, str) else json.dumps(args)
    return ToolCallChunk(i, call_id or f"c{i}", name, raw)


def test_valid_calls_keep_their_ids_and_parsed_arguments() -> None:
    out = prepare([chunk(0, "terminal", {"command": "ls"}), chunk(1, "list_dir", {})],
                  BUILTINS, set(), "turn_abcdefgh")
    assert [p.call_id for p in out] == ["c0", "c1"]
    assert [p.error for p in out] == [None, None]
    assert out[0].arguments["command"] == "ls"
    assert out[0].tool is BUILTINS["terminal"]
    assert out[0].arguments["timeout_s"] == 120, "validation fills defaults for the run"
    assert stored_calls(out)[0]["arguments"] == {"command": "ls"}, "stored as the model sent it"


def test_malformed_json_is_an_error_that_keeps_the_raw_text() -> None:
    [p] = prepare([chunk(0, "terminal", '{"command": "ls"')], BUILTINS, set(), "turn_x")
    assert p.error is not None
    assert "not valid JSON" in p.error
    assert p.arguments == {}
    assert p.arguments_raw == '{"command": "ls"'
    assert stored_calls([p])[0]["arguments_raw"] == '{"command": "ls"'


def test_non_object_arguments_and_unknown_tools_are_errors() -> None:
    a, b = prepare([chunk(0, "terminal", "[1, 2]"), chunk(1, "rm_everything", {})],
                   BUILTINS, set(), "turn_x")
    assert a.error == "The arguments must be a JSON object."
    assert b.error is not None
    assert "Unknown tool 'rm_everything'" in b.error
    assert "terminal" in b.error
    assert b.tool is None


def test_schema_violations_are_errors() -> None:
    [p] = prepare([chunk(0, "terminal", {"command": 5})], BUILTINS, set(), "turn_x")
    assert p.error is not None
    assert p.error.startswith("Invalid arguments for terminal")


def test_missing_duplicate_and_reused_ids_are_replaced_with_unique_ones() -> None:
    used = {"c0"}
    out = prepare([chunk(0, "list_dir", {}, "c0"), chunk(1, "list_dir", {"path": "a"}, "bad id!"),
                   chunk(2, "list_dir", {"path": "b"}, "same"),
                   chunk(3, "list_dir", {"path": "c"}, "same")], BUILTINS, used, "turn_abcdefgh")
    ids = [p.call_id for p in out]
    assert len(set(ids)) == 4
    assert "c0" not in ids
    assert ids[2] == "same"
    assert all(i in used for i in ids)


def test_identical_calls_in_one_batch_run_once() -> None:
    out = prepare([chunk(0, "list_dir", {"path": "."}), chunk(1, "list_dir", {"path": "."})],
                  BUILTINS, set(), "turn_x")
    assert out[0].error is None
    assert out[1].error is not None
    assert "Duplicate of call c0" in out[1].error


def test_batch_over_the_cap_answers_the_rest_with_an_error() -> None:
    n = MAX_CALLS_PER_BATCH + 3
    out = prepare([chunk(i, "list_dir", {"path": str(i)}) for i in range(n)], BUILTINS, set(), "t")
    assert [p.error is None for p in out] == [True] * MAX_CALLS_PER_BATCH + [False] * 3


def test_signature_tells_batches_apart() -> None:
    a = prepare([chunk(0, "list_dir", {"path": "."})], BUILTINS, set(), "t")
    b = prepare([chunk(0, "list_dir", {"path": "."}, "other")], BUILTINS, set(), "t")
    c = prepare([chunk(0, "list_dir", {"path": ".."})], BUILTINS, set(), "t")
    assert signature(a) == signature(b) != signature(c)
