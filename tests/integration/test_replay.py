"""Event replay: subscribe mid-stream with since_seq, reconnect, restart — no gap, no duplicate."""

from __future__ import annotations

import asyncio
import threading
from functools import partial

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend
from .wire import Connect, Json, Rpc, create_session, run_turn, submit, wait_settled

DELTAS = [f"d{i:03d} " for i in range(200)]
GATE_AT = 150  # the model pauses here until the test has (re)subscribed: live deltas follow


def _long_stream(fake: FakeOpenAI, text: str) -> threading.Event:
    gate = threading.Event()
    fake.routes[text] = Reply(deltas=DELTAS, delay=0.005, hang_after=GATE_AT, release=gate)
    return gate


def _seqs(events: list[Json]) -> list[int]:
    return [e["seq"] for e in events]


def _deltas_seen(rpc: Rpc, sid: str) -> int:
    return sum(1 for e in rpc.session_events(sid) if e["type"] == "message.delta")


def _at_least_deltas(rpc: Rpc, sid: str, n: int) -> bool:
    return _deltas_seen(rpc, sid) >= n


def _has_seq(rpc: Rpc, sid: str, seq: int) -> bool:
    return seq in _seqs(rpc.session_events(sid))


async def _finish(owner: Rpc, sid: str, admission_id: str, gate: threading.Event) -> int:
    """Let the model finish; return the session's last seq once ``owner`` has seen it all."""
    gate.set()
    await wait_settled(owner, admission_id)
    latest = (await owner.call("session.events.since", {"session_id": sid, "since_seq": 0}))["latest_seq"]
    await owner.wait_until(lambda: latest in _seqs(owner.session_events(sid)), what="last seq")
    return int(latest)


def _assert_exact_cover(seqs: list[int], first: int, last: int, who: str) -> None:
    dups = sorted({s for s in seqs if seqs.count(s) > 1})
    assert not dups, f"{who}: duplicated seqs {dups}"
    missing = sorted(set(range(first, last + 1)) - set(seqs))
    assert not missing, f"{who}: gap, missing seqs {missing}"
    extra = sorted(set(seqs) - set(range(first, last + 1)))
    assert not extra, f"{who}: seqs outside {first}..{last}: {extra}"


async def test_subscribe_mid_stream_since_seq_hands_over_without_gap_or_duplicate(
    connect: Connect, fake_provider: FakeOpenAI
) -> None:
    gate = _long_stream(fake_provider, "long stream")
    owner = await connect(name="owner")
    sid = await create_session(owner)
    receipt = await submit(owner, sid, "long stream")
    late: list[tuple[int, Rpc, Json]] = []
    for n in (3, 5, 7, 9):  # late subscribers joining at staggered points of the stream
        await owner.wait_until(partial(_at_least_deltas, owner, sid, n), what=f"{n} delta events")
        k = max(_seqs(owner.session_events(sid))) - 2  # a seq in the middle of the stream
        rpc = await connect(name=f"late-from-{k}")
        sub = await rpc.call("session.subscribe", {"session_id": sid, "since_seq": k})
        assert sub["truncated"] is False, sub
        late.append((k, rpc, sub))
    last = await _finish(owner, sid, receipt["admission_id"], gate)
    by_seq = {e["seq"]: e for e in owner.session_events(sid)}
    _assert_exact_cover(list(by_seq), 1, last, "owner")

    for _, rpc, _ in late:
        await rpc.wait_until(partial(_has_seq, rpc, sid, last), what="the last seq")
    await asyncio.sleep(0.3)  # a late duplicate would arrive now
    for k, rpc, sub in late:
        replayed, live = sub["events"], rpc.session_events(sid)
        assert _seqs(replayed) == sorted(_seqs(replayed)), f"{rpc.name}: replay in seq order"
        assert _seqs(live) == sorted(_seqs(live)), f"{rpc.name}: live events in seq order"
        _assert_exact_cover(_seqs(replayed) + _seqs(live), k + 1, last, f"{rpc.name} replay + live")
        assert any(e["type"] == "message.delta" for e in live), f"{rpc.name}: handover mid-stream"
        for event in replayed + live:
            assert event == by_seq[event["seq"]], f"{rpc.name} got a different event: {event}"
    n_deltas = sum(1 for e in by_seq.values() if e["type"] == "message.delta")
    assert 1 < n_deltas < len(DELTAS), f"{len(DELTAS)} model deltas stored as {n_deltas} events"


