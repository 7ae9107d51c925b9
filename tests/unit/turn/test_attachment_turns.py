"""A prompt's files in a real turn: each provider called gets its own form, people are told
once when the model cannot see, and the request is measured as sent."""

from __future__ import annotations

import base64
import functools

import pytest

from backend.errors import ProviderError
from backend.providers.base import ChatRequest
from backend.store import messages
from tests.attachment_samples import png, sha
from tests.unit.turn.harness import Harness, Step, calls, config_toml, text

IMAGE = png(3000, 2000)

BACKUP = """
[providers.backup]
kind = "anthropic"
base_url = "http://127.0.0.1:9/v1"
model = "claude-test"
context_window = 32000
max_output_tokens = 256
"""


@pytest.fixture
def harness_config() -> str:
    return 'fallback_providers = ["backup"]\n' + config_toml(extra=BACKUP)


class Reads:
    def __init__(self) -> None:
        self.count = 0

    async def __call__(self, sha256: str) -> bytes:
        self.count += 1
        if sha256 != sha(IMAGE):
            raise FileNotFoundError(sha256)
        return IMAGE


async def _prompt_with_image(h: Harness, sid: str) -> None:
    """A prompt of the session that carries the image, as the admission stores it (the
    turn's own prompt follows it: both are the latest exchange)."""
    meta = {"attachments": [{"sha256": sha(IMAGE), "name": "plan.png", "mime_type": "image/png",
                             "bytes": len(IMAGE), "kind": "image", "width": 3000,
                             "height": 2000}]}
    await h.db.write(lambda tx: messages.insert(tx, sid, "user", "See the plan.", meta=meta))


def _refuse(request: ChatRequest) -> list[Step]:
    raise ProviderError("not_configured", "the first provider is not there")


async def test_a_fallback_that_sees_gets_the_image_the_first_got_as_a_note(
        harness: Harness) -> None:
    reads = Reads()
    harness.runner.read_file = reads
    sid = await harness.session()
    await _prompt_with_image(harness, sid)
    harness.provider.script(_refuse, text("A floor plan."))
    receipt = await harness.turn(sid, "What is it?")
    assert receipt.outcome == "completed"
    blind, seeing = harness.provider.requests
    # main: an OpenAI-compatible "fake-model" that cannot see: a note in the image's place.
    first = next(m for m in blind.messages if m.role == "user")
    assert first.images == ()
    assert first.content == ("[An image was attached: plan.png, 3000×2000; this model cannot "
                             "see images.]\n\nSee the plan.")
    # backup: Anthropic, which sees: the image, scaled into its limits, from the same bytes.
    again = next(m for m in seeing.messages if m.role == "user")
    assert again.content == "See the plan."
    assert len(again.images) == 1
    assert base64.b64decode(again.images[0].data).startswith(b"\x89PNG")
    assert again.images[0].tokens == -(-1568 * 1045 // 750)
    assert seeing.chars is not None
    assert blind.chars is not None
    assert seeing.chars - blind.chars == again.images[0].tokens * 4 - len(
        first.content) + len(again.content)
    assert reads.count == 1  # the note needed no bytes; the image was read once
    notes = [m for m in await harness.messages(sid) if m.note_kind == "attachments"]
    assert len(notes) == 1
    assert "cannot see images" in notes[0].content


LIST = ("c1", "list_dir", '{"path": "."}')


async def test_every_call_of_a_turn_reuses_the_prepared_image(harness: Harness) -> None:
    harness.config.patch({"providers": {"main": {"vision": True}}})
    reads = Reads()
    harness.runner.read_file = reads
    sid = await harness.session()
    await _prompt_with_image(harness, sid)
    harness.provider.script(calls(LIST), text("One."))
    await harness.turn(sid, "Describe it.")
    first, second = harness.provider.requests
    assert [len(m.images) for m in first.messages if m.role == "user"] == [1, 0]
    assert [m.images for m in first.messages] == [m.images for m in second.messages[:3]]
    assert reads.count == 1
    harness.provider.script(text("Two."))
    await harness.turn(sid, "And again.")
    assert reads.count == 1  # the next turn sends it again from the backend's PartCache
    assert not [m for m in await harness.messages(sid) if m.note_kind == "attachments"]


async def test_people_are_told_once_a_turn_when_the_model_cannot_see(harness: Harness) -> None:
    harness.runner.read_file = Reads()
    sid = await harness.session()
    await _prompt_with_image(harness, sid)
    harness.provider.script(calls(LIST), text("I cannot see it."))
    await harness.turn(sid, "Describe it.")
    assert len(harness.provider.requests) == 2
    notes = [m for m in await harness.messages(sid) if m.note_kind == "attachments"]
    assert [n.content for n in notes] == [
        "main's model fake-model cannot see images, so it was told only the name and size of "
        "each image attached. To send images, choose a provider or model that sees them "
        "(vision)."]
    # A later turn whose own prompt has no image says nothing more.
    harness.provider.script(text("Ok."))
    await harness.turn(sid, "Thanks.")
    assert len([m for m in await harness.messages(sid) if m.note_kind == "attachments"]) == 1


@pytest.mark.parametrize("harness_config", [config_toml(
    window=12_000, extra='vision = true\n[compression]\nthreshold = 0.75\n')])
async def test_a_tight_request_leaves_old_images_out_before_compressing(
        harness: Harness) -> None:
    harness.runner.read_file = Reads()
    sid = await harness.session()
    for n in range(6):  # earlier exchanges, each with the image (about 1,100 tokens each)
        await _prompt_with_image(harness, sid)
        await harness.db.write(functools.partial(messages.insert, session_id=sid,
                                                 role="assistant", content=f"Seen {n}."))
    await _prompt_with_image(harness, sid)
    harness.provider.script(text("Fine."))
    await harness.turn(sid, "And this one?")
    [request] = harness.provider.requests
    prompts = [m for m in request.messages if m.role == "user"]
    assert [len(m.images) for m in prompts] == [0] * 6 + [1, 0]
    assert prompts[0].content.startswith(
        "[An image was attached here: plan.png, 3000×2000; left out of this request")
    assert not harness.events(sid, "compression.start")
