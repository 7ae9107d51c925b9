"""MCP pieces without a server: tool names, argument checks, result conversion, the config table."""

from __future__ import annotations

import base64
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import types

from backend.config import ConfigFile
from backend.mcp.connection import progress_line
from backend.mcp.names import MAX_NAME, model_name
from backend.mcp.pool import McpPool
from backend.mcp.schema import ArgsChecker
from backend.mcp.tool import convert
from backend.secrets import Secrets
from backend.tools.sandbox import unavailable
from shared.codec import ParamsError
from shared.config import validate

PROVIDER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI and Anthropic accept


@pytest.mark.parametrize(
    ("server", "tool"),
    [("time", "get_current_time"), ("gh", "issues.list"), ("x", "café ☕"), ("a-b", "t" * 80),
     ("s", ""), ("s", "a__b")],
)
def test_every_model_name_is_one_providers_accept(server: str, tool: str) -> None:
    name = model_name(server, tool)
    assert PROVIDER_NAME.fullmatch(name), name
    assert name.startswith(f"mcp__{server}__")
    assert len(name) <= MAX_NAME


def test_names_are_kept_when_they_fit_and_rewritten_apart_when_they_do_not() -> None:
    assert model_name("time", "get_current_time") == "mcp__time__get_current_time"
    assert model_name("gh", "issues.list") != model_name("gh", "issues_list"), \
        "a rewritten name carries a hash of the original: two tools never meet"
    long_a, long_b = model_name("s", "x" * 70 + "a"), model_name("s", "x" * 70 + "b")
    assert long_a != long_b
    assert model_name("gh", "issues.list") == model_name("gh", "issues.list"), "stable across lists"


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "depth": {"type": "integer", "minimum": 0},
        "mode": {"enum": ["fast", "slow"]},
        "note": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["path"],
    "additionalProperties": False,
}


def test_arguments_are_checked_against_the_whole_of_json_schema() -> None:
    check = ArgsChecker("t", SCHEMA).check
    assert check({"path": "a", "tags": ["x"], "mode": "fast"}) == {"path": "a", "tags": ["x"], "mode": "fast"}
    with pytest.raises(ValueError, match="'path' is a required property"):
        check({})
    with pytest.raises(ValueError, match=r"argument 'tags\.1': 3 is not of type 'string'"):
        check({"path": "a", "tags": ["x", 3]})
    with pytest.raises(ValueError, match="'medium' is not one of"):
        check({"path": "a", "mode": "medium"})
    with pytest.raises(ValueError, match=r"Additional properties are not allowed \('extra' was unexpected\)"):
        check({"path": "a", "extra": 1})
    with pytest.raises(ValueError, match="must be a JSON object"):
        check(["a"])


def test_an_optional_argument_sent_as_null_is_dropped_unless_null_is_allowed() -> None:
    check = ArgsChecker("t", SCHEMA).check
    assert check({"path": "a", "depth": None}) == {"path": "a"}
    assert check({"path": "a", "note": None}) == {"path": "a", "note": None}
    with pytest.raises(ValueError, match="None is not of type 'string'"):
        check({"path": None})


def test_a_schema_that_is_not_json_schema_checks_only_for_an_object() -> None:
    check = ArgsChecker("t", {"type": "object", "properties": {"a": {"type": "no-such-type"}}}).check
    assert check({"a": 1}) == {"a": 1}
    with pytest.raises(ValueError, match="must be a JSON object"):
        check("a")


PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\nnot really").decode()


def test_results_become_text_for_the_model_and_files_for_what_it_cannot_read(tmp_path: Path) -> None:
    result = types.CallToolResult(content=[
        types.TextContent(type="text", text="first"),
        types.ImageContent(type="image", data=PIXEL, mime_type="image/png"),
        types.ResourceLink(type="resource_link", name="readme", uri="file:///r.md"),
        types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
            uri="mem://note", text="embedded words")),
    ], structured_content={"n": 1})
    content, meta = convert(result, tmp_path, "ses_1", "call_1")
    lines = content.split("\n")
    assert lines[0] == "first"
    saved = tmp_path / "ses_1" / "call_1-1.png"
    assert lines[1] == f"[image image/png, 18 bytes, saved to {saved}]"
    assert saved.read_bytes() == base64.b64decode(PIXEL)
    assert lines[2] == "[resource readme: file:///r.md]"
    assert lines[3:] == ["[resource mem://note]", "embedded words"]
    assert meta == {"structured": {"n": 1},
                    "attachments": [{"mime_type": "image/png", "bytes": 18, "path": str(saved)}]}


