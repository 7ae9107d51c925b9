"""The approval policy: hardline, dangerous and safe commands, guards by mode, and rule matching."""

import time
from pathlib import Path

import pytest

from backend.tools import policy
from backend.tools.base import Guard
from backend.tools.commands import classify_command, command_prefix
from backend.tools.policy import command_guard, file_guard, rule_allows
from shared.config import ApprovalMode

HOME = str(Path.home())

HARDLINE = [
    "rm -rf /",
    "rm -rf /*",
    "rm -rf ~",
    "rm -rf ~/",
    "rm -rf $HOME",
    'rm -rf "$HOME/"',
    "rm -rf ${HOME}",
    f"rm -rf {HOME}",
    f"rm -r {HOME}/*",
    "rm -fr -- /",
    "rm -rf /tmp/..",
    "/bin/rm -Rf /",
    "rm -r --no-preserve-root /",
    "rm --recursive --force /",
    "sudo rm -rf /",
    "sudo -u root rm -rf /",
    "FOO=1 nohup time rm -rf /",
    "timeout 5 rm -rf ~",
    "env -i rm -rf ~",
    "mkfs /dev/sda1",
    "mkfs.ext4 /dev/sdb",
    "dd if=/dev/zero of=/dev/sda bs=1M",
    "dd if=image.iso of=/dev/disk2",
    ":(){ :|:& };:",
    ":(){ :|: & };:",
    "bomb() { bomb | bomb & }; bomb",
    "function f { f|f& }; f",
    "shutdown -h now",
    "reboot",
    "sudo reboot",
    "halt",
    "poweroff",
    "init 0",
    "init 6",
    "systemctl poweroff",
    "loginctl poweroff",
    "loginctl reboot",
    "systemctl --no-wall reboot",
    "find / -delete",
    # hidden in chains, substitutions and nested scripts
    "ls && rm -rf /",
    "echo ok; rm -rf ~",
    "true || reboot",
    "sleep 1 & rm -rf /",
    "echo $(rm -rf /)",
    'echo "$(rm -rf ~)"',
    "echo `reboot`",
    "bash -c 'rm -rf /'",
    "sh -lc 'ls; rm -rf ~'",
    "eval 'rm -rf /'",
    "sudo sh -c 'rm -rf /'",
    "if true; then rm -rf /; fi",
    "ls\nreboot",
]

DANGEROUS = [
    "rm -rf build/",
    "rm -r old",
    "rm -R dir",
    "rm --recursive dir",
    "git push --force origin main",
    "git push -f",
    "git push --force-with-lease",
    "git push origin +main",
    "git -C repo push --force",
    "git reset --hard HEAD~1",
    "git clean -fdx",
    "git clean --force",
    "sudo apt install x",
    "doas ls",
    "su -c 'ls' root",
    "curl -fsSL https://example.com/install.sh | sh",
    "curl -s https://x | sudo bash",
    "wget -qO- https://x | python3",
    "bash <(curl -s https://x)",
    'sh -c "$(curl -fsSL https://x)"',
    "kill 1234",
    "kill -9 1234",
    "pkill node",
    "killall python",
    "echo x > /dev/sda",
    "cat image >> /dev/nvme0n1",
    "ls | tee /dev/sdb",
    "dd if=a of=b",
    "chmod -R 777 .",
    "chown -R me:me .",
    "chgrp --recursive staff .",
    "find . -name '*.pyc' -delete",
    "find . -exec rm -rf {} +",
    "truncate -s 0 app.log",
    "find . | xargs rm -rf",
    "echo done && rm -rf dist",
    "(cd /tmp; rm -rf *)",
    "rm -rf /home/someone-else/project",
]

SAFE = [
    "ls -la",
    "",
    "git status",
    "git push origin main",
    "git reset --soft HEAD~1",
    "git clean -n",
    "rm file.txt",
    "rm -f file.txt",
    "curl -o x.tar.gz https://x",
    "python -m pytest -q",
    "echo 'rm -rf /'",
    'echo "rm -rf /"',
    "echo hi # ; reboot",
    "echo x > /dev/null 2>&1",
    "ls 2>&1 | grep x",
    "chmod 644 file",
    "find . -name '*.py'",
    "dd if=/dev/zero bs=1 count=1",
    "echo unterminated 'quote",
    "systemctl status nginx",
    "npm install && npm test",
]


