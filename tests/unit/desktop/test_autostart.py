"""The login entry (`desktop/autostart.py`): where it goes, what it says, its Exec line read back
by the Desktop Entry specification's rules, and the option's state read from the file."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest

from desktop import autostart


def exec_argv(value: str) -> list[str]:
    """An Exec value as a launcher reads it: the string type's escapes, then the quoting rules
    (inside double quotes a backslash escapes `"`, `` ` ``, `$` and `\\`), then `%%`."""
    unescaped, i = [], 0
    while i < len(value):  # the string type: \\s \\n \\t \\r \\\\
        if value[i] == "\\" and i + 1 < len(value):
            unescaped.append({"s": " ", "n": "\n", "t": "\t", "r": "\r"}.get(value[i + 1],
                                                                          value[i + 1]))
            i += 2
        else:
            unescaped.append(value[i])
            i += 1
    text, args, word, quoted, i = "".join(unescaped), [], "", False, 0
    started = False
    while i < len(text):
        ch = text[i]
        if quoted and ch == "\\" and text[i + 1] in '"`$\\':
            word, i = word + text[i + 1], i + 2
            continue
        if ch == '"':
            quoted, started = not quoted, True
        elif ch == " " and not quoted:
            if started:
                args.append(word)
            word, started = "", False
        else:
            word, started = word + ch, True
        i += 1
    if started:
        args.append(word)
    return [a.replace("%%", "%") for a in args]


def entry(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    assert lines[0] == "[Desktop Entry]"
    return dict(line.split("=", 1) for line in lines[1:] if line)


def test_the_entry_goes_under_xdg_config_home_else_dot_config() -> None:
    assert autostart.entry_path({"XDG_CONFIG_HOME": "/x/conf"}) == Path("/x/conf/autostart/turnkey.desktop")
    assert autostart.entry_path({}) == Path.home() / ".config" / "autostart" / "turnkey.desktop"
    relative = autostart.entry_path({"XDG_CONFIG_HOME": "conf"})
    assert relative == Path.home() / ".config" / "autostart" / "turnkey.desktop", "the spec ignores it"


def test_on_writes_a_valid_entry_whose_exec_starts_this_checkout_in_the_background(
    tmp_path: Path,
) -> None:
    path = tmp_path / "conf" / "autostart" / "turnkey.desktop"
    data = tmp_path / "my data 100% \"quoted\" $HOME `x` \\ end"
    assert not autostart.enabled(path)
    assert autostart.set_enabled(True, data, path) is True
    fields = entry(path)
    assert fields["Type"] == "Application"
    assert fields["Name"] == "Turnkey"
    assert fields["Icon"] == "turnkey"
    assert fields["X-GNOME-Autostart-enabled"] == "true"
    assert fields["NoDisplay"] == "true"
    argv = exec_argv(fields["Exec"])
    checkout = Path(autostart.__file__).resolve().parents[1]
    assert argv == ["env", f"PYTHONPATH={checkout}", sys.executable, "-m", "desktop.cli",
                    "--data-dir", str(data.resolve()), "--background"]
    assert exec_argv(fields["TryExec"]) == [sys.executable], "skipped once the program is gone"
    validator = shutil.which("desktop-file-validate")
    if validator is not None:  # (Debian's desktop-file-utils)
        run = subprocess.run([validator, str(path)], capture_output=True, text=True)
        assert run.returncode == 0, run.stdout
        assert not run.stdout.strip(), "no warning either"


def test_the_default_data_folder_is_not_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(platformdirs, "user_data_dir", lambda *a, **k: str(tmp_path))
    assert autostart.launch_command(tmp_path)[-1:] == ["--background"]
    assert "--data-dir" not in autostart.launch_command(tmp_path)


def test_a_bundle_names_its_own_executable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", "/opt/turnkey/turnkey")
    argv = autostart.launch_command(tmp_path / "d")
    assert argv == ["/opt/turnkey/turnkey", "--data-dir", str((tmp_path / "d").resolve()),
                    "--background"]


def test_off_removes_it_and_the_box_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "autostart" / "turnkey.desktop"
    autostart.enable(tmp_path / "d", path)
    assert autostart.enabled(path)
    # Switched off by the session's own settings: the option reads off.
    path.write_text(path.read_text().replace("X-GNOME-Autostart-enabled=true",
                                             "X-GNOME-Autostart-enabled=false"))
    assert not autostart.enabled(path)
    path.write_text(path.read_text() + "Hidden=true\n")
    assert not autostart.enabled(path)
    assert autostart.set_enabled(False, tmp_path / "d", path) is False
    assert not path.exists()
    autostart.disable(path)  # nothing there: nothing to do


def test_a_link_in_its_place_is_replaced_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    path = tmp_path / "autostart" / "turnkey.desktop"
    path.parent.mkdir()
    path.symlink_to(target)
    autostart.enable(tmp_path / "d", path)
    assert target.read_text() == "keep me"
    assert not path.is_symlink()
    assert list(path.parent.iterdir()) == [path], "no temporary file left"


def test_a_control_character_is_refused() -> None:
    with pytest.raises(ValueError, match="control character"):
        autostart.exec_line(["turnkey", "--data-dir", "a\nb"])
