"""The test run's Matrix homeserver (tests/matrix_server.py) and the test-side client.

The Matrix door's tests lean on these facts about a real Synapse: two users can talk in a
private room, an edit replaces what a person sees, and above all a send is idempotent per
device and transaction id, across a homeserver restart too (that is how the door delivers a
reply exactly once after an outage).  If Synapse stopped behaving so, these fail first, for
the right reason.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.matrix_client import (
    MatrixRequestError,
    room_path,
    visible_messages,
    wait_until,
    wait_until_async,
)
from tests.matrix_server import MatrixAccount, MatrixServer, MatrixServerError
from tests.procs import running

from .backend_proc import REPO

GONE_TIMEOUT_S = 15.0


def wait_no_server(root: Path) -> list[int]:
    """Poll until no process names ``root`` (or the time is up); returns what is left."""
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while (left := running(str(root))) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_two_users_talk_in_a_private_room(matrix: MatrixServer) -> None:
    alice, bob = matrix.register("alice"), matrix.register("bob")
    assert alice.user_id.endswith(f":{matrix.server_name}")
    assert alice.user_id != bob.user_id
    as_alice, as_bob = matrix.client(alice), matrix.client(bob)

    room = as_alice.create_room(invite=[bob.user_id], name="the door")
    assert wait_until(as_bob.invites, what="bob's invite") == [room]
    as_bob.join(room)
    assert as_alice.joined_members(room) == sorted([alice.user_id, bob.user_id])
    assert as_bob.invites() == [], "a joined room is no longer an invite"

    sent = as_alice.send_text(room, "hello bob")
    seen = as_bob.messages(room)
    assert [(m["event_id"], m["sender"], m["content"]["body"]) for m in seen] == [
        (sent, alice.user_id, "hello bob")]


async def test_an_async_test_waits_for_a_message_without_blocking_its_loop(
        matrix: MatrixServer) -> None:
    alice, bob = matrix.register("alice"), matrix.register("bob")
    as_alice, as_bob = matrix.client(alice), matrix.client(bob)
    room = as_alice.create_room(invite=[bob.user_id])
    as_bob.join(room)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    def send_later() -> str:
        time.sleep(0.5)  # so the wait below polls an empty room a few times first
        return as_alice.send_text(room, "later")

    ticker = asyncio.create_task(tick())
    sender = asyncio.create_task(asyncio.to_thread(send_later))
    try:
        seen = await wait_until_async(lambda: as_bob.visible_messages(room), what="the message")
    finally:
        ticker.cancel()
    await sender
    assert [m.body for m in seen] == ["later"]
    assert ticks > 1, "the event loop ran while the room was polled"


def test_a_stranger_cannot_read_or_write_a_private_room(matrix: MatrixServer) -> None:
    owner, stranger = matrix.register("owner"), matrix.register("stranger")
    room = matrix.client(owner).create_room()
    as_stranger = matrix.client(stranger)
    with pytest.raises(MatrixRequestError) as refused:
        as_stranger.join(room)
    assert (refused.value.status, refused.value.errcode) == (403, "M_FORBIDDEN")
    assert "homeserver.log" in str(refused.value), "a refusal carries the server's log"
    with pytest.raises(MatrixRequestError) as unread:
        as_stranger.messages(room)
    assert unread.value.status == 403


def test_a_person_sees_a_message_with_its_last_edit(matrix: MatrixServer) -> None:
    alice, bob = matrix.register("alice"), matrix.register("bob")
    as_alice, as_bob = matrix.client(alice), matrix.client(bob)
    room = as_alice.create_room(invite=[bob.user_id])
    as_bob.join(room)

    first = as_alice.send_text(room, "Thinking")
    for text in ("Thinking.", "Thinking..", "The answer is 42."):
        as_alice.edit(room, first, text)
    second = as_bob.send_text(room, "thanks")
    as_bob.edit(room, first, "bob rewrites alice")  # Synapse stores it; nobody may show it

    raw = as_bob.messages(room)
    assert len(raw) == 6, "the edits are events of their own"
    seen = as_bob.visible_messages(room)
    assert [(m.event_id, m.sender, m.body, m.edits) for m in seen] == [
        (first, alice.user_id, "The answer is 42.", 3),
        (second, bob.user_id, "thanks", 0),
    ]
    # The server's own choice of the latest edit (its bundled aggregation) is the same one.
    original = next(event for event in raw if event["event_id"] == first)
    assert seen[0].last_edit_id == original["unsigned"]["m.relations"]["m.replace"]["event_id"]


def test_visible_messages_picks_the_latest_edit_by_server_time() -> None:
    """Timeline order and server time can disagree (an edit delayed in flight); clients go by
    origin_server_ts, so a late-arriving older edit does not undo a newer one."""
    def message(event_id: str, ts: int, body: str, edits: str | None = None) -> dict[str, Any]:
        content: dict[str, Any] = {"msgtype": "m.text", "body": body}
        if edits is not None:
            content = {"msgtype": "m.text", "body": f"* {body}",
                       "m.new_content": {"msgtype": "m.text", "body": body},
                       "m.relates_to": {"rel_type": "m.replace", "event_id": edits}}
        return {"event_id": event_id, "sender": "@bot:tk.test", "origin_server_ts": ts,
                "type": "m.room.message", "content": content}

    events = [message("$a", 1, "draft"), message("$c", 3, "final", edits="$a"),
              message("$b", 2, "older", edits="$a")]
    [seen] = visible_messages(events)
    assert (seen.body, seen.edits, seen.last_edit_id) == ("final", 2, "$c")


def test_reactions_point_at_the_message_they_answer(matrix: MatrixServer) -> None:
    bot, person = matrix.register("bot"), matrix.register("person")
    as_bot, as_person = matrix.client(bot), matrix.client(person)
    room = as_person.create_room(invite=[bot.user_id])
    as_bot.join(room)
    question = as_bot.send_text(room, "Run `ls`? React ✅ or ❌")

    reaction = as_person.react(room, question, "✅")
    [seen] = as_bot.reactions(room)
    assert seen["event_id"] == reaction
    assert seen["sender"] == person.user_id
    assert seen["content"]["m.relates_to"] == {
        "rel_type": "m.annotation", "event_id": question, "key": "✅"}
    with pytest.raises(MatrixRequestError) as twice:
        as_person.react(room, question, "✅")  # a new transaction id: a second reaction
    assert twice.value.errcode == "M_DUPLICATE_ANNOTATION"


def test_no_rate_limit_is_met(matrix: MatrixServer) -> None:
    """Synapse's defaults would refuse the 11th quick message and the 6th login (429); the
    door's own pacing is what its tests are about, so the server must never pace them."""
    alice = matrix.register("alice")
    as_alice = matrix.client(alice)
    room = as_alice.create_room()
    sent = [as_alice.send_text(room, f"message {n}") for n in range(40)]
    assert len(set(sent)) == 40
    devices = {matrix.login(alice).device_id for _ in range(8)}
    assert len(devices) == 8