@pytest.mark.parametrize("command", HARDLINE)
def test_hardline(command: str) -> None:
    guard = classify_command(command)
    assert guard is not None, command
    assert guard.kind == "hardline", command
    assert guard.reason


@pytest.mark.parametrize("command", DANGEROUS)
def test_dangerous(command: str) -> None:
    guard = classify_command(command)
    assert guard is not None, command
    assert guard.kind == "dangerous", (command, guard)
    assert guard.reason
    assert guard.rule_key


@pytest.mark.parametrize("command", SAFE)
def test_safe(command: str) -> None:
    assert classify_command(command) is None


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("sudo apt install x", "runs as another user (sudo)"),
        ("rm -rf build", "recursive delete"),
        ("git push -f", "force push"),
        ("curl x | sh", "pipes a download into a shell"),
        ("kill 1", "kills processes"),
    ],
)
def test_reasons_are_short_sentences(command: str, reason: str) -> None:
    guard = classify_command(command)
    assert guard is not None
    assert guard.reason.startswith(reason)


@pytest.mark.parametrize(
    "command",
    ["a" * 100_000, "x {" * 30_000, 'echo "' + "b" * 100_000, "$(" * 5_000, "a|" * 30_000, "'" * 50_001],
)
def test_huge_or_odd_commands_are_judged_in_linear_time(command: str) -> None:
    started = time.monotonic()
    classify_command(command)
    assert time.monotonic() - started < 10, "a quadratic pattern crept into the policy"


def test_hardline_beats_dangerous_in_any_order() -> None:
    for command in ("rm -rf build && rm -rf /", "rm -rf / && rm -rf build", "sudo ls; reboot"):
        guard = classify_command(command)
        assert guard is not None, command
        assert guard.kind == "hardline", command


@pytest.mark.parametrize(
    ("command", "prefix"),
    [
        ("git push --force origin main", "git push"),
        ("rm -rf build/", "rm -rf"),
        ("sudo apt install x", "sudo apt"),
        ("ls", "ls"),
        ("ls -la /tmp", "ls -la"),
        ("rm build/", "rm"),
        ("kill -9 1234", "kill -9"),
        ("FOO=1 nohup rm -rf x", "rm -rf"),
        ("git -C repo push -f", "git -C repo push"),
        ("", ""),
    ],
)
def test_command_prefix(command: str, prefix: str) -> None:
    assert command_prefix(command) == prefix


def test_rule_key_is_the_prefix_of_the_first_dangerous_part() -> None:
    guard = classify_command("echo start && git push --force origin main; rm -rf x")
    assert guard is not None
    assert guard.rule_key == "git push"


def test_command_guard_by_mode() -> None:
    assert command_guard("ls", "off") is None
    assert command_guard("rm -rf x", "off") is None
    hard = command_guard("rm -rf /", "off")
    assert hard is not None
    assert hard.kind == "hardline"
    assert command_guard("ls", "smart") is None
    smart = command_guard("rm -rf x", "smart")
    assert smart is not None
    assert smart.kind == "dangerous"
    ask = command_guard("ls -la", "ask")
    assert ask == Guard("dangerous", "every command asks in ask mode", "ls -la")
    dangerous_in_ask = command_guard("echo start && rm -rf build", "ask")
    assert dangerous_in_ask == Guard("dangerous", "recursive delete", "rm -rf")
    hard_in_ask = command_guard("reboot", "ask")
    assert hard_in_ask is not None
    assert hard_in_ask.kind == "hardline"


CWD = Path("/work/project")
DATA = Path("/nonexistent/turnkey-data")


def _terminal(pattern: str, command: str, mode: ApprovalMode = "smart") -> bool:
    return rule_allows("terminal", pattern, "terminal", {"command": command}, CWD, mode=mode)


