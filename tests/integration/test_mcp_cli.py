"""`turnkey mcp list|add|remove|test` end to end: the real CLI as a process, a real backend, real
MCP servers (the `mcp-server-time` package over stdio, a program that fails at start), and a
chat turn whose MCP tool call the terminal names by its server.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory

TIME = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
BROKEN = [sys.executable, "-c", "import sys; sys.stderr.write('cannot open the vault\\n'); "
          "sys.exit(3)"]


class Cli:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.argv = [sys.executable, "-m", "desktop.cli", "--data-dir", str(backend.data_dir)]

    def __call__(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.argv, *args], env=self.backend.env(), input=stdin,
                              capture_output=True, text=True, timeout=120, check=False)

    def servers(self) -> dict[str, Any]:
        config = tomllib.loads((self.backend.data_dir / "config.toml").read_text())
        return dict(config.get("mcp", {}).get("servers", {}))


@pytest.fixture
def cli(backend_factory: BackendFactory, fake_provider: FakeOpenAI) -> Cli:
    return Cli(backend_factory(fake_provider.base_url, extra_env={"TURNKEY_NO_KEYRING": "1"}))


def test_add_list_test_and_remove_a_stdio_server(cli: Cli) -> None:
    none = cli("mcp", "list")
    assert none.returncode == 0, none.stderr
    assert none.stdout.startswith("no MCP servers configured")

    added = cli("mcp", "add", "time", "--", *TIME)  # its own options (--local-timezone) pass
    assert added.returncode == 0, added.stderr
    assert added.stdout.splitlines()[0] == f"added MCP server 'time': {' '.join(TIME)}"
    assert "turnkey mcp test time" in added.stdout
    assert cli.servers() == {"time": {"command": TIME}}

    again = cli("mcp", "add", "time", "--", *TIME)
    assert again.returncode == 1
    assert "an MCP server called 'time' already exists" in again.stderr
    assert cli.servers() == {"time": {"command": TIME}}, "left as it was"

    listed = cli("mcp", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["time", "stopped", "stdio", "tools", "not", "listed", "yet"]

    tested = cli("mcp", "test", "time")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    lines = tested.stdout.splitlines()
    assert lines[0].startswith("ok: time (stdio) listed 2 tools in "), lines
    assert lines[0].endswith(" ms")
    assert sorted(line.split()[0] for line in lines[1:]) == ["convert_time", "get_current_time"]
    assert all(line.split()[1] == "ask" for line in lines[1:])

    with_tools = cli("mcp", "list", "--tools")
    assert with_tools.returncode == 0, with_tools.stderr
    lines = with_tools.stdout.splitlines()
    assert lines[0].split() == ["time", "ready", "stdio", "2", "tools"]
    assert sorted(line.split()[0] for line in lines[1:]) == ["convert_time", "get_current_time"]

    one = cli("mcp", "list", "time")
    assert one.returncode == 0, one.stderr
    assert one.stdout.split()[:2] == ["time", "ready"]

    removed = cli("mcp", "remove", "time")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.strip() == "removed MCP server 'time'"
    assert cli.servers() == {}
    gone = cli("mcp", "remove", "time")
    assert gone.returncode == 1
    assert gone.stderr.strip() == "turnkey: no MCP server called 'time'"


def test_a_server_that_fails_says_why_and_exits_1(cli: Cli) -> None:
    assert cli("mcp", "add", "vault", "--", *BROKEN).returncode == 0
    failed = cli("mcp", "test", "vault")
    assert failed.returncode == 1
    assert failed.stdout.startswith("failed: vault (stdio) after "), failed.stdout
    assert "cannot open the vault" in failed.stdout  # its last words on stderr
    listed = cli("mcp", "list")
    assert listed.stdout.splitlines()[0].split()[:3] == ["vault", "failed", "stdio"]
    assert listed.stdout.splitlines()[1].startswith("  error: ")
    assert "cannot open the vault" in listed.stdout

    unknown = cli("mcp", "test", "nosuch")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("turnkey: ")
    assert "nosuch" in unknown.stderr


def test_an_http_server_with_a_key_in_a_secret_and_the_options(cli: Cli) -> None:
    added = cli("mcp", "add", "web", "--url", "https://mcp.example.com/mcp",
                "--header-secret", "Authorization=mcp-web", "--approval", "trusted")
    assert added.returncode == 0, added.stderr
    assert "turnkey secret set mcp-web" in added.stdout
    assert cli.servers() == {"web": {"url": "https://mcp.example.com/mcp", "approval": "trusted",
                                     "header_secrets": {"Authorization": "mcp-web"}}}
    stored = cli("secret", "set", "mcp-web", stdin="Bearer abc-LEAKCHECK\n")
    assert stored.returncode == 0, stored.stderr
    assert json.loads((cli.backend.data_dir / "secrets.json").read_text())["mcp-web"] == \
        "Bearer abc-LEAKCHECK"
    assert "LEAKCHECK" not in (cli.backend.data_dir / "config.toml").read_text()

    env = cli("mcp", "add", "tool", "--env", "LEVEL=debug", "--no-sandbox", "--", "npx", "-y", "x")
    assert env.returncode == 0, env.stderr
    assert cli.servers()["tool"] == {"command": ["npx", "-y", "x"], "env": {"LEVEL": "debug"},
                                     "sandbox": False}


@pytest.mark.parametrize(("args", "code", "words"), [
    (["mcp", "add", "x"], 2, "give either a command after -- (a stdio server) or --url URL"),
    (["mcp", "add", "x", "--url", "https://h", "--", "prog"], 2, "give either a command"),
    (["mcp", "add", "x", "--env", "NOVALUE", "--", "prog"], 2, "--env takes NAME=VALUE"),
    (["mcp", "add", "my_server", "--", "prog"], 1, "a server's name is 1 to 32 letters"),
    (["mcp", "add", "web", "--url", "ftp://h"], 1, "must start with http:// or https://"),
])
def test_add_refuses_what_is_wrong_with_the_backends_words(
    cli: Cli, args: list[str], code: int, words: str,
) -> None:
    done = cli(*args)
    assert done.returncode == code, done.stdout + done.stderr
    assert words in done.stderr
    assert done.stderr.startswith("turnkey: ")
    assert cli.servers() == {}


def test_chat_names_an_mcp_tool_by_its_server(cli: Cli, fake_provider: FakeOpenAI, tmp_path: Any) -> None:
    assert cli("mcp", "add", "time", "--approval", "trusted", "--", *TIME).returncode == 0
    fake_provider.script(
        Reply.calls({"name": "mcp__time__get_current_time", "arguments": {"timezone": "UTC"}}),
        Reply(deltas=["It is now."]),
    )
    chat = cli("chat", "--cwd", str(tmp_path), "what time is it?")
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout.strip() == "It is now."
    assert "\n[get_current_time (time · MCP)] " in chat.stderr, chat.stderr
    assert "[get_current_time (time · MCP) ok, " in chat.stderr, chat.stderr
    assert "mcp__time__" not in chat.stderr
    assert "time · get_current_time" not in chat.stderr, "the name is said once"
