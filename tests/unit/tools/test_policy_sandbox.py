"""The policy beside the sandbox: computed commands, escapes from the sandbox, and the fallback
that asks for everything not plainly read-only where no sandbox exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.tools import policy
from backend.tools.readonly import why_not_read_only

OBFUSCATED_DELETES = [
    "$(printf rm) -rf D",
    "a=rm; $a -rf D",
    "`echo rm` -rf D",
    "echo cm0gLXJmIEQK | base64 -d | sh",
    "echo cm0gLXJmIEQK | base64 -d | bash -s",
    "cat payload | python3 -",
    "bash -c '{rm,-rf,D}'",
    "/bin/r? -rf D",
    "eval \"$(printf 'rm -rf D')\"",
    "sh -c \"$cmd\"",
]


@pytest.mark.parametrize("command", OBFUSCATED_DELETES)
def test_a_command_whose_program_cannot_be_read_asks_in_smart_mode(command: str) -> None:
    guard = policy.command_guard(command, "smart")
    assert guard is not None, command
    assert guard.kind == "dangerous", command


@pytest.mark.parametrize("command", [
    "$(printf rm) -rf ~", "a=rm; $a -rf /", "`echo rm` -rf $HOME/", "$(printf rm) -fr ~/*",
])
def test_a_computed_program_with_a_never_run_delete_is_never_run(command: str) -> None:
    guard = policy.command_guard(command, "off")
    assert guard is not None, command
    assert guard.kind == "hardline", command


@pytest.mark.parametrize("command", ["ls -la", "git status", "echo $HOME", "python3 -m pytest -q",
                                     "cat a | grep b | sort", "make test"])
def test_ordinary_commands_still_run_unasked_in_the_sandbox(command: str) -> None:
    assert policy.sandboxed_guard(command, "smart", None) is None


def test_leaving_the_sandbox_asks_and_says_why() -> None:
    net = policy.sandboxed_guard("curl -sO https://example.com/x", "smart", "network")
    assert net is not None
    assert net.rule_key == "@network"
    assert "network" in net.reason
    out = policy.sandboxed_guard("cp a /etc/b", "smart", "unsandboxed")
    assert out is not None
    assert out.rule_key == "@unsandboxed"
    assert "outside the sandbox" in out.reason
    both = policy.sandboxed_guard("rm -rf build", "smart", "network")
    assert both is not None
    assert both.rule_key == "rm -rf"
    assert "network" in both.reason
    assert policy.sandboxed_guard("curl x", "off", "network") is None
    hard = policy.sandboxed_guard("rm -rf /", "off", "unsandboxed")
    assert hard is not None
    assert hard.kind == "hardline"


def test_rules_for_an_escape_cover_only_that_escape() -> None:
    cwd = Path("/tmp")
    net = {"command": "curl -s example.com", "network": True}
    assert policy.rule_allows("terminal", "@network", "terminal", net, cwd)
    assert not policy.rule_allows("terminal", "@network", "terminal",
                                  {"command": "curl x", "sandbox": False}, cwd)
    assert not policy.rule_allows("terminal", "@network", "terminal",
                                  {"command": "rm -rf b", "network": True}, cwd)
    # A rule for a command never lets that command out of the sandbox.
    assert policy.rule_allows("terminal", "rm -rf", "terminal", {"command": "rm -rf b"}, cwd)
    assert not policy.rule_allows("terminal", "rm -rf", "terminal",
                                  {"command": "rm -rf b", "sandbox": False}, cwd)
    assert not policy.rule_allows("terminal", "rm -rf", "terminal",
                                  {"command": "rm -rf b", "network": True}, cwd)


# ---- the fallback: plainly read-only or ask ------------------------------------------------


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    data = home / ".local" / "share" / "turnkey"
    data.mkdir(parents=True)
    (data / "backend.json").write_text("{}")
    (home / "src").mkdir()
    (home / "src" / "a.py").write_text("x = 1\n")
    (home / "link").symlink_to(data)
    return home, data


@pytest.mark.parametrize("command", [
    "ls -la", "cat src/a.py", "grep -n x src/a.py", "git status", "git log --oneline -5",
    "head -5 src/a.py | wc -l", "find src -name '*.py'", "rg x src", "echo hi 2>/dev/null",
    "python3 --version", "wc -l < src/a.py", "pwd",
])
def test_plainly_read_only_commands(folders: tuple[Path, Path], command: str) -> None:
    home, data = folders
    assert why_not_read_only(command, home, data) is None, command
    assert policy.unsandboxed_guard(command, "smart", home, data) is None


@pytest.mark.parametrize(("command", "why"), [
    ("touch x", "touch is not a command known to only read"),
    ("echo x > f", "writes to f"),
    ("cat ~/.local/share/turnkey/backend.json", "data folder"),
    ("cat .local/share/tur*/backend.json", "data folder"),
    ("cat link/backend.json", "data folder"),
    ("wc -c < .local/share/turnkey/backend.json", "data folder"),
    ("grep -r token .", "holds Turnkey's data folder"),
    ("rg token", "holds Turnkey's data folder"),
    ("cat $(printf x)", "computed"),
    ("cat /proc/$PPID/environ", "computed"),
    ("cat /proc/1/environ", "/proc"),
    ("tr '\\0' '\\n' < /proc/self/environ", "/proc"),
    ("python3 -c 'print(1)'", "runs code"),
    ("git -c core.pager=sh log", "git with configuration"),
    ("git push", "not a read-only git command"),
    ("find . -name x -delete", "find that deletes"),
    ("sort -o out in", "sort that writes"),
    ("cd .. && ls", "cd is not"),
    ("./run.sh", "not a command known"),
    ("ls; rm x", "rm is not"),
    ("ls | xargs rm", "rm is not"),
])
def test_everything_else_asks_and_says_why(folders: tuple[Path, Path], command: str, why: str) -> None:
    home, data = folders
    reason = why_not_read_only(command, home, data)
    assert reason is not None, command
    assert why in reason, (command, reason)
    guard = policy.unsandboxed_guard(command, "smart", home, data)
    assert guard is not None
    assert guard.kind == "dangerous"
    if policy.command_guard(command, "smart") is None:  # else the policy's own reason stands
        assert "without a sandbox" in guard.reason


def test_the_fallback_keeps_the_other_modes(folders: tuple[Path, Path]) -> None:
    home, data = folders
    assert policy.unsandboxed_guard("touch x", "off", home, data) is None
    ask = policy.unsandboxed_guard("ls", "ask", home, data)
    assert ask is not None
    assert ask.reason == policy.ASK_MODE_REASON
    hard = policy.unsandboxed_guard("rm -rf ~", "off", home, data)
    assert hard is not None
    assert hard.kind == "hardline"


@pytest.mark.parametrize("command", [
    "python3 -c \"import shutil; shutil.rmtree('.ssh')\"", "perl -e 'unlink glob q(.ssh/*)'",
    "cd x && node -e 1", "sh -c 'ruby -e 1'", "find . | awk '{system(\"rm \" $0)}'",
])
def test_interpreters_ask_in_a_session_rooted_at_home(command: str) -> None:
    guard = policy.sandboxed_guard(command, "smart", None, Path.home())
    assert guard is not None
    assert "in a session whose folder is your home folder" in guard.reason
    assert policy.sandboxed_guard(command, "smart", None, Path("/")) is not None
    assert policy.sandboxed_guard(command, "off", None, Path.home()) is None, "off asks nothing"


def test_a_project_folder_or_a_plain_command_at_home_asks_nothing(tmp_path: Path) -> None:
    assert policy.sandboxed_guard("python3 -c 'print(1)'", "smart", None, tmp_path) is None
    assert policy.sandboxed_guard("ls -la; git status", "smart", None, Path.home()) is None
