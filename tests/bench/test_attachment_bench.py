"""A 10 MB image: its upload, and how much later its prompt's first model request leaves.

Upload: `attachment.upload` in 1 MiB chunks until the backend holds the file (checked and
thumbnailed), beside the raw cost of the same work any durable upload must do in this
process (base64 both ways, sha256, each chunk written and fsynced, the file renamed into
place), measured in the same run.

First request: `prompt.submit` sent → the fake provider has read the whole request, for a
prompt with the image and for the same text alone, in fresh sessions (a session's history
would otherwise carry the image into every later request), to an OpenAI-compatible model
(the image goes as it is: it is within 2048 px and 20 MB) and to an Anthropic one (it is
downscaled to 1568 px and re-encoded to fit 3.75 MB first).  The second turn of the image's
session is measured too: the image is in its history, so it is sent again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
import uuid
from pathlib import Path
from statistics import median

import httpx
import pytest

from tests.attachment_samples import png
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.anthropic_server import Reply as ClaudeReply
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.backend_proc import Backend

from .client import BenchClient, Json, ms

ROUNDS = 5
EDGE = 1830  # random RGB pixels: a PNG of about 10 MB that no compression shrinks
CHUNK = 1024 * 1024
RAW = {"main": ("/chat/completions", {}),
       "claude": ("/messages", {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"})}


async def _upload(client: BenchClient, data: bytes) -> Json:
    sha = hashlib.sha256(data).hexdigest()
    base = {"sha256": sha, "size": len(data), "mime_type": "image/png"}
    state = await client.call("attachment.upload", base)
    while not state["complete"]:
        at = state["received"]
        chunk = base64.b64encode(data[at:at + CHUNK]).decode("ascii")
        state = await client.call("attachment.upload", {**base, "offset": at, "data": chunk})
    held: Json = state["file"]
    return held


def _raw_upload(folder: Path, data: bytes) -> float:
    """What a durable chunked upload costs at least: base64 out and in, sha256, each chunk
    appended and fsynced, the whole renamed into place and its folder fsynced."""
    t0 = time.monotonic()
    digest = hashlib.sha256()
    part = folder / f"{uuid.uuid4().hex}.part"
    with part.open("wb") as f:
        for at in range(0, len(data), CHUNK):
            chunk = base64.b64decode(base64.b64encode(data[at:at + CHUNK]))
            digest.update(chunk)
            f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
    part.rename(folder / digest.hexdigest())
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.monotonic() - t0


async def _first_request(client: BenchClient, fake: FakeOpenAI | FakeAnthropic, sid: str,
                         attachments: list[Json] | None) -> tuple[float, float]:
    """(seconds to the provider's having the request, seconds to message.complete)."""
    before = len(fake.snapshot())
    params: Json = {"session_id": sid, "request_id": uuid.uuid4().hex, "text": "What is this?"}
    if attachments:
        params["attachments"] = attachments
    t0 = time.monotonic()
    receipt = (await client.call("prompt.submit", params))["receipt"]
    t_done, complete = await client.wait_event("message.complete", receipt["admission_id"], 120)
    assert complete["data"]["status"] == "completed", complete["data"]
    t_done = time.monotonic() - (time.perf_counter() - t_done)  # perf_counter stamp → monotonic
    got = fake.snapshot()[before]
    return got.started - t0, t_done - t0


async def _raw_request(fake: FakeOpenAI | FakeAnthropic, path: str, body: Json,
                       headers: dict[str, str]) -> float:
    """The same request body, serialized and posted by httpx: seconds until the fake has
    read it whole (what any client sending this image pays, and the fake's own parsing)."""
    async with httpx.AsyncClient(timeout=60, trust_env=False) as http:
        before = len(fake.snapshot())
        t0 = time.monotonic()
        content = json.dumps(body).encode()
        response = await http.post(fake.base_url + path, content=content,
                                   headers={"content-type": "application/json", **headers})
        assert response.status_code == 200, response.text[:200]
        return fake.snapshot()[before].started - t0


@pytest.mark.bench
async def test_image_upload_and_first_request(tmp_path: Path) -> None:
    openai, claude = FakeOpenAI(), FakeAnthropic()
    openai.default = Reply(deltas=["ok"])
    claude.default = ClaudeReply(deltas=["ok"])
    backend = Backend(tmp_path / "data", openai.base_url,
                      extra_env={"TURNKEY_BENCH_KEY": "sk-bench"})
    backend.write_config(
        'default_provider = "main"\n'
        f'[providers.main]\nkind = "openai"\nbase_url = "{openai.base_url}"\n'
        'model = "fake-model"\ncontext_window = 128000\nvision = true\n'
        f'[providers.claude]\nkind = "anthropic"\nbase_url = "{claude.base_url}"\n'
        'model = "claude-sonnet-4-5"\napi_key_env = "TURNKEY_BENCH_KEY"\n')
    backend.start()
    client = await BenchClient.open(backend.port, backend.token)
    raw_dir = tmp_path / "raw"
    raw_dir.mkdir()
    uploads: list[float] = []
    raws: list[float] = []
    firsts: dict[str, dict[str, list[float]]] = {}
    try:
        for _ in range(ROUNDS):
            data = png(EDGE, EDGE, noise=True)
            t0 = time.monotonic()
            held = await _upload(client, data)
            uploads.append(time.monotonic() - t0)
            raws.append(_raw_upload(raw_dir, data))
            assert held["width"] == EDGE
            name = {"sha256": held["sha256"], "name": "noise.png"}
            for provider, fake in (("main", openai), ("claude", claude)):
                row = firsts.setdefault(provider, {})
                for label, files in (("text", None), ("image", [name])):
                    sid = (await client.call("session.create", {}))["session"]["session_id"]
                    await client.call("session.update", {"session_id": sid, "provider": provider})
                    sent, done = await _first_request(client, fake, sid, files)
                    row.setdefault(f"{label} first", []).append(sent)
                    row.setdefault(f"{label} turn", []).append(done)
                    if files:
                        body = fake.snapshot()[-1].body
                        sent, done = await _first_request(client, fake, sid, None)
                        row.setdefault("image in history first", []).append(sent)
                        path, headers = RAW[provider]
                        row.setdefault("raw", []).append(
                            await _raw_request(fake, path, body, headers))
        size = len(data)
    finally:
        await client.close()
        backend.close()
        openai.close()
        claude.close()
    print()
    print(f"BENCH attachment upload, {size / 1e6:.1f} MB PNG in 1 MiB chunks: median "
          f"{ms(median(uploads))} ({size / 1e6 / median(uploads):.0f} MB/s) | raw durable "
          f"chunked write in-process: median {ms(median(raws))} | ratio "
          f"{median(uploads) / median(raws):.1f}x ({ROUNDS} files)")
    for provider, row in firsts.items():
        text, image = median(row["text first"]), median(row["image first"])
        raw = median(row["raw"])
        print(f"BENCH first model request ({provider}): text only {ms(text)}, with the image "
              f"{ms(image)} ({image / text:.1f}x); next turn, image in history "
              f"{ms(median(row['image in history first']))} | raw: the image's request "
              f"body posted by httpx {ms(raw)} (with the image / raw "
              f"{image / raw:.1f}x) | whole turn: text {ms(median(row['text turn']))}, image "
              f"{ms(median(row['image turn']))}")
