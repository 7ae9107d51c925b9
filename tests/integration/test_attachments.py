"""Attachments (issue 36), the store's side: chunked uploads that survive kill -9, prompts
that name their files in the admission's commit, files read back only by their sessions,
and bad files refused with nothing left behind; both stores."""

from __future__ import annotations

import asyncio
import base64
import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from tests import attachment_samples as samples
from tests.attachment_samples import sha
from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend
from .wire import (
    Connect,
    Json,
    Rpc,
    RpcError,
    assert_backend_healthy,
    create_session,
    get_receipt,
    transcript,
    wait_receipt_status,
    wait_settled,
)

MIB = 1024 * 1024
CHUNK = 512 * 1024  # smaller than the bound: the client picks its chunks


def png(width: int, height: int, seed: int = 0) -> bytes:
    """A PNG of noise, or of a pattern of its own with `seed`."""
    return samples.png(width, height, noise=not seed, seed=seed)


async def send(rpc: Rpc, data: bytes, mime: str, offset: int, length: int = CHUNK) -> Json:
    chunk = data[offset:offset + length]
    return dict(await rpc.call("attachment.upload", {
        "sha256": sha(data), "size": len(data), "mime_type": mime, "offset": offset,
        "data": base64.b64encode(chunk).decode()}))


async def status(rpc: Rpc, data: bytes, mime: str) -> Json:
    return dict(await rpc.call("attachment.upload", {
        "sha256": sha(data), "size": len(data), "mime_type": mime}))


async def upload(rpc: Rpc, data: bytes, mime: str) -> Json:
    state = await status(rpc, data, mime)
    while not state["complete"]:
        state = await send(rpc, data, mime, state["received"])
    return state


async def download(rpc: Rpc, sid: str, digest: str, limit: int = MIB) -> bytes:
    out, offset = b"", 0
    while True:
        got = await rpc.call("attachment.get", {"session_id": sid, "sha256": digest,
                                                "offset": offset, "limit": limit})
        chunk = base64.b64decode(got["data"])
        out += chunk
        offset += len(chunk)
        if got["eof"]:
            return out


async def submit(rpc: Rpc, sid: str, request_id: str, text: str,
                 files: list[tuple[str, str]]) -> Json:
    params = {"session_id": sid, "request_id": request_id, "text": text,
              "attachments": [{"sha256": s, "name": n} for s, n in files]}
    return dict((await rpc.call("prompt.submit", params))["receipt"])


def stored_files(backend: Backend) -> list[str]:
    """The whole files the store holds (bytes), by sha256."""
    if backend.store is None:
        root = backend.data_dir / "attachments"
        return sorted(p.name for p in root.glob("??/*") if not p.name.startswith("."))
    return sorted({r["sha256"] for r in backend.query("SELECT sha256 FROM attachment_data")})


def partials(backend: Backend) -> list[str]:
    if backend.store is None:
        return sorted(p.name for p in (backend.data_dir / "attachments" / "partial").glob("*"))
    return sorted({r["sha256"] for r in backend.query("SELECT sha256 FROM attachment_partial")})


def rows(backend: Backend) -> list[str]:
    return sorted(r["sha256"] for r in backend.query("SELECT sha256 FROM attachments"))


def prompt_row(messages: list[Json]) -> Json:
    return next(m for m in messages if m["role"] == "user")


