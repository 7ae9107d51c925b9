"""This computer's time zone as the backend and the desktop both guess it, and zone names."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.zones import local_zone_name, valid_zone


def linked(tmp_path: Path, target: str) -> Path:
    """An /etc/localtime stand-in: a link to `target` under tmp_path (made, so it resolves)."""
    file = tmp_path / target
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(b"")
    link = tmp_path / "localtime"
    link.symlink_to(file)
    return link


def test_tz_wins_with_or_without_its_colon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    link = linked(tmp_path, "zoneinfo/Asia/Tokyo")
    monkeypatch.setenv("TZ", "Europe/Paris")
    assert local_zone_name(link) == "Europe/Paris"
    monkeypatch.setenv("TZ", ":America/New_York")
    assert local_zone_name(link) == "America/New_York"


@pytest.mark.parametrize("tz", ["", "Mars/Olympus", "../../etc/passwd"])
def test_without_a_usable_tz_the_link_names_the_zone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tz: str,
) -> None:
    monkeypatch.setenv("TZ", tz)
    assert local_zone_name(linked(tmp_path, "usr/share/zoneinfo/Asia/Tokyo")) == "Asia/Tokyo"


@pytest.mark.parametrize("target", ["zoneinfo/Mars/Olympus", "etc/some-file"])
def test_otherwise_utc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    monkeypatch.delenv("TZ", raising=False)
    assert local_zone_name(linked(tmp_path, target)) == "UTC"
    assert local_zone_name(tmp_path / "absent") == "UTC"


def test_the_guess_on_this_computer_is_a_zone() -> None:
    assert valid_zone(local_zone_name())


@pytest.mark.parametrize(("name", "valid"), [
    ("Europe/Paris", True), ("UTC", True),
    ("Mars/Olympus", False), ("../../etc/passwd", False), ("/etc/passwd", False), ("", False),
])
def test_valid_zone(name: str, valid: bool) -> None:
    assert valid_zone(name) is valid
