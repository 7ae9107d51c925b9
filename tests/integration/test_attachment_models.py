"""What each model gets of a prompt's files (issue 36), through a real backend: uploaded
with the client's uploader, named by prompt.submit, sent to the fake providers in their
own forms; both stores."""

from __future__ import annotations

import base64
import io
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image

from shared.client import Client
from shared.uploads import download, upload
from tests.attachment_samples import pdf, png, sha
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.anthropic_server import Reply as ClaudeReply
from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory
from .wire import Rpc, create_session, transcript, wait_settled

Json = dict[str, Any]
Files = list[tuple[bytes, str, str]]  # (bytes, mime type, name)


@pytest.fixture
def anthropic() -> Iterator[FakeAnthropic]:
    fake = FakeAnthropic()
    yield fake
    fake.close()
    assert fake.errors == [], f"requests the real API would refuse: {fake.errors}"


def openai_backend(factory: BackendFactory, fake: FakeOpenAI, model: str) -> Backend:
    backend = factory("http://unused", start=False)
    backend.write_config('default_provider = "main"\n[providers.main]\nkind = "openai"\n'
                         f'base_url = "{fake.base_url}"\nmodel = "{model}"\n')
    backend.start()
    return backend


def claude_backend(factory: BackendFactory, fake: FakeAnthropic) -> Backend:
    backend = factory("http://unused", start=False)
    backend.write_config('default_provider = "claude"\n[providers.claude]\nkind = "anthropic"\n'
                         f'base_url = "http://127.0.0.1:{fake.port}/v1"\nmodel = "claude-test"\n'
                         'api_key_env = "TURNKEY_TEST_ANTHROPIC_KEY"\n')
    backend.extra_env["TURNKEY_TEST_ANTHROPIC_KEY"] = "sk-ant-test-0123456789abcdef"
    backend.start()
    return backend


async def ask(backend: Backend, text: str, files: Files) -> tuple[Rpc, Client, str]:
    """Uploads the files with the client's uploader, submits the prompt naming them, and
    waits for its turn to settle; the caller closes the connections."""
    client = Client(backend.data_dir, name="attach-test")
    await client.connect()
    for data, mime, _ in files:
        held = await upload(client, data, mime)
        assert held.sha256 == sha(data)
    rpc = await Rpc.open(backend.port, backend.token)
    sid = await create_session(rpc)
    receipt = (await rpc.call("prompt.submit", {
        "session_id": sid, "request_id": f"req-{uuid.uuid4().hex}", "text": text,
        "attachments": [{"sha256": sha(d), "name": n} for d, _, n in files]}))["receipt"]
    settled = await wait_settled(rpc, receipt["admission_id"])
    assert settled["data"]["receipt"]["outcome"] == "completed", settled
    return rpc, client, sid


def user_blocks(body: Json) -> list[Json]:
    """The blocks of the last user message of an Anthropic request."""
    last = [m for m in body["messages"] if m["role"] == "user"][-1]
    content = last["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def size_of(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as image:
        return image.size


async def test_anthropic_gets_images_and_pdfs_natively_and_a_big_image_scaled(
        backend_factory: BackendFactory, anthropic: FakeAnthropic) -> None:
    small, big = png(640, 480), png(6000, 4000)
    report = pdf("Revenue rose", "Costs fell")
    anthropic.script(ClaudeReply(deltas=["Seen."]))
    backend = claude_backend(backend_factory, anthropic)
    rpc, client, sid = await ask(backend, "Compare them", [
        (small, "image/png", "small.png"), (big, "image/png", "big.png"),
        (report, "application/pdf", "report.pdf")])
    try:
        [request] = anthropic.snapshot()
        blocks = user_blocks(request.body)
        assert [b["type"] for b in blocks] == ["document", "image", "image", "text"]
        assert blocks[0]["title"] == "report.pdf"
        assert base64.b64decode(blocks[0]["source"]["data"]) == report
        assert base64.b64decode(blocks[1]["source"]["data"]) == small  # within limits: as is
        sent = base64.b64decode(blocks[2]["source"]["data"])
        assert len(sent) <= 3_750_000
        assert max(size_of(sent)) <= 1568
        assert size_of(sent) == (1568, 1045)
        assert blocks[3] == {"type": "text", "text": "Compare them"}
        # The stored file is the original, byte for byte.
        assert await download(client, sid, sha(big)) == big
    finally:
        await rpc.close()
        await client.close()


async def test_openai_gets_image_url_parts_pdf_text_and_fenced_files(
        backend_factory: BackendFactory, fake_provider: FakeOpenAI) -> None:
    shot = png(300, 200)
    report = pdf("Quarterly numbers", "Revenue rose")
    notes = b"- buy milk\n- call Bo\n"
    fake_provider.script(Reply(deltas=["Done."]))
    backend = openai_backend(backend_factory, fake_provider, "gpt-4o-mini")
    rpc, client, _sid = await ask(backend, "Summarize", [
        (shot, "image/png", "shot.png"), (report, "application/pdf", "report.pdf"),
        (notes, "text/markdown", "todo.md")])
    try:
        [request] = fake_provider.snapshot()
        assert request.user_images == [("image/png", shot)]
        user = [m for m in request.body["messages"] if m["role"] == "user"][-1]
        [text, image] = user["content"]
        assert image["type"] == "image_url"
        assert text == {"type": "text", "text": (
            "[PDF report.pdf, 2 pages, text extracted:]\nQuarterly numbers\n\nRevenue rose\n\n"
            "File todo.md:\n```\n- buy milk\n- call Bo\n```\n\nSummarize")}
        listed = await rpc.call("provider.list", {})
        assert [(c["name"], c.get("vision", True)) for c in listed["providers"]] == [("main", True)]
    finally:
        await rpc.close()
        await client.close()


async def test_a_model_that_cannot_see_gets_a_note_and_people_are_told(
        backend_factory: BackendFactory, fake_provider: FakeOpenAI) -> None:
    shot = png(300, 200)
    fake_provider.script(Reply(deltas=["I cannot see it."]))
    backend = openai_backend(backend_factory, fake_provider, "fake-model")
    rpc, client, sid = await ask(backend, "What is this?", [(shot, "image/png", "shot.png")])
    try:
        [request] = fake_provider.snapshot()
        assert request.user_images == []
        assert request.last_user_text == ("[An image was attached: shot.png, 300×200; this "
                                          "model cannot see images.]\n\nWhat is this?")
        notes = [m for m in await transcript(rpc, sid) if m.get("note_kind") == "attachments"]
        assert len(notes) == 1
        assert "cannot see images" in notes[0]["content"]
        listed = await rpc.call("provider.list", {})
        assert [(c["name"], c.get("vision", True)) for c in listed["providers"]] == [("main", False)]
    finally:
        await rpc.close()
        await client.close()
