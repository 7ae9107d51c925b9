"""The store's typed records on a real migrated SQLite file, and the lease holder's one
text form (encode/decode) as both the turn lease and the compression lock store it."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from backend import wire
from backend.host import boot_token, process_start
from backend.ids import message_id
from backend.store import admissions, approvals, checkpoints, compression, leases, messages, sessions
from backend.store.admissions import AdmissionRecord
from backend.store.approvals import ApprovalRecord
from backend.store.checkpoints import CheckpointRecord
from backend.store.db import Database, Tx
from backend.store.leases import Holder, LeaseRecord, provably_dead
from backend.store.messages import ModelRow
from backend.store.sessions import SessionRecord
from shared.protocol import ApprovalStatus, Usage

OTHER_BOOT = "00000000-0000-0000-0000-000000000000/pid:[4026531836]"


# --- the holder ------------------------------------------------------------------------------


@pytest.mark.parametrize("holder", [
    Holder(1234, "98765", boot_token(), 3, "turn_0190abcdef012345abcdef"),
    Holder(7, "", "host-without-procfs/pidns", 0, "compress"),  # no start time known
    Holder(42, "1", OTHER_BOOT, 12, "turn_x"),  # a boot token holds ':' and '/'
])
def test_a_holder_decodes_to_itself(holder: Holder) -> None:
    text = holder.encode()
    assert Holder.decode(text) == holder
    assert Holder.decode(text).encode() == text


def test_the_stored_text_keeps_its_format() -> None:
    """Rows written by earlier versions hold this text; it must keep decoding."""
    text = "1234:98765@b00t-id/pid:[4026531836]#3/turn_abc"
    assert Holder.decode(text) == Holder(1234, "98765", "b00t-id/pid:[4026531836]", 3, "turn_abc")
    assert Holder(1234, "98765", "b00t-id/pid:[4026531836]", 3, "turn_abc").encode() == text


@pytest.mark.parametrize("text", ["", "garbage", "12:34@boot", "x:1@b#2/t", "1:2@b#e/t"])
def test_a_text_that_is_no_holder_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a lease holder"):
        Holder.decode(text)


def test_here_is_this_process() -> None:
    h = Holder.here(5, "turn_1")
    assert h == Holder(os.getpid(), process_start(os.getpid()), boot_token(), 5, "turn_1")
    assert not provably_dead(h)


def test_provably_dead() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()  # exited and reaped: its pid is free
    assert provably_dead(Holder(proc.pid, "12345", boot_token(), 1, "t"))
    assert not provably_dead(Holder(proc.pid, "12345", OTHER_BOOT, 1, "t")), "not judged elsewhere"
    assert provably_dead(Holder(os.getpid(), "1", boot_token(), 1, "t")), "a reused pid"
    assert not provably_dead(Holder(os.getpid(), "", boot_token(), 1, "t")), "start unknown"


async def test_a_lease_round_trips_through_the_table(db: Database) -> None:
    holder = Holder(4321, "555", OTHER_BOOT, 2, "turn_a")
    now = time.time()
    await db.write(lambda tx: sessions.insert(tx, "s", "t", "/", "m"))
    await db.write(lambda tx: leases.put(tx, "s", holder, now, 30.0))
    lease = await db.read(lambda tx: leases.current(tx, "s"))
    assert lease == LeaseRecord("s", holder, now, now + 30.0)
    raw = await db.read(lambda tx: tx.one(
        "SELECT holder, pid, boot_token, epoch, turn_id FROM turn_leases"))
    assert raw is not None
    assert tuple(raw) == (holder.encode(), 4321, OTHER_BOOT, 2, "turn_a")
    assert await db.read(leases.all_rows) == [lease]
    assert await db.write(lambda tx: leases.refresh(tx, "s", holder, now + 60.0))
    other = Holder(4321, "555", OTHER_BOOT, 2, "turn_b")
    assert not await db.write(lambda tx: leases.refresh(tx, "s", other, now + 90.0))
    await db.write(lambda tx: leases.release(tx, "s", other))
    assert (await db.read(lambda tx: leases.current(tx, "s"))) == LeaseRecord(
        "s", holder, now, now + 60.0), "another holder's release is a no-op"
    await db.write(lambda tx: leases.release(tx, "s", holder))
    assert await db.read(lambda tx: leases.current(tx, "s")) is None


async def test_a_compression_lock_round_trips_through_the_table(db: Database) -> None:
    holder = Holder.here(9, "compress")
    await db.write(lambda tx: sessions.insert(tx, "s", "t", "/", "m"))
    await db.write(lambda tx: compression.put_lock(tx, "s", holder, 60.0))
    lock = await db.read(lambda tx: compression.lock_row(tx, "s"))
    assert lock is not None
    assert (lock.session_id, lock.holder) == ("s", holder)
    assert lock.expires_at == pytest.approx(lock.acquired_at + 60.0)
    raw = await db.read(lambda tx: tx.one("SELECT pid, boot_token FROM compression_locks"))
    assert raw is not None
    assert tuple(raw) == (os.getpid(), boot_token())


# --- the other tables' records -----------------------------------------------------------------


async def test_a_session_record_has_every_column(db: Database) -> None:
    def seed(tx: Tx) -> None:
        sessions.insert(tx, "s", "Title", "/work", "m1")
        sessions.store_system_prompt(tx, "s", "be brief")
        sessions.add_usage(tx, "s", Usage(input_tokens=10, output_tokens=5, cached_tokens=2,
                                          cost_usd=0.25, estimated=True))
        messages.insert(tx, "s", "user", "hello there")
        compression.set_guards(tx, "s", compression.Guards(1, 2.5, 3, 4.5))

    await db.write(seed)
    r = await db.read(lambda tx: sessions.row(tx, "s"))
    assert isinstance(r, SessionRecord)
    assert (r.session_id, r.title, r.cwd, r.model, r.system_prompt) == (
        "s", "Title", "/work", "m1", "be brief")
    assert (r.parent_session_id, r.child_session_id) == (None, None)
    assert (r.input_tokens, r.output_tokens, r.cached_tokens, r.cost_usd) == (10, 5, 2, 0.25)
    assert r.usage_estimated is True
    assert r.message_count == 1
    assert (r.compress_failures, r.compress_cooldown_until, r.compress_ineffective,
            r.compress_probe_after) == (1, 2.5, 3, 4.5)
    assert r.created_at <= r.updated_at
    assert await db.read(lambda tx: sessions.page(tx, 10, None)) == [r]
    assert await db.read(lambda tx: sessions.search(tx, "hello", 10, 0)) == [sessions.SearchHit(r, 1)]
    summary = await db.read(lambda tx: sessions.summary(tx, r))
    assert (summary.session_id, summary.message_count, summary.cost_usd) == ("s", 1, 0.25)
    assert await db.read(lambda tx: sessions.get(tx, "s")) == summary
    assert wire.session(summary).usage.cost_usd == 0.25


async def test_a_message_record_has_every_column(db: Database) -> None:
    calls = [{"call_id": "c1", "name": "terminal", "arguments": {"command": "ls"}}]

    def seed(tx: Tx) -> None:
        sessions.insert(tx, "s", "t", "/", "m")
        messages.insert(tx, "s", "assistant", "looking", turn_id="turn_1", api_content="wire",
                        tool_calls=calls)
        messages.insert(tx, "s", "tool", "out", turn_id="turn_1", status="ok", call_id="c1",
                        tool_name="terminal", meta={"exit_code": 0})

    await db.write(seed)
    first, second = await db.read(lambda tx: messages.for_model(tx, "s"))
    assert isinstance(first, ModelRow)
    assert (first.role, first.content, first.api_content) == ("assistant", "looking", "wire")
    assert first.tool_calls is not None
    assert json.loads(first.tool_calls) == calls
    assert first.api_tool_calls is None
    assert (second.role, second.status, second.call_id, second.tool_name) == (
        "tool", "ok", "c1", "terminal")
    assert second.meta is not None
    assert json.loads(second.meta) == {"exit_code": 0}
    assert first.id < second.id
    await db.write(lambda tx: compression.compact(tx, "s", [first.id]))
    assert await db.read(lambda tx: messages.for_model(tx, "s")) == [second]
    page, more = await db.read(lambda tx: messages.page(tx, "s", None, 10))
    assert not more
    assert [m.compacted for m in page] == [True, False]
    assert (page[1].id, page[1].content) == (second.id, second.content)
    assert wire.message(page[1]).message_id == message_id(second.id)
    assert wire.message(page[0]).compacted is True, "as people see it"


async def test_an_admission_record_has_every_column(db: Database) -> None:
    def seed(tx: Tx) -> None:
        sessions.insert(tx, "s", "t", "/", "m")
        admissions.insert(tx, "adm_1", "p", "s", "r1", '{"text": "hi"}', "d1")
        admissions.insert(tx, "adm_2", "p", "s", "r2", '{"text": "more"}', "d2")
        admissions.mark_started(tx, "adm_1", 4, "turn_1")

    await db.write(seed)
    a = await db.read(lambda tx: admissions.by_id(tx, "adm_1"))
    assert isinstance(a, AdmissionRecord)
    assert (a.admission_id, a.principal, a.session_id, a.request_id, a.payload_json,
            a.payload_digest) == ("adm_1", "p", "s", "r1", '{"text": "hi"}', "d1")
    assert (a.status, a.owner_epoch, a.turn_id, a.outcome) == ("started", 4, "turn_1", None)
    assert a.started_at is not None
    assert (a.settled_at, a.final_text, a.failure_reason) == (None, None, None)
    assert await db.read(lambda tx: admissions.by_key(tx, "p", "s", "r1")) == a
    assert await db.read(lambda tx: admissions.blocking(tx, "s")) == a
    assert await db.read(lambda tx: admissions.orphan_started(tx, 5)) == [a]
    queued = await db.read(lambda tx: admissions.oldest_queued(tx, "s"))
    assert queued is not None
    assert (queued.admission_id, queued.status) == ("adm_2", "queued")
    assert queued.id > a.id
    assert await db.read(lambda tx: admissions.list_for(tx, "s", None)) == [a, queued]
    receipt = wire.receipt(await db.read(lambda tx: admissions.receipt(tx, queued)))
    assert (receipt.admission_id, receipt.position, receipt.text) == ("adm_2", 1, "more")


async def test_an_approval_record_has_every_column(db: Database) -> None:
    def seed(tx: Tx) -> None:
        sessions.insert(tx, "s", "t", "/", "m")
        approvals.insert(tx, approval_id="apr_1", session_id="s", turn_id="turn_1", call_id="c1",
                         tool="terminal", summary="ls", reason="runs a command",
                         rule_key="ls *", epoch=2, expires_at="later")

    await db.write(seed)
    r = await db.read(lambda tx: approvals.row(tx, "apr_1"))
    assert isinstance(r, ApprovalRecord)
    a = wire.approval(r)
    assert (a.approval_id, a.session_id, a.turn_id, a.call_id, a.tool, a.summary, a.reason,
            r.rule_key) == ("apr_1", "s", "turn_1", "c1", "terminal", "ls", "runs a command", "ls *")
    assert (a.status, a.decision, r.epoch, a.expires_at, r.decided_at) == (
        "pending", None, 2, "later", None)
    assert await db.read(lambda tx: approvals.stale_pending(tx, 3)) == [r]
    assert await db.write(lambda tx: approvals.decide(tx, "apr_1", "allowed", "session"))
    decided = await db.read(lambda tx: approvals.row(tx, "apr_1"))
    assert decided is not None
    assert (decided.status, decided.decision) == ("allowed", "session")
    assert decided.decided_at is not None
    assert wire.approval(decided).decided_at == decided.decided_at, "the wire shows when"
    assert wire.approval(decided).decided_by == "user", "and who"
    assert (wire.approval(r).decided_by, r.decided_at) == (None, None), "pending: neither"


@pytest.mark.parametrize(("status", "decided_at", "by"), [
    ("pending", None, None),
    ("allowed", "2026-11-30T14:02:00.000Z", "user"),
    ("denied", "2026-11-30T14:02:00.000Z", "user"),
    ("expired", "2026-11-30T14:05:00.120Z", "timeout"),  # at its time
    ("expired", "2026-11-30T14:04:59.800Z", "timeout"),  # a moment early: the clocks' gap
    ("expired", "2026-11-30T14:02:30.000Z", "stopped"),  # cut short: its turn stopped
    ("expired", "2026-11-30T16:00:00.000Z", "timeout"),  # a restart long after it ran out
    ("expired", None, "timeout"),
])
def test_who_closed_an_approval_is_read_from_its_row(
    status: ApprovalStatus, decided_at: str | None, by: str | None
) -> None:
    expires = "2026-11-30T14:05:00.000100+00:00"  # as ask() writes it
    assert approvals.decided_by(status, decided_at, expires) == by


async def test_a_checkpoint_record_has_every_column(db: Database) -> None:
    def seed(tx: Tx) -> None:
        sessions.insert(tx, "s", "t", "/", "m")
        checkpoints.insert(tx, "s", "turn_1", "c1", "/a", existed=True, content_hash="h1",
                           blob_path="/blobs/h1")
        checkpoints.insert(tx, "s", "turn_1", "c2", "/a", existed=True, content_hash="h2",
                           blob_path="/blobs/h2")
        checkpoints.insert(tx, "s", "turn_1", "c2", "/b", existed=False, content_hash=None,
                           blob_path=None)

    await db.write(seed)
    first, created = await db.read(lambda tx: checkpoints.earliest_per_path(tx, "s", "turn_1"))
    assert isinstance(first, CheckpointRecord)
    assert (first.session_id, first.turn_id, first.call_id, first.path, first.existed,
            first.content_hash, first.blob_path, first.restored_at) == (
        "s", "turn_1", "c1", "/a", True, "h1", "/blobs/h1", None)
    assert (created.path, created.existed, created.content_hash, created.blob_path) == (
        "/b", False, None, None)


# --- statements the store took over from its callers ----------------------------------------


async def test_queue_probes(db: Database) -> None:
    def seed(tx: Tx) -> None:
        sessions.insert(tx, "s", "t", "/", "m")
        sessions.insert(tx, "other", "t", "/", "m")
        for n in (1, 2, 3):
            admissions.insert(tx, f"adm_{n}", "p", "s", f"r{n}", '{"text": "hi"}', "d")
            admissions.mark_started(tx, f"adm_{n}", 1, f"turn_{n}")
        admissions.mark_unknown(tx, "adm_1")
        admissions.mark_unknown(tx, "adm_3")

    assert not await db.read(admissions.any_queued)
    await db.write(seed)
    assert await db.read(lambda tx: admissions.unknown_ids(tx, "s")) == ["adm_1", "adm_3"]
    assert await db.read(lambda tx: admissions.unknown_ids(tx, "other")) == []
    assert not await db.read(admissions.any_queued)
    await db.write(lambda tx: admissions.insert(tx, "adm_4", "p", "other", "r", "{}", "d"))
    assert await db.read(admissions.any_queued)


async def test_rotation_links_and_prompt_reset(db: Database) -> None:
    def seed(tx: Tx) -> None:
        sessions.insert(tx, "parent", "t", "/", "m")
        sessions.insert(tx, "child", "t", "/", "m")
        sessions.store_system_prompt(tx, "parent", "frozen")
        sessions.link_rotation(tx, "parent", "child")
        sessions.clear_system_prompt(tx, "parent")

    await db.write(seed)
    parent = await db.read(lambda tx: sessions.row(tx, "parent"))
    child = await db.read(lambda tx: sessions.row(tx, "child"))
    assert parent is not None
    assert child is not None
    assert (parent.child_session_id, parent.parent_session_id, parent.system_prompt) == (
        "child", None, None)
    assert (child.parent_session_id, child.child_session_id) == ("parent", None)
    assert await db.read(lambda tx: compression.leaf(tx, "parent")) == "child"


async def test_many_rows_become_records_in_order_from_a_list_or_a_cursor(db: Database) -> None:
    def seed(tx: Tx) -> None:
        sessions.insert(tx, "s", "t", "/", "m")
        for i in range(5):
            messages.insert(tx, "s", "user", f"m{i}")

    await db.write(seed)
    sql = "SELECT * FROM messages ORDER BY id"
    one_by_one = await db.read(lambda tx: [messages.MessageRecord.from_row(r) for r in tx.all(sql)])
    assert [r.content for r in one_by_one] == [f"m{i}" for i in range(5)]
    # MessageRecord has a bool field (compacted); ModelRow has none: both ways of building.
    assert await db.read(lambda tx: messages.MessageRecord.from_rows(tx.all(sql))) == one_by_one
    assert await db.read(lambda tx: messages.MessageRecord.from_rows(tx.execute(sql))) == one_by_one
    cols = "SELECT id, role, content, api_content, note_kind, tool_calls, api_tool_calls, " \
           "call_id, tool_name, status, meta FROM messages ORDER BY id"
    models = await db.read(lambda tx: [ModelRow.from_row(r) for r in tx.all(cols)])
    assert await db.read(lambda tx: ModelRow.from_rows(tx.execute(cols))) == models
    assert await db.read(lambda tx: ModelRow.from_rows(tx.all(cols))) == models
    assert await db.read(lambda tx: ModelRow.from_rows(tx.all(cols + " LIMIT 0"))) == []
