"""Session methods over the wire: create/get/list/update/delete, broadcasts, busy deletes, search."""

from __future__ import annotations

import threading

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .wire import Connect, RpcError, create_session, run_turn, submit, wait_complete

SESSION_FIELDS = {
    "session_id", "title", "cwd", "model", "created_at", "updated_at", "status", "message_count", "usage",
}  # fmt: skip
USAGE_FIELDS = {"input_tokens", "output_tokens", "cached_tokens", "cost_usd"}


async def test_session_round_trip(connect: Connect, tmp_path_factory: pytest.TempPathFactory) -> None:
    cwd = str(tmp_path_factory.mktemp("work"))
    rpc = await connect()
    created = (await rpc.call("session.create", {"title": "first", "cwd": cwd}))["session"]
    assert set(created) >= SESSION_FIELDS, f"missing session fields: {SESSION_FIELDS - set(created)}"
    assert set(created["usage"]) >= USAGE_FIELDS, created["usage"]
    assert (created["title"], created["cwd"], created["status"]) == ("first", cwd, "idle")
    assert created["message_count"] == 0
    sid = created["session_id"]
    assert (await rpc.call("session.get", {"session_id": sid}))["session"] == created

    updated = (await rpc.call("session.update", {"session_id": sid, "title": "renamed"}))["session"]
    assert updated["title"] == "renamed"
    assert (await rpc.call("session.get", {"session_id": sid}))["session"]["title"] == "renamed"
    listed = (await rpc.call("session.list", {}))["sessions"]
    assert [s["title"] for s in listed if s["session_id"] == sid] == ["renamed"]

    assert await rpc.call("session.delete", {"session_id": sid}) == {"deleted": True}
    with pytest.raises(RpcError) as gone:
        await rpc.call("session.get", {"session_id": sid})
    assert gone.value.code == -32004
    assert gone.value.data.get("kind") == "session"
    assert sid not in [s["session_id"] for s in (await rpc.call("session.list", {}))["sessions"]]


async def test_created_and_deleted_reach_every_connection_without_seq(connect: Connect) -> None:
    actor = await connect(name="actor")
    watcher = await connect(name="watcher")
    sid = await create_session(actor)
    created = await watcher.wait_event(lambda e: e["type"] == "session.created" and e["session_id"] == sid)
    assert "seq" not in created, f"session-less events carry no seq: {created}"
    assert created["data"]["session"]["session_id"] == sid
    await actor.call("session.delete", {"session_id": sid})
    deleted = await watcher.wait_event(lambda e: e["type"] == "session.deleted" and e["session_id"] == sid)
    assert "seq" not in deleted, deleted
    assert deleted["data"]["session_id"] == sid


