"""Context compression end to end, through a real backend and a small-window fake model:
in place (compacted rows stay for people), iterative summaries, the failure cooldown,
anti-thrash, the provider-overflow retry, and `session.compress`."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from backend.compress.summary import SECTIONS
from tests.fakes.openai_server import FakeOpenAI, Reply, content_text

from .backend_proc import Backend, BackendFactory
from .wire import Json, Rpc, create_session, submit, wait_complete

WINDOW = 6000  # tokens: compression starts at 0.75 of it (windows under 512K)


def config(base_url: str, window: int = WINDOW, compression: str = "") -> str:
    return (
        'default_provider = "main"\n'
        "[providers.main]\n"
        'kind = "openai"\n'
        f'base_url = "{base_url}"\n'
        'model = "fake-model"\n'
        f"context_window = {window}\n"
        "max_output_tokens = 256\n"
        "[compression]\n"
        "tail_tokens_min = 300\n"
        f"{compression}\n"
    )


def is_summary_request(body: Json) -> bool:
    system = content_text(body["messages"][0]) if body.get("messages") else ""
    return "tools" not in body and "Next steps" in system


class Model:
    """The fake model: answers turns with `answer(n)`, summaries with `summary(n)` (or fails
    them), and keeps every request in order."""

    def __init__(self, fake: FakeOpenAI, summary_fails: bool = False) -> None:
        self.turns = itertools.count(1)
        self.summaries = itertools.count(1)
        self.summary_fails = summary_fails
        self.overflow = False  # turn requests answer 400 context_length_exceeded
        fake.responder = self.respond

    def respond(self, body: Json) -> Reply:
        if is_summary_request(body):
            n = next(self.summaries)
            if self.summary_fails:
                return Reply.http_error(500, "summarizer down")
            return Reply(deltas=[f"## Goal\nSUMMARY-{n}: the user is testing compression.\n"
                                 "## Next steps\nkeep going"])
        if self.overflow:
            return Reply(status=400, error={"error": {
                "message": "This model's maximum context length is 6000 tokens",
                "type": "invalid_request_error", "code": "context_length_exceeded"}})
        n = next(self.turns)
        return Reply(deltas=[f"answer {n}: " + "word " * 350])


@asynccontextmanager
async def started(
    backend_factory: BackendFactory, fake: FakeOpenAI, **cfg: Any
) -> AsyncIterator[tuple[Backend, Rpc]]:
    backend = backend_factory(fake.base_url, start=False)
    backend.write_config(config(fake.base_url, **cfg))
    backend.start()
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        yield backend, rpc
    finally:
        if not rpc.closed.is_set():
            await rpc.close()


async def turn(rpc: Rpc, sid: str, text: str) -> Json:
    receipt = await submit(rpc, sid, text)
    done: Json = (await wait_complete(rpc, receipt["admission_id"], 60))["data"]
    return done


def prompt(n: int, words: int = 300) -> str:
    return f"question {n}: " + "filler " * words


def events_of(rpc: Rpc, sid: str, type_: str) -> list[Json]:
    return [e for e in rpc.session_events(sid) if e["type"] == type_]


def turn_requests(fake: FakeOpenAI) -> list[Json]:
    return [r.body for r in fake.snapshot() if not is_summary_request(r.body)]


def summary_requests(fake: FakeOpenAI) -> list[Json]:
    return [r.body for r in fake.snapshot() if is_summary_request(r.body)]


def guards(backend: Backend, sid: str) -> dict[str, Any]:
    [row] = backend.query(
        "SELECT compress_failures, compress_cooldown_until, compress_ineffective, "
        "compress_probe_after FROM sessions WHERE session_id = ?", (sid,))
    return row


def compression_locks(backend: Backend) -> int:
    return int(backend.query("SELECT COUNT(*) AS n FROM compression_locks")[0]["n"])


def texts(body: Json) -> list[str]:
    return [content_text(m) for m in body["messages"]]


def check_pairs(body: Json) -> None:
    """Every tool call in a request has exactly one result, and every result a call."""
    calls = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or []]
    results = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    assert sorted(calls) == sorted(results), (calls, results)
    assert len(set(calls)) == len(calls)


async def test_long_turns_compress_in_place_and_the_next_summary_updates_the_first(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    Model(fake_provider)
    async with started(backend_factory, fake_provider) as (_, rpc):
        sid = await create_session(rpc, cwd=str(tmp_path))
        for n in range(1, 9):
            done = await turn(rpc, sid, prompt(n))
            assert done["status"] == "completed", done
        starts = events_of(rpc, sid, "compression.start")
        completes = events_of(rpc, sid, "compression.complete")
        assert len(starts) >= 2, "several long turns compress more than once"
        assert len(completes) == len(starts)
        for c in completes:
            assert c["data"]["after_tokens"] < c["data"]["before_tokens"]
        # The first summary request had no previous summary; the second one carries it.
        sums = summary_requests(fake_provider)
        assert len(sums) == len(starts)
        assert not any("SUMMARY-1" in t for t in texts(sums[0]))
        assert any("SUMMARY-1" in t for t in texts(sums[1])), "the second compression updates the first"
        # The request after a compression: system prompt, the protected head, the summary, the
        # tail with the latest user message last.
        requests = turn_requests(fake_provider)
        last = requests[-1]
        wire = texts(last)
        assert last["messages"][0]["role"] == "system"
        assert "question 1:" in wire[1], "the head (first messages) is protected"
        assert any(f"SUMMARY-{len(sums)}" in t for t in wire), "the newest summary is in view"
        assert not any(f"SUMMARY-{len(sums) - 1}:" in t for t in wire if len(sums) > 1), \
            "an older summary is replaced, not stacked"
        assert wire[-1].startswith("question 8:"), "the latest user message is kept, last"
        assert len(last["messages"]) < 2 * 8 + 1, "compacted turns are not sent"
        for body in requests:
            check_pairs(body)
        # In place: people still see every message; the model's view is marked compacted.
        page = await rpc.call("session.messages", {"session_id": sid, "limit": 1000})
        rows = page["messages"]
        users = [m for m in rows if m["role"] == "user"]
        assert [m["content"].split(":")[0] for m in users] == [f"question {n}" for n in range(1, 9)]
        assert any(m["compacted"] for m in rows)
        notes = [m for m in rows if m["role"] == "system_note" and m["note_kind"] == "summary"]
        assert len(notes) == len(starts)
        assert sum(1 for m in notes if not m["compacted"]) == 1


async def test_a_failing_summarizer_falls_back_grows_the_cooldown_and_the_turn_completes(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    Model(fake_provider, summary_fails=True)
    async with started(backend_factory, fake_provider) as (backend, rpc):
        sid = await create_session(rpc, cwd=str(tmp_path))
        n = 0
        while not events_of(rpc, sid, "compression.complete"):
            n += 1
            assert n < 10, "no compression happened"
            done = await turn(rpc, sid, prompt(n))
            assert done["status"] == "completed", done
        g = guards(backend, sid)
        assert g["compress_failures"] == 1
        assert 50 < g["compress_cooldown_until"] - time.time() <= 60
        # In the cooldown, turns go on without compressing.
        before = len(events_of(rpc, sid, "compression.start"))
        done = await turn(rpc, sid, prompt(n + 1))
        assert done["status"] == "completed"
        assert len(events_of(rpc, sid, "compression.start")) == before
        # The deterministic summary stood in: the model still gets a summary of the middle.
        assert any("Next steps" in t or "Goal" in t for t in texts(turn_requests(fake_provider)[-1]))
        # Further failures grow the cooldown: 300 s, then 900 s.
        for expected in (300, 900):
            await turn(rpc, sid, prompt(100 + expected, 40))
            out = await rpc.call("session.compress", {"session_id": sid})
            assert out["compressed"], out
            left = guards(backend, sid)["compress_cooldown_until"] - time.time()
            assert expected - 10 < left <= expected


async def test_two_ineffective_compressions_stop_automatic_compression_until_the_probe(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    Model(fake_provider)
    async with started(backend_factory, fake_provider, window=12000) as (backend, rpc):
        sid = await create_session(rpc, cwd=str(tmp_path))
        for n in range(1, 4):
            await turn(rpc, sid, prompt(n, 40))
        # Words (~7K tokens): after compressing still over 0.75 × 12000, yet with the system
        # prompt and every tool offered well inside the window (the guards hold only then).
        huge = 4000
        for n in range(4, 6):
            done = await turn(rpc, sid, prompt(n, huge))
            assert done["status"] == "completed", done
        g = guards(backend, sid)
        assert g["compress_ineffective"] == 2
        assert 290 < g["compress_probe_after"] - time.time() <= 300
        attempts = len(events_of(rpc, sid, "compression.start"))
        # Still over the threshold, still fits the window: no compression before the probe.
        done = await turn(rpc, sid, prompt(6, 100))
        assert done["status"] == "completed", done
        assert len(events_of(rpc, sid, "compression.start")) == attempts, "no third attempt before the probe"


async def test_a_provider_overflow_compresses_once_then_fails_closed(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    model = Model(fake_provider)
    async with started(backend_factory, fake_provider, window=100000) as (_, rpc):
        sid = await create_session(rpc, cwd=str(tmp_path))
        for n in range(1, 7):
            await turn(rpc, sid, prompt(n, 300))
        assert not events_of(rpc, sid, "compression.start"), "under the threshold: no compression yet"
        model.overflow = True
        sent_before = len(turn_requests(fake_provider))
        done = await turn(rpc, sid, prompt(7, 10))
        assert done["status"] == "failed"
        assert done["failure_reason"].startswith("The conversation is too long for this model")
        assert "not sent again" in done["failure_reason"]
        assert "main" in done["failure_detail"], "the provider's own words, a click away"
        assert len(events_of(rpc, sid, "compression.complete")) == 1, "one compress-and-retry"
        assert len(turn_requests(fake_provider)) - sent_before == 2, "sent once, retried once, no more"


async def test_session_compress_on_request_with_a_focus(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    Model(fake_provider)
    async with started(backend_factory, fake_provider, window=100000) as (_, rpc):
        sid = await create_session(rpc, cwd=str(tmp_path))
        for n in range(1, 7):
            await turn(rpc, sid, prompt(n, 200))
        out = await rpc.call("session.compress", {"session_id": sid, "focus": "the parser bug"})
        assert out["compressed"] is True
        assert out["session_id"] == sid
        assert out["after_tokens"] < out["before_tokens"]
        body = summary_requests(fake_provider)[-1]
        assert any("the parser bug" in t for t in texts(body))
        # Nothing new to compress right after: a clear "no", not an error.
        again = await rpc.call("session.compress", {"session_id": sid})
        assert again["compressed"] is False
        assert again["reason"]
        done = await turn(rpc, sid, prompt(7, 10))
        assert done["status"] == "completed"
        wire = texts(turn_requests(fake_provider)[-1])
        assert any("SUMMARY-1" in t for t in wire)
        assert json.dumps(wire).count("question 7:") == 1


async def test_with_rotation_the_conversation_continues_in_a_child_session(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    Model(fake_provider)
    async with started(backend_factory, fake_provider, compression="rotate = true") as (_, rpc):
        parent = await create_session(rpc, cwd=str(tmp_path))
        await rpc.call("session.update", {"session_id": parent, "provider": "main"})
        n = 0
        while not events_of(rpc, parent, "compression.complete"):
            n += 1
            assert n < 10, "no compression happened"
            done = await turn(rpc, parent, prompt(n))
            assert done["status"] == "completed", done
        complete = events_of(rpc, parent, "compression.complete")[0]["data"]
        child = complete["child_session_id"]
        assert child
        assert child != parent
        # The turn that compressed finished in the child, and this connection followed it
        # there without asking (the parent's followers move to the child).
        assert events_of(rpc, child, "message.complete"), "the running turn went on in the child"
        continued = (await rpc.call("session.get", {"session_id": child}))["session"]
        assert continued["parent_session_id"] == parent
        assert continued["provider"] == "main", "the session's own provider goes on with it"
        assert (await rpc.call("session.get", {"session_id": parent}))["session"]["child_session_id"] \
            == child
        # A prompt sent to the parent runs in the child; the request holds the summary and it.
        receipt = await submit(rpc, parent, prompt(50, 20))
        assert receipt["session_id"] == child
        done = (await wait_complete(rpc, receipt["admission_id"], 60))["data"]
        assert done["status"] == "completed"
        wire = texts(turn_requests(fake_provider)[-1])
        assert any("SUMMARY-1" in t for t in wire)
        assert wire[-1].startswith("question 50:")
        assert "question 1:" in wire[1], "the head came along"
        # The parent keeps its whole history and says where it continues; the child starts
        # with the head, the summary and the tail.
        parent_rows = (await rpc.call("session.messages",
                                      {"session_id": parent, "limit": 1000}))["messages"]
        assert parent_rows[-1]["note_kind"] == "continued"
        assert sum(1 for m in parent_rows if m["role"] == "user") == n
        child_rows = (await rpc.call("session.messages",
                                     {"session_id": child, "limit": 1000}))["messages"]
        assert any(m.get("note_kind") == "summary" for m in child_rows)
        assert child_rows[0]["content"].startswith("question 1:")
        for body in turn_requests(fake_provider):
            check_pairs(body)
        # The same request id sent again to the parent is the same admission, not a rerun.
        again = await rpc.call("prompt.submit", {"session_id": parent, "request_id":
                                                 receipt["request_id"], "text": prompt(50, 20)})
        assert again["receipt"]["duplicate"] is True


async def test_kill9_during_a_summary_loses_nothing_and_the_next_compression_reclaims_the_lock(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    model = Model(fake_provider)
    hanging = True
    plain = model.respond

    def respond(body: Json) -> Reply:
        if hanging and is_summary_request(body):
            return Reply(deltas=["never"], hang_after=0)  # the summarizer never answers
        return plain(body)

    fake_provider.responder = respond
    async with started(backend_factory, fake_provider) as (backend, rpc):
        sid = await create_session(rpc, cwd=str(tmp_path))
        n = 0
        while True:
            n += 1
            assert n < 10, "no compression started"
            receipt = await submit(rpc, sid, prompt(n))
            aid = receipt["admission_id"]
            seen = await rpc.wait_event(
                lambda e: e.get("admission_id") == aid  # noqa: B023  (awaited in this iteration)
                and e["type"] in ("compression.start", "message.complete"), 60)
            if seen["type"] == "compression.start":
                break
        for _ in range(200):  # the summary call is in flight (and hanging) at the fake
            if summary_requests(fake_provider):
                break
            await asyncio.sleep(0.02)
        assert summary_requests(fake_provider)
        before = (await rpc.call("session.messages", {"session_id": sid, "limit": 1000}))["messages"]
        backend.kill9()  # mid-summary: the lock row is held by a dead process now
        assert compression_locks(backend) == 1
        hanging = False
        backend.start()
        rpc = await Rpc.open(backend.port, backend.token)
        try:
            after = (await rpc.call("session.messages", {"session_id": sid, "limit": 1000}))["messages"]
            kept = [m for m in after if m["role"] != "system_note"]
            assert [m["message_id"] for m in kept] == [m["message_id"] for m in before], \
                "nothing lost, doubled or invented"
            assert not any(m["compacted"] for m in after), "a compression that never committed left no trace"
            assert (await rpc.call("admission.get", {"admission_id": receipt["admission_id"]}))[
                "receipt"]["status"] == "unknown"
            # Moving on: the next turn compresses (the dead holder's lock is reclaimed) and completes.
            done = await turn(rpc, sid, prompt(n + 1))
            assert done["status"] == "completed", done
            assert events_of(rpc, sid, "compression.complete")
            rows = (await rpc.call("session.messages", {"session_id": sid, "limit": 1000}))["messages"]
            users = [m["content"].split(":")[0] for m in rows if m["role"] == "user"]
            assert users == [f"question {i}" for i in range(1, n + 2)]
            assert compression_locks(backend) == 0
        finally:
            await rpc.close()


async def test_a_fallback_summary_fits_a_small_window_and_the_turn_completes(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    """In a 4,000-token window the summarizer answers once (a full summary, within the
    ~1,000 tokens it is given), then fails: each deterministic summary that stands in keeps
    the one before and adds the new requests, and must be cut to what the window leaves it,
    as the model's own summary is, or a turn stops fitting the window."""
    model = Model(fake_provider)
    first = "## Goal\nFix the parser.\n## Progress\n" + "\n".join(
        f"- step {i}: looked at parser/module_{i}.py and noted its state machine" for i in range(55))
    assert 3500 < len(first) < 4000, len(first)  # ~950 tokens: what the model may write here
    summaries = itertools.count(1)

    def respond(body: Json) -> Reply:
        if is_summary_request(body):
            if next(summaries) == 1:
                return Reply(deltas=[first])
            return Reply.http_error(500, "summarizer down")
        return model.respond(body)

    fake_provider.responder = respond
    window = 4000
    async with started(backend_factory, fake_provider, window=window) as (_, rpc):
        sid = await create_session(rpc, cwd=str(tmp_path))
        for n in range(1, 16):  # the summarizer is down after the first compression
            done = await turn(rpc, sid, prompt(n, 120))
            assert done["status"] == "completed", f"turn {n}: {done}"
        completes = [e["data"] for e in events_of(rpc, sid, "compression.complete")]
        assert len(completes) >= 4, completes
        for c in completes:
            assert c["after_tokens"] <= window - 256 - 64, completes  # room for an answer
        notes = [m for m in (await rpc.call("session.messages", {"session_id": sid,
                                                                 "limit": 1000}))["messages"]
                 if m.get("note_kind") == "summary"]
        assert [m["meta"]["fallback"] for m in notes] == [False] + [True] * (len(notes) - 1)
        assert [line for line in notes[-1]["content"].splitlines() if line.startswith("## ")] \
            == [f"## {name}" for name in SECTIONS], "cut section by section, every one kept"
        wire = texts(turn_requests(fake_provider)[-1])
        assert any(t.startswith("[Summary of earlier conversation") for t in wire)
