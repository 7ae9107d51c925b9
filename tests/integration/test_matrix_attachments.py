"""Images and files sent to the Matrix door (issue 36): a real Synapse with its media
repository, a real backend, the model faked.  A file in a bound room becomes a prompt
carrying it (its bytes downloaded from the homeserver, typed by what they are, stored as an
upload is); a file the door cannot take gets one reply saying why, and nothing runs."""

from __future__ import annotations

import asyncio
import base64

import pytest

from backend.doors.base import TooLarge, TransportError
from backend.doors.matrix import MatrixTransport
from tests import attachment_samples as samples
from tests.attachment_samples import sha
from tests.fakes.openai_server import FakeOpenAI, Reply

from .test_matrix_door import Room, admissions, one_reply, room  # noqa: F401  (the fixture)
from .wire import Json, Rpc, transcript


def png(width: int, height: int) -> bytes:
    return samples.png(width, height, noise=True)



async def download(rpc: Rpc, sid: str, digest: str) -> bytes:
    out = b""
    while True:
        got = await rpc.call("attachment.get", {"session_id": sid, "sha256": digest,
                                                "offset": len(out), "limit": 1024 * 1024})
        out += base64.b64decode(got["data"])
        if got["eof"]:
            return out


def prompts(messages: list[Json]) -> list[Json]:
    return [m for m in messages if m["role"] == "user"]


async def test_an_image_and_a_captioned_file_become_prompts_carrying_them_once(
        room: Room, fake_provider: FakeOpenAI) -> None:  # noqa: F811
    (before,) = room.backend.query("SELECT since FROM door_cursor")
    image = png(120, 80)
    notes = b"# Plan\n- ship the door\n"
    fake_provider.script(Reply(deltas=["A noisy picture."]), Reply(deltas=["It is a plan."]))
    url = await asyncio.to_thread(room.client.upload, image, "image/png", "chart.png")
    image_event = await asyncio.to_thread(
        room.client.send_file, room.room_id, "m.image", url, "chart.png",
        info={"mimetype": "image/png", "size": len(image), "w": 120, "h": 80})
    await asyncio.to_thread(room.wait_bot, one_reply(room, "A noisy picture."), "the image's reply")
    # Declared as bytes of no type by the sender's client: typed by what they are (text).
    text_url = await asyncio.to_thread(room.client.upload, notes, "application/octet-stream",
                                       "plan.md")
    await asyncio.to_thread(
        room.client.send_file, room.room_id, "m.file", text_url, "what does this say?",
        filename="plan.md", info={"mimetype": "application/octet-stream"})
    await asyncio.to_thread(room.wait_bot, one_reply(room, "It is a plan."), "the file's reply")

    rows = admissions(room.backend)
    assert rows[0]["request_id"] == f"matrix:{image_event}"
    assert {r["principal"] for r in rows} == {f"matrix:{room.alice.user_id}"}
    assert [(r["status"], r["outcome"]) for r in rows] == [("terminal", "completed")] * 2
    requests = fake_provider.snapshot()
    assert len(requests) == 2, "each file is one prompt, one turn"
    assert requests[1].last_user_text.endswith("what does this say?"), requests[1].body
    sid = rows[0]["session_id"]

    rpc = await Rpc.open(room.backend.port, room.backend.token)
    try:
        first, second = prompts(await transcript(rpc, sid))
        (img,) = first["attachments"]
        assert (img["sha256"], img["name"], img["mime_type"], img["bytes"], img["kind"]) == \
            (sha(image), "chart.png", "image/png", len(image), "image")
        assert (img["width"], img["height"]) == (120, 80)
        assert first["content"] == "", "an image alone is a prompt without text"
        (doc,) = second["attachments"]
        assert (doc["name"], doc["kind"], doc["sha256"]) == ("plan.md", "text", sha(notes))
        assert doc["mime_type"] == "text/markdown"
        assert second["content"] == "what does this say?"
        assert await download(rpc, sid, sha(image)) == image
        assert await download(rpc, sid, sha(notes)) == notes
    finally:
        await rpc.close()

    # Redelivered (the sync cursor put back): nothing is admitted or downloaded again.
    room.backend.terminate()
    room.backend.query("UPDATE door_cursor SET since = ?", (before["since"],))
    room.backend.start()
    fake_provider.script(Reply(deltas=["A marker answer."]))
    await asyncio.to_thread(room.say, "And now this")
    await asyncio.to_thread(room.wait_bot, one_reply(room, "A marker answer."), "the marker's reply")
    assert len(admissions(room.backend)) == 3
    assert len(fake_provider.snapshot()) == 3
    assert len(room.backend.query("SELECT * FROM admission_attachments")) == 2