@pytest.mark.parametrize("outage", ["stop", "kill"])
def test_a_resent_transaction_is_one_message_even_across_a_restart(
        matrix: MatrixServer, outage: str) -> None:
    """The door's delivery rests on this: the same device re-sending a transaction id gets the
    first event's id back and no second message, whether or not the homeserver restarted
    (a clean stop or a SIGKILL) in between, and its access token still works afterwards."""
    alice, bob = matrix.register("alice"), matrix.register("bob")
    as_alice, as_bob = matrix.client(alice), matrix.client(bob)
    room = as_alice.create_room(invite=[bob.user_id])
    as_bob.join(room)

    first = as_alice.send_text(room, "the reply", txn_id="reply-1")
    assert as_alice.send_text(room, "the reply", txn_id="reply-1") == first
    getattr(matrix, outage)()
    with pytest.raises(httpx.ConnectError):
        as_alice.send_text(room, "the reply", txn_id="reply-1")
    matrix.start()
    again = as_alice.send_text(room, "the reply", txn_id="reply-1")
    assert again == first, "the server remembered the transaction across the restart"
    assert [m["event_id"] for m in as_bob.messages(room)] == [first]

    other = as_alice.send_text(room, "another", txn_id="reply-2")
    assert [m.body for m in as_bob.visible_messages(room)] == ["the reply", "another"]
    assert other != first