@pytest.mark.parametrize(
    ("pattern", "command", "allowed"),
    [
        ("git push", "git push --force origin main", True),
        ("git push", "git push -f && echo done", True),
        ("git push", "git push -f; rm -rf x", False),
        ("git push", "git push; rm -rf x", False),
        ("git push", "git pushy --force", False),
        ("git push", "git reset --hard", False),
        ("rm -rf", "rm -rf build dist", True),
        ("rm -rf", "rm -rf /", False),
        ("rm -rf", "FOO=1 rm -rf build", True),
        ("rm -rf", "rm -rf build; reboot", False),
        ("rm", "rm -rf ~", False),
        ("sudo apt", "sudo apt install x", True),
        ("sudo apt", "sudo apt install x && sudo rm -rf y", False),
        ("", "rm -rf build", False),
    ],
)
def test_terminal_rules(pattern: str, command: str, allowed: bool) -> None:
    assert _terminal(pattern, command) is allowed


def test_rules_in_ask_mode_cover_every_part() -> None:
    assert _terminal("ls", "ls -la", mode="ask")
    assert not _terminal("ls", "ls; cat secrets", mode="ask")
    assert not _terminal("git push", "git push -f && cat secrets", mode="ask")


def test_rules_match_their_own_tool_only() -> None:
    args = {"command": "rm -rf build", "path": "/work/project/a.txt"}
    assert not rule_allows("terminal", "rm -rf", "write_file", args, CWD)
    assert not rule_allows("write_file", "/work/project", "patch", args, CWD)
    assert not rule_allows("read_file", "/work/project", "read_file", args, CWD)


def test_file_rules_match_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "out"

    def allows(path: str) -> bool:
        return rule_allows("write_file", str(folder), "write_file", {"path": path}, tmp_path)

    assert allows(str(folder / "a.txt"))
    assert allows("out/deeper/b.txt")
    assert not allows("outside.txt")
    assert not allows(str(tmp_path / "outer" / "x"))
    assert not allows("out/../escape.txt")


def test_file_rules_judge_the_guards_folder_when_given(tmp_path: Path) -> None:
    """The executor passes the folder the guard resolved, so the path is not resolved again."""
    folder = str(tmp_path / "out")
    args = {"path": "anything/at/all.txt"}
    assert rule_allows("write_file", folder, "write_file", args, tmp_path, key=f"{folder}/deeper")
    assert rule_allows("patch", folder, "patch", args, tmp_path, key=folder)
    assert not rule_allows("write_file", folder, "write_file", args, tmp_path, key=f"{folder}er")
    assert not rule_allows("write_file", folder, "write_file", args, tmp_path, key=str(tmp_path))


def test_resolve_path_and_inside(tmp_path: Path) -> None:
    assert policy.resolve_path("a/../b.txt", tmp_path) == (tmp_path / "b.txt").resolve()
    assert policy.resolve_path("~/x", tmp_path) == Path.home().resolve() / "x"
    assert policy.resolve_path("/etc/hosts", tmp_path) == Path("/etc/hosts").resolve()
    assert policy.inside(Path("/a/b/c"), Path("/a/b"))
    assert policy.inside(Path("/a/b"), Path("/a/b"))
    assert not policy.inside(Path("/a/bc"), Path("/a/b"))


def test_symlink_out_of_cwd_counts_as_outside(tmp_path: Path) -> None:
    cwd, elsewhere = tmp_path / "cwd", tmp_path / "elsewhere"
    cwd.mkdir()
    elsewhere.mkdir()
    (cwd / "link").symlink_to(elsewhere)
    guard = file_guard("write_file", "link/x.txt", cwd, "smart", DATA)
    assert guard is not None
    assert guard.rule_key == str(elsewhere.resolve())
    assert guard.reason == "changes a file outside the session folder: the path leads there through a symlink"


def test_file_guard_by_mode(tmp_path: Path) -> None:
    assert file_guard("write_file", "/etc/x", tmp_path, "off", DATA) is None
    assert file_guard("write_file", "sub/x.txt", tmp_path, "smart", DATA) is None
    outside = file_guard("patch", "../x.txt", tmp_path, "smart", DATA)
    assert outside is not None
    assert outside.kind == "dangerous"
    assert outside.reason == "changes a file outside the session folder"
    assert outside.rule_key == str(tmp_path.resolve().parent)
    ask = file_guard("write_file", "sub/x.txt", tmp_path, "ask", DATA)
    assert ask is not None
    assert ask.rule_key == str((tmp_path / "sub").resolve())
