"""A provider that sends huge lines or huge answers: bounded lines, bounded events, one stored copy
per place that needs the text, and the final text whole."""

from __future__ import annotations

from backend.providers.transport import MAX_LINE_BYTES
from backend.turn.stream import MAX_DELTA_BYTES
from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend
from .wire import Connect, assert_backend_healthy, create_session, get_receipt, run_turn, transcript

BIG = 10 * 1024 * 1024


def _text(size: int) -> str:
    """Prose-like ASCII of `size` characters: many distinct words, as an answer has."""
    words = (f"w{i % 7919}x{i % 13} " for i in range(size))
    out, n = [], 0
    for word in words:
        out.append(word)
        n += len(word)
        if n >= size:
            break
    return "".join(out)[:size]


def _used_bytes(backend: Backend) -> int:
    """What the store holds, as a reader of the committed state sees it.  SQLite: the pages in
    use.  PostgreSQL compresses long values (TOAST), which would hide a second copy, so there:
    the text of every row of every table, uncompressed."""
    if backend.on_postgres:
        tables = backend.query("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        return sum(int(backend.query(
            f'SELECT COALESCE(SUM(octet_length(t::text)), 0) AS n FROM "{row["tablename"]}" t')[0]["n"])
            for row in tables)
    [row] = backend.query("SELECT (SELECT page_count FROM pragma_page_count()) - "
                          "(SELECT freelist_count FROM pragma_freelist_count()) AS pages, "
                          "(SELECT page_size FROM pragma_page_size()) AS size")
    return int(row["pages"] * row["size"])


def _largest_event(backend: Backend) -> tuple[int, str]:
    [row] = backend.query("SELECT length(CAST(data AS TEXT)) AS size, type FROM events "
                          "ORDER BY length(CAST(data AS TEXT)) DESC LIMIT 1")
    return int(row["size"]), str(row["type"])


async def test_a_10_mb_line_fails_the_call_and_is_never_stored(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI,
) -> None:
    rpc = await connect()
    sid = await create_session(rpc)
    await run_turn(rpc, sid, "warm up")
    before = _used_bytes(backend)
    fake_provider.routes["one line"] = Reply(deltas=[_text(BIG)])  # one SSE line of 10 MB
    _, complete = await run_turn(rpc, sid, "answer in one line", timeout=120)
    data = complete["data"]
    assert data["status"] == "failed", data
    assert f"longer than {MAX_LINE_BYTES // 1024} KiB" in data["failure_detail"], data
    assert data["failure_reason"].startswith("The provider's server failed while answering."), data
    assert data["text"] == "", "nothing of the line reached anyone"
    grown = _used_bytes(backend) - before
    assert grown < BIG / 10, f"the database grew by {grown} bytes for a refused line"
    size, kind = _largest_event(backend)
    assert size <= MAX_DELTA_BYTES, (size, kind)
    await assert_backend_healthy(backend, fake_provider)


async def test_a_10_mb_answer_is_stored_in_bounded_events_and_kept_whole(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI,
) -> None:
    rpc = await connect()
    sid = await create_session(rpc)
    await run_turn(rpc, sid, "warm up")
    answer = _text(BIG)
    step = MAX_LINE_BYTES // 2  # legal lines: the answer comes in 20 deltas of 512 KiB
    fake_provider.routes["big answer"] = Reply(
        deltas=[answer[i:i + step] for i in range(0, BIG, step)])
    before = _used_bytes(backend)

    receipt, complete = await run_turn(rpc, sid, "a big answer please", timeout=120)
    assert complete["data"]["status"] == "completed", complete["data"]
    assert complete["data"]["text"] == answer, "message.complete carries the whole text"
    live = [e for e in rpc.session_events(sid) if e["type"] == "message.delta"
            and e["turn_id"] == complete["turn_id"]]
    assert "".join(e["data"]["text"] for e in live) == answer
    assert len(live) >= BIG // MAX_DELTA_BYTES, "a 512 KiB delta goes out in bounded pieces"

    assert (await transcript(rpc, sid))[-1]["content"] == answer
    assert (await get_receipt(rpc, receipt["admission_id"]))["final_text"] == answer
    replay = await rpc.call("session.events.since",
                            {"session_id": sid, "since_seq": complete["seq"] - 1})
    assert replay["events"][0]["data"]["text"] == answer, "replayed whole, from its one copy"
    settled = next(e for e in replay["events"] if e["type"] == "admission.settled")
    assert settled["data"]["receipt"]["final_text"] == answer

    size, kind = _largest_event(backend)
    assert size <= MAX_DELTA_BYTES, f"a stored {kind} event of {size} bytes"
    grown = _used_bytes(backend) - before
    # The deltas (for replay), the transcript row and the receipt: three places need the
    # text; message.complete and admission.settled refer to the receipt's.
    [events] = backend.query("SELECT SUM(length(CAST(data AS TEXT))) AS n FROM events")
    print("events", events["n"] / BIG)
    print(f"grew {grown / BIG:.2f} copies")
    assert grown < 3.5 * BIG, f"the database grew by {grown / BIG:.1f} copies of the answer"
    await assert_backend_healthy(backend, fake_provider)