def test_a_send_that_timed_out_on_a_paused_server_is_one_message_after_the_retry(
        matrix: MatrixServer) -> None:
    """The outage the door cannot see through: its request reached the server but the answer
    never came back.  Retrying with the same transaction id once the server answers again
    gives one message, whichever of the two requests the server acted on."""
    alice = matrix.register("alice")
    as_alice = matrix.client(alice)
    room = as_alice.create_room()
    matrix.pause()
    path = f"{room_path(room)}/send/m.room.message/reply-1"
    with pytest.raises(httpx.ReadTimeout):
        as_alice.http.put(path, json={"msgtype": "m.text", "body": "the reply"}, timeout=1.0)
    matrix.resume()
    event_id = as_alice.send_text(room, "the reply", txn_id="reply-1")
    assert [m["event_id"] for m in as_alice.messages(room)] == [event_id]


def test_a_sync_token_still_works_after_a_restart(matrix: MatrixServer) -> None:
    """The door keeps its place in the event stream (next_batch) across homeserver outages."""
    alice, bob = matrix.register("alice"), matrix.register("bob")
    as_alice, as_bob = matrix.client(alice), matrix.client(bob)
    room = as_alice.create_room(invite=[bob.user_id])
    as_bob.join(room)
    as_alice.send_text(room, "before")
    since = str(as_bob.sync()["next_batch"])
    matrix.stop()
    matrix.start()
    as_alice.send_text(room, "after")
    synced = as_bob.sync(since)
    timeline = synced["rooms"]["join"][room]["timeline"]["events"]
    assert [e["content"].get("body") for e in timeline if e["type"] == "m.room.message"] == [
        "after"]


def test_the_same_transaction_id_from_a_new_login_is_a_new_message(matrix: MatrixServer) -> None:
    """Transaction ids belong to a device: a new login (a new device and token) re-sending the
    same id makes a second message, so the door must keep using one device's token."""
    alice, bob = matrix.register("alice"), matrix.register("bob")
    as_alice, as_bob = matrix.client(alice), matrix.client(bob)
    room = as_alice.create_room(invite=[bob.user_id])
    as_bob.join(room)
    first = as_alice.send_text(room, "the reply", txn_id="reply-1")

    relogged = matrix.login(alice)
    assert relogged.user_id == alice.user_id
    assert relogged.device_id != alice.device_id
    second = matrix.client(relogged).send_text(room, "the reply", txn_id="reply-1")
    assert second != first
    assert [m.body for m in as_bob.visible_messages(room)] == ["the reply", "the reply"]
    assert as_alice.send_text(room, "the reply", txn_id="reply-1") == first, \
        "the first device still gets its own event back"


def test_a_paused_server_answers_nothing_until_resumed(matrix: MatrixServer) -> None:
    alice = matrix.register("alice")
    as_alice = matrix.client(alice)
    room = as_alice.create_room()
    matrix.pause()
    with pytest.raises(httpx.ReadTimeout):
        as_alice.http.get(f"{room_path(room)}/joined_members", timeout=1.0)
    matrix.resume()
    assert as_alice.joined_members(room) == [alice.user_id]


def test_a_server_starts_and_stops_leaving_nothing() -> None:
    server = MatrixServer()
    root = server.root
    with server:
        assert server.pids(), "Synapse runs"
        assert httpx.get(f"{server.url}/_matrix/client/versions").status_code == 200
        account = server.register("someone")
        wrong = MatrixAccount(account.user_id, "", "", password="not the password")
        with pytest.raises(MatrixServerError, match="M_FORBIDDEN") as refused:
            server.login(wrong)
        assert "homeserver.log" in str(refused.value), "the failure carries the server's log"
        assert account.password not in str(refused.value) + repr(account)
    assert wait_no_server(root) == []
    assert not root.exists(), "the temp folder is removed"


def test_the_server_dies_with_a_test_process_killed_outright(tmp_path: Path) -> None:
    script = tmp_path / "start.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from tests.matrix_server import MatrixServer\n"
        "server = MatrixServer()\n"
        "server.start()\n"
        "server.pause()\n"  # a paused server must die too
        "print(server.root, flush=True)\n"
        "time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        root = Path(proc.stdout.readline().strip())
        assert running(str(root)), "it started"
        proc.kill()
        proc.wait(timeout=10)
        assert wait_no_server(root) == [], "Synapse went with the test process"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    shutil.rmtree(root, ignore_errors=True)  # a killed test process leaves its folder


def test_a_missing_synapse_venv_says_to_run_bootstrap(tmp_path: Path) -> None:
    with pytest.raises(MatrixServerError, match=r"scripts/bootstrap dev"):
        MatrixServer(venv=tmp_path / "no-venv")