def test_structured_content_alone_is_what_the_model_reads(tmp_path: Path) -> None:
    content, meta = convert(types.CallToolResult(content=[], structured_content={"sum": 3}),
                            tmp_path, "s", "c")
    assert content == '{"sum": 3}'
    assert meta == {"structured": {"sum": 3}}
    empty, _ = convert(types.CallToolResult(content=[], is_error=True), tmp_path, "s", "c")
    assert empty == "(the tool failed, saying nothing)"


def test_bad_base64_is_named_not_raised(tmp_path: Path) -> None:
    bad = types.ImageContent(type="image", data="%%%", mime_type="image/png")
    content, _ = convert(types.CallToolResult(content=[bad]), tmp_path, "s", "c")
    assert content == "[image: the server sent data that is not base64]"
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("table", "field", "words"),
    [
        ({}, "mcp.servers.t", "either command"),
        ({"command": ["x"], "url": "https://a"}, "mcp.servers.t", "not both"),
        ({"command": [" "]}, "mcp.servers.t.command", "name the program"),
        ({"url": "file:///etc/passwd"}, "mcp.servers.t.url", "http:// or https://"),
        ({"url": "https://a", "headers": {"Authorization": "Bearer x"},
          "header_secrets": {"Authorization": "k"}}, "mcp.servers.t.headers", "only in the keyring"),
        ({"command": ["x"], "env": {"K": "v"}, "env_secrets": {"K": "k"}}, "mcp.servers.t.env",
         "only in the keyring"),
        ({"command": ["x"], "approval": "always"}, "mcp.servers.t.approval", ""),
        ({"command": ["x"], "timeout_s": 0}, "mcp.servers.t.timeout_s", ""),
        ({"command": ["x"], "env_secrets": {"K": "bad name!"}}, "mcp.servers.t", "matching regex"),
    ],
)
def test_a_bad_server_table_names_its_field(table: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ParamsError) as bad:
        validate({"mcp": {"servers": {"t": table}}})
    assert bad.value.field.startswith(field), bad.value.field
    assert words in bad.value.message


@pytest.mark.parametrize("name", ["a_b", "-a", "", "x" * 33, "a b", "a__b"])
def test_a_server_name_must_fit_in_a_tool_name(name: str) -> None:
    with pytest.raises(ParamsError) as bad:
        validate({"mcp": {"servers": {name: {"command": ["x"]}}}})
    assert bad.value.field == f"mcp.servers.{name}"
    assert "mcp__NAME__TOOL" in bad.value.message


def test_a_good_table_with_per_tool_approvals() -> None:
    cfg = validate({"mcp": {"servers": {"gh": {
        "url": "https://api.example/mcp", "header_secrets": {"Authorization": "gh-token"},
        "approval": "trusted", "tools": {"delete_repo": {"approval": "ask"}, "noisy": {"enabled": False}},
    }}}}).mcp.servers["gh"]
    assert cfg.transport == "http"
    assert (cfg.tool_approval("list_issues"), cfg.tool_approval("delete_repo")) == ("trusted", "ask")
    assert cfg.sandbox is True
    assert cfg.network is True


def test_a_server_installed_under_tmp_is_shown_read_only_over_the_sandboxes_private_tmp(
    tmp_path: Path
) -> None:
    assert str(tmp_path).startswith("/tmp/"), "pytest's folders are where /tmp hides them"
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(sys.executable)
    script = tmp_path / "checkout" / "server.py"
    script.parent.mkdir()
    script.touch()
    data = tmp_path / "data"
    (data / "spill").mkdir(parents=True)
    (data / "spill" / "x.py").touch()
    pool = McpPool(ConfigFile(tmp_path / "config.toml"), Secrets(data), unavailable("tests", data),
                   data, lambda status: None)
    shown = pool._under_tmp([str(venv_bin / "python"), str(script), "-m", "relative/path",
                             str(tmp_path / "missing.py"), str(data / "spill" / "x.py"),
                             "/usr/bin/env"])
    assert shown == [tmp_path / "checkout", tmp_path / "venv"]


def test_progress_notifications_read_as_lines() -> None:
    assert progress_line(3, 10, "Indexing   files") == "[3/10] Indexing files\n"
    assert progress_line(0.5, None, None) == "[0.5]\n"
    assert progress_line(2, 0, "x\ny") == "[2] x y\n", "a line is one line"