def test_files_the_door_cannot_take_get_one_reply_each_and_nothing_runs(
        room: Room, fake_provider: FakeOpenAI) -> None:  # noqa: F811
    client, rid = room.client, room.room_id
    blob = b"PK\x03\x04" + bytes(range(256)) * 8  # a zip's start: no type taken
    sent = [
        client.send_file(rid, "m.file", client.upload(blob, "application/zip", "src.zip"),
                         "src.zip", info={"mimetype": "application/zip", "size": len(blob)}),
        # Declared bigger than the bound: refused without downloading it.
        client.send_file(rid, "m.image", client.upload(png(8, 8), "image/png", "huge.png"),
                         "huge.png", info={"mimetype": "image/png", "size": 40 * 1024 * 1024}),
        # A PNG cut short: its header reads, its pixels do not.
        client.send_file(rid, "m.image", client.upload(png(40, 40)[:300], "image/png",
                                                       "broken.png"),
                         "broken.png", info={"mimetype": "image/png"}),
        client.send_file(rid, "m.video", client.upload(b"\0" * 100, "video/mp4", "clip.mp4"),
                         "clip.mp4", info={"mimetype": "video/mp4"}),
        # End-to-end encrypted media: keys instead of a URL.
        client.send(rid, "m.room.message", {
            "msgtype": "m.image", "body": "secret.png",
            "file": {"url": "mxc://tk.test/x", "v": "v2", "key": {}, "iv": "", "hashes": {}}}),
    ]
    expected = {"src.zip": "not a type I take", "huge.png": "at most 32 MiB",
                "broken.png": "cannot be decoded", "clip.mp4": "I do not take video",
                "secret.png": "end-to-end encrypted"}

    def all_refused(_: object) -> bool:
        bodies = [m.body for m in room.notices()]
        return all(any(name in b and why in b for b in bodies) for name, why in expected.items())

    room.wait_bot(all_refused, "a refusal for each file")
    refusals = [m.body for m in room.notices() if m.body.startswith("I did not take")]
    assert len(refusals) == len(sent), refusals
    assert admissions(room.backend) == []
    assert fake_provider.snapshot() == []
    assert room.backend.query("SELECT sha256 FROM attachments") == []


@pytest.mark.sqlite_only(reason="the transport alone; no store is involved")
def test_a_download_past_its_limit_stops_and_a_missing_file_is_a_transport_error(
        room: Room) -> None:  # noqa: F811
    image = png(64, 64)
    url = room.client.upload(image, "image/png", "x.png")
    transport = MatrixTransport(room.matrix.url, room.bot.user_id, room.bot.access_token, None)

    async def run() -> None:
        try:
            assert await transport.download(url, len(image)) == image
            with pytest.raises(TooLarge):
                await transport.download(url, len(image) - 1)
            with pytest.raises(TransportError, match="did not serve the file"):
                await transport.download("mxc://tk.test/NoSuchMedia", len(image))
            with pytest.raises(TransportError, match="not a Matrix media URL"):
                await transport.download("https://example.com/x.png", len(image))
        finally:
            await transport.close()

    asyncio.run(run())