@pytest.mark.parametrize("method", ["session.subscribe", "session.resume"])
async def test_reconnect_with_last_seq_after_dropping_mid_stream(
    method: str, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    gate = _long_stream(fake_provider, "stream to drop")
    owner = await connect(name="owner")
    sid = await create_session(owner)
    receipt = await submit(owner, sid, "stream to drop")

    flaky = await connect(name="flaky")
    first = await flaky.call("session.subscribe", {"session_id": sid, "since_seq": 0})
    await flaky.wait_until(lambda: _deltas_seen(flaky, sid) >= 3, what="live deltas")
    flaky.abort()  # the client vanishes mid-stream, no closing handshake
    await flaky.wait_closed()
    seen_before = first["events"] + flaky.session_events(sid)
    mark = max(_seqs(seen_before))

    again = await connect(name="reconnected")
    sub = await again.call(method, {"session_id": sid, "since_seq": mark})
    assert sub["truncated"] is False, sub
    last = await _finish(owner, sid, receipt["admission_id"], gate)
    await again.wait_until(lambda: last in _seqs(again.session_events(sid)), what="the last seq")
    await asyncio.sleep(0.3)

    after = sub["events"] + again.session_events(sid)
    _assert_exact_cover(_seqs(after), mark + 1, last, "after reconnect")
    _assert_exact_cover(_seqs(seen_before) + _seqs(after), 1, last, "before + after the drop")
    by_seq = {e["seq"]: e for e in owner.session_events(sid)}
    for event in seen_before + after:
        assert event == by_seq[event["seq"]], f"a subscriber got a different event: {event}"
    complete = next(e for e in after if e["type"] == "message.complete")
    assert complete["data"]["text"] == "".join(DELTAS)


async def test_events_identical_after_restart_and_seq_continues(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.routes["before restart"] = Reply(deltas=["one ", "two ", "three"], delay=0.02)
    owner = await connect(name="owner")
    sid = await create_session(owner)
    await run_turn(owner, sid, "before restart")
    stored = await owner.call("session.events.since", {"session_id": sid, "since_seq": 0})
    latest = stored["latest_seq"]
    await owner.wait_until(lambda: latest in _seqs(owner.session_events(sid)), what="last seq")
    seen = owner.session_events(sid)
    assert stored["events"] == seen, "stored events differ from what was delivered live"
    _assert_exact_cover(_seqs(seen), 1, latest, "before restart")

    backend.kill9()
    backend.start()
    rpc = await connect(name="after-restart")
    replay = await rpc.call("session.events.since", {"session_id": sid, "since_seq": 0})
    assert replay["latest_seq"] == latest
    assert replay["truncated"] is False
    assert replay["events"] == seen, "events (type, seq, data, ids, ts) must survive a restart"
    future = await rpc.call("session.events.since", {"session_id": sid, "since_seq": latest + 50})
    assert future["truncated"] is True, "since_seq newer than latest_seq is truncated"

    sub = await rpc.call("session.subscribe", {"session_id": sid, "since_seq": latest})
    assert sub["events"] == []
    await run_turn(rpc, sid, "after restart")
    now = (await rpc.call("session.events.since", {"session_id": sid, "since_seq": 0}))["latest_seq"]
    await rpc.wait_until(lambda: now in _seqs(rpc.session_events(sid)), what="last seq")
    new = rpc.session_events(sid)
    assert new[0]["seq"] == latest + 1, f"seq continues after a restart: {_seqs(new)}"
    _assert_exact_cover(_seqs(new), latest + 1, now, "after restart")
    whole = await rpc.call("session.events.since", {"session_id": sid, "since_seq": 0})
    assert whole["events"][: len(seen)] == seen
    assert whole["events"][len(seen) :] == new


async def test_each_event_reaches_a_connection_once(connect: Connect, fake_provider: FakeOpenAI) -> None:
    rpc = await connect()
    sid = await create_session(rpc)  # subscribed by creating
    await rpc.call("session.subscribe", {"session_id": sid})
    await rpc.call("session.subscribe", {"session_id": sid, "since_seq": 0})
    await rpc.call("session.resume", {"session_id": sid})
    _, complete = await run_turn(rpc, sid, "submitting subscribes too")
    await asyncio.sleep(0.3)
    seqs = _seqs(rpc.session_events(sid))
    assert len(seqs) == len(set(seqs)), f"subscribing again must be harmless: {seqs}"
    assert complete["seq"] in seqs


async def test_submitter_is_subscribed_and_unsubscribe_stops_events(
    connect: Connect, fake_provider: FakeOpenAI
) -> None:
    creator = await connect(name="creator")
    sid = await create_session(creator)
    submitter = await connect(name="submitter")
    _, complete = await run_turn(submitter, sid, "from another connection")
    assert complete["data"]["status"] == "completed", "prompt.submit subscribes the submitter"

    assert await creator.call("session.unsubscribe", {"session_id": sid}) == {}
    await creator.wait_until(
        lambda: complete["seq"] in _seqs(creator.session_events(sid)), what="the first turn"
    )
    before = len(creator.session_events(sid))
    await run_turn(submitter, sid, "nobody watching")
    await asyncio.sleep(0.5)
    assert len(creator.session_events(sid)) == before, "no events after session.unsubscribe"
