"""`session.updated` broadcasts: a connection that subscribes to no session still follows
every session's status, message_count, updated_at and usage (a session browser)."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, Reply

from .wire import Connect, Json, Rpc, create_session, submit, terminal, wait_complete, wait_settled


def summaries(rpc: Rpc, sid: str) -> list[Json]:
    """The session's `session.updated` broadcasts this connection received, in order."""
    return [
        e["data"]["session"] for e in rpc.events
        if e["type"] == "session.updated" and e["session_id"] == sid
    ]


def statuses(rpc: Rpc, sid: str) -> list[str]:
    """The statuses the broadcasts went through, each run of repeats shown once."""
    out: list[str] = []
    for s in summaries(rpc, sid):
        if not out or out[-1] != s["status"]:
            out.append(s["status"])
    return out


async def idle_again(rpc: Rpc, sid: str, count: int) -> Json:
    """Waits for the session's broadcasts to report it idle with `count` messages."""
    await rpc.wait_until(
        lambda: any(s["status"] == "idle" and s["message_count"] == count
                    for s in summaries(rpc, sid)),
        what=f"session.updated idle with {count} messages",
    )
    return summaries(rpc, sid)[-1]


def assert_broadcast_only(rpc: Rpc, sid: str) -> None:
    """The watcher is subscribed to nothing: it gets no stored event of the session, and
    the broadcasts carry no seq."""
    mine = [e for e in rpc.events if e["session_id"] == sid]
    assert mine, "the watcher saw nothing of the session"
    assert all("seq" not in e for e in mine), [e for e in mine if "seq" in e]


async def test_an_unsubscribed_connection_follows_a_plain_turn(
    connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.script(Reply(deltas=["Hello", " there."]))
    actor = await connect(name="actor")
    watcher = await connect(name="watcher")
    sid = await create_session(actor)
    created = (await actor.call("session.get", {"session_id": sid}))["session"]

    receipt = await submit(actor, sid, "say hello")
    await wait_settled(actor, receipt["admission_id"])
    final = await idle_again(watcher, sid, 2)

    # An idle session's prompt starts its turn in the admission's own commit: no `queued`.
    assert statuses(watcher, sid) == ["running", "idle"], summaries(watcher, sid)
    assert final["usage"]["input_tokens"] == 11, final
    assert final["usage"]["output_tokens"] == 7, final
    assert final["updated_at"] >= created["updated_at"]
    # The last broadcast is the session as `session.get` reports it once the turn is over.
    now = (await actor.call("session.get", {"session_id": sid}))["session"]
    assert final == now
    assert_broadcast_only(watcher, sid)
    # One broadcast per transaction, however many of its writes touched the summary: the
    # submit with its claim (admission queued then started, user row, touch) and the close
    # (assistant row, settle, usage, touch).
    assert [s["status"] for s in summaries(watcher, sid)] == ["running", "idle"]
    assert [s["message_count"] for s in summaries(watcher, sid)] == [1, 2]
    # The actor, subscribed, gets the broadcasts too (without seq) besides its stored log.
    assert summaries(actor, sid)[-1] == final

    renamed = (await actor.call("session.update", {"session_id": sid, "title": "greeting"}))
    await watcher.wait_until(lambda: summaries(watcher, sid)[-1]["title"] == "greeting",
                             what="session.updated with the new title")
    assert summaries(watcher, sid)[-1]["title"] == renamed["session"]["title"]
    assert summaries(watcher, sid)[-1]["status"] == "idle"
    assert_broadcast_only(watcher, sid)


async def test_an_unsubscribed_connection_sees_a_turn_wait_for_approval(
    connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    fake_provider.script(
        Reply.calls(terminal("rm -rf victim"), text="Cleaning up."),
        Reply(deltas=["Understood, I left it alone."]),
    )
    actor = await connect(name="actor")
    watcher = await connect(name="watcher")
    sid = await create_session(actor, cwd=str(tmp_path))
    receipt = await submit(actor, sid, "delete victim")

    await watcher.wait_until(
        lambda: any(s["status"] == "waiting_approval" for s in summaries(watcher, sid)),
        what="session.updated waiting_approval",
    )
    waiting = next(s for s in summaries(watcher, sid) if s["status"] == "waiting_approval")
    # By then the assistant's row with the call is stored: user + assistant.
    assert waiting["message_count"] == 2, waiting
    request = await actor.wait_event(
        lambda e: e["type"] == "approval.request" and e["session_id"] == sid and "seq" in e)
    approval_id = request["data"]["approval"]["approval_id"]
    await actor.call("approval.respond", {"approval_id": approval_id, "decision": "deny"})
    done = await wait_complete(actor, receipt["admission_id"])
    assert done["data"]["status"] == "completed", done

    # user, assistant with the call, the denied tool result, the final answer
    final = await idle_again(watcher, sid, 4)
    assert statuses(watcher, sid) == ["running", "waiting_approval", "running", "idle"], (
        summaries(watcher, sid)
    )
    assert final["usage"]["input_tokens"] == 22, final  # two model calls
    assert final["usage"]["output_tokens"] == 14, final
    assert final == (await actor.call("session.get", {"session_id": sid}))["session"]
    assert_broadcast_only(watcher, sid)
    assert victim.is_dir()


async def test_a_prompt_behind_a_running_turn_is_queued_between_the_two_turns(
    connect: Connect, fake_provider: FakeOpenAI
) -> None:
    release = threading.Event()
    fake_provider.script(Reply(deltas=["first"], hang_after=1, release=release),
                         Reply(deltas=["second"]))
    actor = await connect(name="actor")
    watcher = await connect(name="watcher")
    sid = await create_session(actor)
    first = await submit(actor, sid, "one")
    await watcher.wait_until(lambda: statuses(watcher, sid) == ["running"], what="running")
    second = await submit(actor, sid, "two")
    assert second["status"] == "queued"
    release.set()
    await wait_settled(actor, first["admission_id"])
    await wait_settled(actor, second["admission_id"])
    await idle_again(watcher, sid, 4)
    # The first turn's close leaves the second queued with nothing running, until its claim.
    assert statuses(watcher, sid) == ["running", "queued", "running", "idle"], summaries(watcher, sid)