async def test_upload_submit_and_read_back(connect: Connect, backend: Backend,
                                           fake_provider: FakeOpenAI) -> None:
    rpc = await connect()
    sid = await create_session(rpc)
    image = png(800, 600)
    assert len(image) > 2 * CHUNK, "the test needs several chunks"
    first = await status(rpc, image, "image/png")
    assert (first["received"], first["complete"]) == (0, False)
    state = await send(rpc, image, "image/png", 0)
    assert state["received"] == CHUNK
    again = await send(rpc, image, "image/png", 0)  # the same chunk again: stored once
    assert again["received"] == CHUNK
    with pytest.raises(RpcError) as past:
        await send(rpc, image, "image/png", 2 * CHUNK)
    assert past.value.code == -32602, past.value
    assert past.value.data["field"] == "offset", past.value
    assert str(CHUNK) in past.value.message, "the refusal says where to resume"
    done = await upload(rpc, image, "image/png")
    assert done["complete"] is True
    file = done["file"]
    assert (file["sha256"], file["bytes"], file["kind"]) == (sha(image), len(image), "image")
    assert (file["width"], file["height"]) == (800, 600)
    assert (await status(rpc, image, "image/png"))["complete"] is True, "held: answered at once"

    receipt = await submit(rpc, sid, "r1", "what is in this picture?", [(sha(image), "noise.png")])
    assert receipt["attachments"][0]["name"] == "noise.png", receipt
    await wait_settled(rpc, receipt["admission_id"])
    assert "what is in this picture?" in str(fake_provider.snapshot()[-1])

    want = {"sha256": sha(image), "name": "noise.png", "mime_type": "image/png",
            "bytes": len(image), "kind": "image", "width": 800, "height": 600}
    prompt = prompt_row(await transcript(rpc, sid))
    got = prompt["attachments"][0]
    assert {k: got[k] for k in want} == want, got
    resumed = await rpc.call("session.resume", {"session_id": sid})
    assert prompt_row(resumed["messages"])["attachments"] == prompt["attachments"]
    settled = await get_receipt(rpc, receipt["admission_id"])
    assert settled["attachments"] == prompt["attachments"]

    assert await download(rpc, sid, sha(image), limit=300_000) == image
    thumb = await download(rpc, sid, got["thumbnail"])
    with Image.open(io.BytesIO(thumb)) as img:
        assert img.format == "PNG"
        assert img.size == (256, 192), "at most 256 pixels on the long edge, the shape kept"

    # Another session cannot read it, held or not.
    other = await create_session(rpc)
    for digest in (sha(image), got["thumbnail"], "0" * 64):
        with pytest.raises(RpcError) as missing:
            await download(rpc, other, digest)
        assert missing.value.code == -32004
        assert missing.value.data["kind"] == "attachment"

    # The same request id: the same receipt, nothing stored twice; other files: a conflict.
    dup = await submit(rpc, sid, "r1", "what is in this picture?", [(sha(image), "noise.png")])
    assert dup["duplicate"] is True
    assert dup["admission_id"] == receipt["admission_id"]
    small = png(20, 10, seed=3)
    await upload(rpc, small, "image/png")
    with pytest.raises(RpcError) as conflict:
        await submit(rpc, sid, "r1", "what is in this picture?", [(sha(small), "noise.png")])
    assert conflict.value.code == -32010
    assert len(backend.query("SELECT * FROM admission_attachments")) == 1
    assert sha(image) in stored_files(backend)
    assert partials(backend) == []

    # Files alone: no text needed; the session is titled by the first file's name.
    alone = await create_session(rpc)
    only = await submit(rpc, alone, "r2", "", [(sha(small), "tiny chart.png"),
                                                (sha(image), "noise.png")])
    await wait_settled(rpc, only["admission_id"])
    session = (await rpc.call("session.get", {"session_id": alone}))["session"]
    assert session["title"] == "tiny chart.png"
    names = [a["name"] for a in prompt_row(await transcript(rpc, alone))["attachments"]]
    assert names == ["tiny chart.png", "noise.png"]

    with pytest.raises(RpcError) as unknown:
        await submit(rpc, sid, "r3", "and this?", [(sha(image), "a.png"), ("1" * 64, "b.png")])
    assert unknown.value.code == -32602
    assert unknown.value.data["field"] == "attachments.1.sha256", unknown.value
    assert "upload it first" in unknown.value.message


