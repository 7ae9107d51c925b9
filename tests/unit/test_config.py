"""Config: defaults, validation errors that name the field, atomic patching, keys never shown."""

import stat
import tomllib
from pathlib import Path

import pytest

from backend.config import ConfigFile
from backend.errors import ConfigError, InvalidParams


def test_defaults_without_a_file(tmp_path: Path) -> None:
    cfg = ConfigFile(tmp_path / "config.toml").load()
    assert cfg.limits.max_iterations == 90
    assert cfg.compression.threshold == 0.5
    assert cfg.max_frame_bytes == 4 * 1024 * 1024
    assert cfg.provider() is None


def test_bad_file_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[limits]\nmax_iterations = "many"\n')
    with pytest.raises(ConfigError, match=r"limits\.max_iterations"):
        ConfigFile(path).load()


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"limits": {"max_iterations": 0}}, "patch.limits.max_iterations"),
        ({"approvals": {"mode": "sometimes"}}, "patch.approvals.mode"),
        ({"colour": "blue"}, "patch.colour"),
        ({"default_provider": "nope"}, "patch.default_provider"),
        ({"providers": {"x": {"base_url": "http://h"}}}, "patch.providers.x.model"),
    ],
)
def test_patch_errors_name_the_field(tmp_path: Path, patch: dict[str, object], field: str) -> None:
    cf = ConfigFile(tmp_path / "config.toml")
    cf.load()
    with pytest.raises(InvalidParams) as err:
        cf.patch(patch)
    assert err.value.field == field
    assert not (tmp_path / "config.toml").exists(), "a refused patch writes nothing"


def test_patch_merges_writes_0600_and_hides_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_KEY", "sk-secret-value-123456")
    path = tmp_path / "config.toml"
    cf = ConfigFile(path)
    cf.load()
    cf.patch({"providers": {"main": {"model": "m", "api_key_env": "TEST_KEY"}},
              "default_provider": "main"})
    cf.patch({"limits": {"turn_timeout_s": 60}})
    on_disk = tomllib.loads(path.read_text())
    assert on_disk["providers"]["main"]["model"] == "m"
    assert on_disk["limits"] == {"turn_timeout_s": 60}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    shown = cf.effective(lambda name: None)
    assert shown.providers["main"].api_key == "set"
    assert "sk-secret" not in repr(shown) + path.read_text()
    assert ConfigFile(path).load() == cf.config, "what was written reads back the same"
