"""Which models see images: the config's `vision` and `model_vision`, and the defaults."""

from pathlib import Path

import pytest

from backend.config import ConfigFile
from backend.errors import InvalidParams
from shared.config import ProviderConfig, sees_images


@pytest.mark.parametrize(("model", "sees"), [
    ("gpt-4o-mini", True), ("gpt-4.1", True), ("gpt-5-mini", True), ("o3", True),
    ("o4-mini", True), ("openai/gpt-4o", True), ("llava:13b", True),
    ("Qwen2.5-VL-7B-Instruct", True), ("pixtral-12b", True), ("gemma-3-27b-it", True),
    ("llama3.2-vision", True),
    ("gpt-3.5-turbo", False), ("llama3.1:8b", False), ("mistral-small", False),
    ("some-model", False),
])
def test_an_openai_compatible_model_sees_by_its_name(model: str, sees: bool) -> None:
    assert sees_images(ProviderConfig(model=model)) is sees


def test_kinds_and_overrides() -> None:
    assert sees_images(ProviderConfig(model="claude-x", kind="anthropic"))
    assert not sees_images(ProviderConfig(model="smollm2", kind="local"))
    # The provider's setting holds for its models, a model's own setting over it.
    cfg = ProviderConfig(model="my-vlm", vision=True, model_vision={"text-only": False})
    assert sees_images(cfg)
    assert sees_images(cfg, "another")
    assert not sees_images(cfg, "text-only")
    blind = ProviderConfig(model="claude-x", kind="anthropic", vision=False,
                           model_vision={"claude-y": True})
    assert not sees_images(blind)
    assert sees_images(blind, "claude-y")
    # A local model's prompt is text: it never sees, whatever the config says.
    assert not sees_images(ProviderConfig(model="m", kind="local", vision=True))


@pytest.mark.parametrize(("table", "field"), [
    ({"model": "m", "vision": "yes"}, "patch.providers.p.vision"),
    ({"model": "m", "model_vision": {"x": "no"}}, "patch.providers.p.model_vision"),
    ({"model": "m", "model_vision": ["x"]}, "patch.providers.p.model_vision"),
])
def test_config_set_names_a_bad_vision_field(tmp_path: Path, table: dict[str, object],
                                             field: str) -> None:
    cf = ConfigFile(tmp_path / "config.toml")
    cf.load()
    with pytest.raises(InvalidParams) as err:
        cf.patch({"providers": {"p": table}})
    assert err.value.field is not None
    assert err.value.field.startswith(field)


def test_vision_is_written_and_read_back(tmp_path: Path) -> None:
    cf = ConfigFile(tmp_path / "config.toml")
    cf.load()
    cf.patch({"providers": {"p": {"model": "m", "vision": True, "model_vision": {"n": False}}}})
    again = ConfigFile(tmp_path / "config.toml").load()
    assert again.providers["p"].vision is True
    assert again.providers["p"].model_vision == {"n": False}