async def test_kill9_mid_upload_and_after_the_prompt(backend: Backend,
                                                      fake_provider: FakeOpenAI) -> None:
    text = "z" * (3 * CHUNK + 123)  # a text file: four chunks
    data = text.encode()
    rpc = await Rpc.open(backend.port, backend.token)
    sid = await create_session(rpc)
    await send(rpc, data, "text/plain", 0)
    await send(rpc, data, "text/plain", CHUNK)
    rpc.abort()
    backend.kill9()
    backend.start()

    rpc = await Rpc.open(backend.port, backend.token)
    try:
        state = await status(rpc, data, "text/plain")
        assert (state["received"], state["complete"]) == (2 * CHUNK, False), state
        done = await upload(rpc, data, "text/plain")
        assert done["complete"]
        assert done["file"]["kind"] == "text"
        assert stored_files(backend) == [sha(data)]
        assert partials(backend) == []
        assert rows(backend) == [sha(data)]
        receipt = await submit(rpc, sid, "k1", "summarize the file", [(sha(data), "notes.txt")])
        rpc.abort()
        backend.kill9()  # right after the acknowledgement
    finally:
        rpc.abort()
    backend.start()

    rpc = await Rpc.open(backend.port, backend.token)
    try:
        # Its turn may have started before the kill (then it is `unknown`) or not (then it
        # runs now): either way the prompt and its file are there.
        after = await get_receipt(rpc, receipt["admission_id"])
        if after["status"] != "unknown":
            after = await wait_receipt_status(rpc, receipt["admission_id"], "terminal")
        assert [a["sha256"] for a in after["attachments"]] == [sha(data)], after
        prompt = prompt_row(await transcript(rpc, sid))
        assert prompt["attachments"][0]["name"] == "notes.txt"
        assert await download(rpc, sid, sha(data)) == data
    finally:
        await rpc.close()


