"""Tool rounds end to end: call order, persist-before-run, interrupts and storage failures."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.procs import running, unique_sleep, wait_gone, wait_running

from .backend_proc import Backend, BackendFactory
from .wire import (
    Connect,
    Json,
    Rpc,
    create_session,
    is_event,
    submit,
    terminal,
    tool_messages,
    transcript,
    wait_complete,
)


async def test_three_calls_finishing_out_of_order_are_stored_and_sent_in_call_order(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(
        Reply.calls(
            terminal("sleep 1.5; echo first"), terminal("echo second"),
            terminal("sleep 0.5; echo third"), text="Running three.",
        ),
        Reply(deltas=["All three ran."]),
    )
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "run them")
    done = await wait_complete(rpc, receipt["admission_id"])
    assert done["data"]["status"] == "completed", done
    assert done["data"]["text"] == "All three ran."

    tool_events = [e for e in rpc.session_events(sid) if e["type"].startswith("tool.")
                   and e["type"] != "tool.progress"]
    kinds = [e["type"] for e in tool_events]
    # All three started before the slowest (the first) finished: they ran concurrently.
    assert kinds == ["tool.start"] * 3 + ["tool.complete"] * 3, kinds
    started_ids = [e["data"]["call_id"] for e in tool_events[:3]]
    completed_ids = [e["data"]["call_id"] for e in tool_events[3:]]
    assert completed_ids == started_ids, "completions are emitted in call order"
    assert [e["data"]["status"] for e in tool_events[3:]] == ["ok", "ok", "ok"]
    # Each completion carries the start of its stored result, for the live tool card.
    assert ["first" in e["data"]["output"] for e in tool_events[3:]] == [True, False, False]
    assert ["third" in e["data"]["output"] for e in tool_events[3:]] == [False, False, True]
    assert not any(e["data"].get("output_truncated") for e in tool_events[3:])

    rows = await transcript(rpc, sid)
    roles = [m["role"] for m in rows]
    assert roles == ["user", "assistant", "tool", "tool", "tool", "assistant"], roles
    assert [c["call_id"] for c in rows[1]["tool_calls"]] == started_ids
    assert [m["call_id"] for m in rows[2:5]] == started_ids
    assert ["first" in rows[2]["content"], "second" in rows[3]["content"],
            "third" in rows[4]["content"]] == [True, True, True]

    second = fake_provider.snapshot()[1].body
    sent = tool_messages(second)
    assert [m["tool_call_id"] for m in sent] == started_ids
    assert "first" in sent[0]["content"]
    assert "third" in sent[2]["content"]
    assistant = [m for m in second["messages"] if m.get("tool_calls")]
    assert [c["id"] for c in assistant[0]["tool_calls"]] == started_ids


async def test_kill9_during_a_tool_leaves_the_call_unknown_and_it_never_finishes(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    fake_provider.script(Reply.calls(terminal(f"sleep 2; touch {marker}")))
    rpc = await connect(name="before")
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "touch it later")
    started = await rpc.wait_event(is_event("tool.start", receipt["admission_id"]))
    call_id = started["data"]["call_id"]
    await asyncio.sleep(0.3)  # the shell is running `sleep 2`
    backend.kill9()
    killed = time.monotonic()
    await rpc.wait_closed()
    backend.start()

    rpc = await connect(name="after")
    [leases] = backend.query("SELECT COUNT(*) AS n FROM turn_leases")
    assert leases["n"] == 0, "recovery drops the dead process's lease"
    rows = await transcript(rpc, sid)
    calls = [m for m in rows if m.get("tool_calls")]
    assert len(calls) == 1
    assert calls[0]["tool_calls"][0]["call_id"] == call_id
    results = [m for m in rows if m["role"] == "tool"]
    assert [m["status"] for m in results] == ["unknown"], results
    assert "not known" in results[0]["content"]
    assert rows[-1]["role"] == "system_note"
    assert rows[-1]["note_kind"] == "recovered"

    fake_provider.script(Reply(deltas=["Checked."]))
    nxt = await submit(rpc, sid, "what happened?")
    done = await wait_complete(rpc, nxt["admission_id"])
    assert done["data"]["status"] == "completed"
    body = fake_provider.snapshot()[-1].body
    sent = tool_messages(body)
    assert len(sent) == 1
    assert sent[0]["tool_call_id"] == call_id
    assert "unknown" in sent[0]["content"]
    assert "not known" in sent[0]["content"]
    await asyncio.sleep(max(0.0, 3.0 - (time.monotonic() - killed)))
    assert not marker.exists(), "the killed turn's command must not finish after the crash"


async def test_interrupt_during_a_batch_skips_unstarted_calls_and_the_next_prompt_works(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    calls = [terminal(f"sleep 30; echo {i}") for i in range(10)]
    fake_provider.script(Reply.calls(*calls))
    rpc = await connect()
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "start ten")
    aid = receipt["admission_id"]
    await rpc.wait_until(lambda: sum(
        1 for e in rpc.session_events(sid) if e["type"] == "tool.start") >= 8)
    assert (await rpc.call("turn.interrupt", {"session_id": sid}))["interrupted"] is True
    done = await wait_complete(rpc, aid)
    assert done["data"]["status"] == "interrupted", done

    rows = await transcript(rpc, sid)
    statuses = [m["status"] for m in rows if m["role"] == "tool"]
    assert statuses == ["interrupted"] * 8 + ["skipped"] * 2, statuses
    assert rows[-1]["role"] == "system_note"
    assert rows[-1]["note_kind"] == "interrupted"

    fake_provider.script(Reply(deltas=["Fine."]))
    nxt = await submit(rpc, sid, "carry on")
    again = await wait_complete(rpc, nxt["admission_id"])
    assert again["data"]["status"] == "completed"
    assert again["data"]["text"] == "Fine."
    assert len(tool_messages(fake_provider.snapshot()[-1].body)) == 10


def _install_trigger(backend: Backend, when: str) -> None:
    """Makes the store refuse certain rows, as a full disk would: a real failure of the store's
    own (SQLite's RAISE(ABORT), PostgreSQL's RAISE EXCEPTION from a trigger function)."""
    if backend.on_postgres:
        backend.query("CREATE FUNCTION refuse_row() RETURNS trigger LANGUAGE plpgsql AS "
                      "$$ BEGIN RAISE EXCEPTION 'disk full (test)'; END $$")
        backend.query(f"CREATE TRIGGER refuse BEFORE INSERT ON messages FOR EACH ROW "
                      f"WHEN ({when}) EXECUTE FUNCTION refuse_row()")
        return
    backend.query(f"CREATE TRIGGER refuse BEFORE INSERT ON messages WHEN {when} "
                  "BEGIN SELECT RAISE(ABORT, 'disk full (test)'); END")


async def _turn_with_refused_rows(
    backend: Backend, fake: FakeOpenAI, cwd: Path, command: str, refuse_when: str
) -> tuple[Json, list[Json]]:
    """One turn whose tool call is `command`, run while the store refuses rows matching
    `refuse_when`; returns its message.complete and the transcript after it."""
    fake.script(Reply.calls(terminal(command)))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(cwd))
        _install_trigger(backend, refuse_when)
        receipt = await submit(rpc, sid, "do it")
        done = await wait_complete(rpc, receipt["admission_id"])
        return done, await transcript(rpc, sid)
    finally:
        await rpc.close()


async def test_tool_call_row_that_cannot_be_stored_runs_nothing(
    backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    done, rows = await _turn_with_refused_rows(
        backend, fake_provider, tmp_path, f"touch {marker}", "NEW.tool_calls IS NOT NULL")
    assert done["data"]["status"] == "failed"
    assert "session_persistence_failed" in done["data"]["failure_reason"]
    await asyncio.sleep(0.5)
    assert not marker.exists(), "a call that is not stored must never run"
    assert len(fake_provider.snapshot()) == 1
    assert not any(m.get("tool_calls") or m["role"] == "tool" for m in rows)


async def test_tool_result_that_cannot_be_stored_never_reaches_the_model(
    backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    done, rows = await _turn_with_refused_rows(
        backend, fake_provider, tmp_path, f"touch {marker}; echo secret-result",
        "NEW.role = 'tool' AND NEW.content LIKE '%secret-result%'")
    assert done["data"]["status"] == "failed"
    assert "session_persistence_failed" in done["data"]["failure_reason"]
    assert marker.exists(), "the tool ran; only its result could not be stored"
    assert len(fake_provider.snapshot()) == 1, "the result must not be sent to the model"
    results = [m for m in rows if m["role"] == "tool"]
    assert [m["status"] for m in results] == ["unknown"], results
    assert not any("secret-result" in m["content"] for m in rows)


async def test_what_a_crashed_call_forked_is_killed_before_the_next_backend_is_ready(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    # Without the sandbox (whose pid namespace ends every descendant with the call, see
    # test_sandbox.py), the process table is what stops a crashed call's children.
    backend = backend_factory(fake_provider.base_url, "[approvals]\nmode = \"off\"",
                              extra_env={"TURNKEY_BWRAP": "none"})
    marker = tmp_path / "late"
    # The subshell is a child of the shell, so the shell's death alone would not stop it.
    mine = unique_sleep(61)
    fake_provider.script(Reply.calls(terminal(f"({mine}; touch {marker}) & {mine}")))
    rpc = await Rpc.open(backend.port, backend.token, name="before")
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "fork and wait")
    await rpc.wait_event(is_event("tool.start", receipt["admission_id"]))
    await wait_running(mine, 2)
    backend.kill9()
    await rpc.wait_closed()
    assert running(mine), "the forked subshell outlives the backend"
    backend.start()
    assert not await wait_gone(mine), "recovery kills the crashed call's group"
    assert not list((backend.data_dir / "run" / "tools").iterdir())


async def test_a_client_that_drops_during_a_tool_batch_replays_it_whole_after_reconnecting(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.script(
        Reply.calls(terminal("sleep 1; echo one"), terminal("echo two")),
        Reply(deltas=["Both ", "done."]),
    )
    rpc = await connect(name="first")
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "two commands")
    await rpc.wait_event(is_event("tool.start", receipt["admission_id"]))
    mark = max(e["seq"] for e in rpc.session_events(sid))
    rpc.abort()  # the window closes mid-batch; the turn goes on without it

    await fake_provider.async_wait_requests(2)
    later = await connect(name="second")
    resumed = await later.call("session.resume", {"session_id": sid, "since_seq": mark})
    assert resumed["truncated"] is False
    replayed = list(resumed["events"])
    if not any(e["type"] == "message.complete" for e in replayed):
        await later.wait_event(is_event("message.complete", receipt["admission_id"]))
        replayed += [e for e in later.session_events(sid) if e["seq"] > replayed[-1]["seq"]]
    seqs = [e["seq"] for e in replayed]
    assert seqs == list(range(mark + 1, mark + 1 + len(seqs))), "no gap, no duplicate"
    before = [e for e in rpc.session_events(sid) if e["seq"] <= mark]
    kinds = [e["type"] for e in before + replayed if e["type"] in ("tool.start", "tool.complete")]
    assert kinds == ["tool.start"] * 2 + ["tool.complete"] * 2, kinds
    complete = next(e for e in replayed if e["type"] == "message.complete")
    assert complete["data"]["text"] == "Both done."
    assert complete["data"]["status"] == "completed"