async def test_delete_while_running_is_busy_unless_forced(
    connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.routes["long job"] = Reply(deltas=["working", " LOST"], hang_after=1)
    rpc = await connect()
    sid = await create_session(rpc)
    receipt = await submit(rpc, sid, "long job")
    await rpc.wait_event(lambda e: e["type"] == "message.delta" and e["session_id"] == sid)
    with pytest.raises(RpcError) as busy:
        await rpc.call("session.delete", {"session_id": sid})
    assert busy.value.code == -32009, f"delete of a running session: {busy.value}"
    assert await rpc.call("session.delete", {"session_id": sid, "force": True}) == {"deleted": True}
    complete = await wait_complete(rpc, receipt["admission_id"])
    assert complete["data"]["status"] == "interrupted", "force interrupts the turn first"
    with pytest.raises(RpcError) as gone:
        await rpc.call("session.get", {"session_id": sid})
    assert gone.value.code == -32004


async def test_list_pages_with_a_cursor(connect: Connect) -> None:
    rpc = await connect()
    made = {await create_session(rpc, title=f"paged {i}") for i in range(5)}
    seen: list[str] = []
    pages: list[dict[str, object]] = []
    cursor = None
    for _ in range(10):
        params: dict[str, object] = {"limit": 2}
        if cursor is not None:
            params["cursor"] = cursor
        page = await rpc.call("session.list", params)
        pages.append(page)
        assert len(page["sessions"]) <= 2, "limit is respected"
        seen += [s["session_id"] for s in page["sessions"]]
        cursor = page.get("next_cursor")
        if cursor is None:
            break
    assert len(seen) == len(set(seen)), f"a session listed twice across pages: {seen}"
    assert set(seen) == made, "paging with next_cursor reaches every session"
    missing = [i for i, page in enumerate(pages) if "next_cursor" not in page]
    assert not missing, f"pages {missing} of {len(pages)} lack next_cursor (null on the last page)"


async def test_list_query_searches_titles_and_messages(connect: Connect, fake_provider: FakeOpenAI) -> None:
    rpc = await connect()
    by_title = await create_session(rpc, title="apricot planning")
    by_text = await create_session(rpc, title="misc")
    await create_session(rpc, title="unrelated")
    await run_turn(rpc, by_text, "tell me about the zebra crossing")
    hits = (await rpc.call("session.list", {"query": "apricot"}))["sessions"]
    assert [s["session_id"] for s in hits][:1] == [by_title], hits
    hits = (await rpc.call("session.list", {"query": "zebra"}))["sessions"]
    assert [s["session_id"] for s in hits][:1] == [by_text], "message text is searched too"


async def test_list_query_says_where_each_session_matched(
    connect: Connect, fake_provider: FakeOpenAI
) -> None:
    answer = "Quokkas   live on <b>Rottnest</b>\n[island] 🏝️ with a naïve quokka grin"
    fake_provider.routes["quokka habitat"] = Reply(deltas=[answer[:20], answer[20:]])
    rpc = await connect()
    by_title = await create_session(rpc, title="🦘 Quokka planning")
    by_text = await create_session(rpc, title="misc")
    await create_session(rpc, title="unrelated")
    await run_turn(rpc, by_text, "tell me about the quokka habitat, please")
    assert "matches" not in await rpc.call("session.list", {}), "no query, no matches"
    assert "matches" not in await rpc.call("session.list", {"query": "wombat"})

    result = await rpc.call("session.list", {"query": "quok"})
    assert [s["session_id"] for s in result["sessions"]] == [by_title, by_text], result
    title_match, text_match = result["matches"]
    assert title_match == {"session_id": by_title, "message_id": None,
                           "snippet": "🦘 Quokka planning", "highlights": [[2, 6]]}
    assert title_match["snippet"][2:6] == "Quok", "offsets count code points: the emoji is one"
    listed = (await rpc.call("session.messages", {"session_id": by_text}))["messages"]
    assert text_match["message_id"] in [m["message_id"] for m in listed]
    shown = next(m["content"] for m in listed if m["message_id"] == text_match["message_id"])
    snippet = text_match["snippet"]
    assert snippet.strip("…") in " ".join(shown.split()), "a piece of the message, on one line"
    assert [snippet[a:b].lower() for a, b in text_match["highlights"]] in (
        ["quokka"], ["quokkas", "quokka"]), text_match

    naive = (await rpc.call("session.list", {"query": "NAIVE"}))["matches"]
    assert len(naive) == 1
    assert naive[0]["session_id"] == by_text
    ((a, b),) = naive[0]["highlights"]
    assert naive[0]["snippet"][a:b] == "naïve", "past an emoji and found without the accent"
    assert "<b>Rottnest</b> [island]" in naive[0]["snippet"], "markup in a message is text"

    for attack in ['"quok', 'quok"', "quok*", "-quok", "(quok)", "quok:", "^quok", "quok -"]:
        hits = await rpc.call("session.list", {"query": attack})
        ids = [s["session_id"] for s in hits["sessions"]]
        assert by_text in ids, f"{attack!r}: FTS syntax in a query is plain words"
        assert [m["session_id"] for m in hits["matches"]] == ids, attack
    for words in ["NEAR(quok", "quok OR wombat", "quok NOT", '"', "-"]:  # words no message has
        assert "matches" not in await rpc.call("session.list", {"query": words}), words


async def test_list_query_matches_follow_the_pages(connect: Connect, fake_provider: FakeOpenAI) -> None:
    rpc = await connect()
    made = [await create_session(rpc, title=f"numbat {i}") for i in range(3)]
    seen: list[str] = []
    params: dict[str, object] = {"query": "numbat", "limit": 2}
    while True:
        page = await rpc.call("session.list", params)
        assert [m["session_id"] for m in page["matches"]] == [s["session_id"] for s in page["sessions"]]
        assert all(m["snippet"].startswith("numbat ") and m["highlights"] == [[0, 6]]
                   for m in page["matches"]), page["matches"]
        seen += [s["session_id"] for s in page["sessions"]]
        if page["next_cursor"] is None:
            break
        params["cursor"] = page["next_cursor"]
    assert sorted(seen) == sorted(made)


async def test_status_is_running_during_a_turn(connect: Connect, fake_provider: FakeOpenAI) -> None:
    release = threading.Event()
    fake_provider.routes["status check"] = Reply(deltas=["a", "b"], hang_after=1, release=release)
    rpc = await connect()
    sid = await create_session(rpc)
    try:
        receipt = await submit(rpc, sid, "status check")
        await rpc.wait_event(lambda e: e["type"] == "message.delta" and e["session_id"] == sid)
        session = (await rpc.call("session.get", {"session_id": sid}))["session"]
        assert session["status"] == "running", session
    finally:
        release.set()
    await wait_complete(rpc, receipt["admission_id"])


async def test_an_untitled_session_is_named_by_its_first_prompt_and_a_titled_one_is_kept(
    connect: Connect, fake_provider: FakeOpenAI
) -> None:
    rpc = await connect()
    watcher = await connect(name="watcher")
    sid = await create_session(rpc)
    assert (await rpc.call("session.get", {"session_id": sid}))["session"]["title"] == "New session"
    first = "\n  Fix the flaky restore test in the desktop app before the release\nwith details"
    await run_turn(rpc, sid, first)
    title = "Fix the flaky restore test in the desktop app before the…"
    assert (await rpc.call("session.get", {"session_id": sid}))["session"]["title"] == title
    # Named in the admission's commit: every summary broadcast since (the first one included)
    # carries the title, on every connection.
    updates = [e["data"]["session"] for e in watcher.events
               if e["type"] == "session.updated" and e["session_id"] == sid]
    assert updates
    assert {s["title"] for s in updates} == {title}, updates
    await run_turn(rpc, sid, "Now something else entirely")
    assert (await rpc.call("session.get", {"session_id": sid}))["session"]["title"] == title, \
        "a second prompt does not rename"

    titled = await create_session(rpc, title="Release checklist")
    renamed = await create_session(rpc)
    await rpc.call("session.update", {"session_id": renamed, "title": "Renamed by hand"})
    for session_id in (titled, renamed):
        await run_turn(rpc, session_id, "Please look at the logs")
    listed = {s["session_id"]: s["title"] for s in (await rpc.call("session.list", {}))["sessions"]}
    assert (listed[titled], listed[renamed]) == ("Release checklist", "Renamed by hand")