async def test_bad_files_are_refused_and_leave_nothing(connect: Connect, backend: Backend,
                                                       fake_provider: FakeOpenAI) -> None:
    rpc = await connect()
    image = png(64, 48)
    jpeg = io.BytesIO()
    Image.new("RGB", (10, 10)).save(jpeg, format="JPEG")

    async def refused(data: bytes, mime: str, field: str, words: str) -> None:
        with pytest.raises(RpcError) as err:
            await upload(rpc, data, mime)
        assert err.value.code == -32602, err.value
        assert err.value.data["field"] == field, err.value
        assert words in err.value.message, err.value.message

    await refused(image, "image/jpeg", "mime_type", "PNG image, not image/jpeg")
    await refused(b"just words\n", "image/png", "mime_type", "not an image")
    await refused(image[:len(image) // 2], "image/png", "data", "cannot be decoded")
    await refused(b"\xff\xfe not utf-8", "text/plain", "data", "UTF-8")
    await refused(b"%PDF-1.4 nothing more", "application/pdf", "data", "PDF")
    await refused(b"abc", "application/zip", "mime_type", "not a type taken")

    # The sha256 named is not the bytes'.
    with pytest.raises(RpcError) as mismatch:
        await rpc.call("attachment.upload", {
            "sha256": sha(b"other"), "size": 5, "mime_type": "text/plain",
            "data": base64.b64encode(b"hello").decode()})
    assert mismatch.value.data["field"] == "sha256", mismatch.value

    big = b"a" * (MIB + 1)
    with pytest.raises(RpcError) as chunk:
        await send(rpc, big, "text/plain", 0, length=MIB + 1)
    assert chunk.value.data["field"] == "data"
    assert "1 MiB" in chunk.value.message
    with pytest.raises(RpcError) as size:
        await rpc.call("attachment.upload", {"sha256": "2" * 64, "size": 32 * MIB + 1,
                                             "mime_type": "text/plain"})
    assert size.value.data["field"] == "size"
    assert "32 MiB" in size.value.message
    with pytest.raises(RpcError) as past:  # a chunk running past the declared size
        await rpc.call("attachment.upload", {"sha256": sha(b"hello"), "size": 3,
                                             "mime_type": "text/plain",
                                             "data": base64.b64encode(b"hello").decode()})
    assert past.value.data["field"] == "data"

    assert rows(backend) == []
    assert partials(backend) == []
    assert stored_files(backend) == []

    sid = await create_session(rpc)
    jpg = jpeg.getvalue()
    held = (await upload(rpc, jpg, "image/jpeg"))["file"]
    assert held["kind"] == "image"
    assert held["thumbnail"]
    with pytest.raises(RpcError) as many:
        await submit(rpc, sid, "m1", "too many", [(sha(jpg), f"{i}.jpg") for i in range(11)])
    assert many.value.data["field"] == "attachments"
    assert "10" in many.value.message
    with pytest.raises(RpcError) as slash:
        await submit(rpc, sid, "m2", "bad name", [(sha(jpg), "a/b.jpg")])
    assert slash.value.data["field"] == "attachments.0.name"

    # Three files of 22 MiB: each within the bound, together over 64 MiB.
    texts = [(bytes([ord("a") + i]) * (22 * MIB)) for i in range(3)]
    for t in texts:
        state = await status(rpc, t, "text/plain")
        while not state["complete"]:
            state = await send(rpc, t, "text/plain", state["received"], length=MIB)
    with pytest.raises(RpcError) as total:
        await submit(rpc, sid, "m3", "too much", [(sha(t), f"{i}.txt") for i, t in enumerate(texts)])
    assert total.value.data["field"] == "attachments"
    assert "64 MiB" in total.value.message
    assert backend.query("SELECT * FROM admission_attachments") == []
    assert (await rpc.call("admission.list", {"session_id": sid}))["receipts"] == []
    await assert_backend_healthy(backend, fake_provider)


def _age(root: Path, seconds: float) -> None:
    """Makes every file under `root` `seconds` older."""
    then = (time.time() - seconds,) * 2
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, then)


async def test_unnamed_files_are_collected_after_a_day(connect: Connect, backend: Backend) -> None:
    """SQLite: the data folder's files and uploads; PostgreSQL: attachment_data's parts and
    attachment_partial's chunks.  Either way a file a prompt names (and its thumbnail) stays."""
    rpc = await connect()
    sid = await create_session(rpc)
    kept, dropped = png(30, 20, seed=5), png(31, 20, seed=7)
    await upload(rpc, kept, "image/png")
    await upload(rpc, dropped, "image/png")
    await submit(rpc, sid, "g1", "keep this one", [(sha(kept), "kept.png")])
    await send(rpc, png(40, 40, seed=9), "image/png", 0, length=100)  # left unfinished
    # A day passes: every row and file is made older, then the backend starts again
    # (the collection runs at start).
    backend.terminate()
    backend.query("UPDATE attachments SET created_at = created_at - 90000")
    if backend.store is None:
        _age(backend.data_dir / "attachments", 90000)
    else:
        backend.query("UPDATE attachment_partial SET received_at = received_at - 90000")
    assert partials(backend) != [], "the unfinished upload is there before the collection"
    assert sha(dropped) in stored_files(backend)
    backend.start()
    rpc = await connect()
    held = (await rpc.call("attachment.upload", {"sha256": sha(kept), "size": len(kept),
                                                 "mime_type": "image/png"}))
    assert held["complete"], "a file a prompt names is kept"
    thumb = held["file"]["thumbnail"]
    for _ in range(100):
        if sha(dropped) not in stored_files(backend) and partials(backend) == []:
            break
        await asyncio.sleep(0.05)
    assert stored_files(backend) == sorted([sha(kept), thumb])
    assert rows(backend) == sorted([sha(kept), thumb])
    assert partials(backend) == []


def test_turnkey_chat_attach(backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path) -> None:
    """`turnkey chat --attach FILE` (repeatable) uploads each file and sends it with the
    prompt; a missing or unsupported file is refused before anything is sent."""
    fake_provider.default = Reply(deltas=["Two ", "files"])
    picture, notes = tmp_path / "shot.png", tmp_path / "notes.md"
    picture.write_bytes(png(300, 200, seed=11))
    notes.write_text("# Notes\nline two\n")
    env = backend.env()
    cli = [sys.executable, "-m", "desktop.cli", "--data-dir", str(backend.data_dir)]
    out = subprocess.run([*cli, "chat", "--attach", str(picture), "--attach", str(notes),
                          "Describe these"], env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Two files"
    assert "Describe these" in str(fake_provider.snapshot()[-1])
    named = backend.query("SELECT x.name, a.mime_type, a.width FROM admission_attachments x "
                          "JOIN attachments a ON a.sha256 = x.sha256 ORDER BY x.position")
    assert named == [{"name": "shot.png", "mime_type": "image/png", "width": 300},
                     {"name": "notes.md", "mime_type": "text/markdown", "width": None}]

    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\0\1\2 not a type taken")
    for path, words in ((tmp_path / "missing.png", "No such file"),
                        (binary, "not a type that can be attached")):
        refused = subprocess.run([*cli, "chat", "--attach", str(path), "hi"], env=env,
                                 capture_output=True, text=True, timeout=60, check=False)
        assert refused.returncode == 2, refused.stderr
        assert words in refused.stderr, refused.stderr
    assert len(backend.query("SELECT * FROM admissions")) == 1, "nothing more was sent"
