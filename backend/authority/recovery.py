"""Start-up recovery: settle what an earlier process left behind, before the READY line.

Runs in one transaction after the epoch was bumped.  A `started` admission of
an older epoch may or may not have had effects, so it becomes `unknown` and
is never re-run; it holds its session's queue until someone resolves it.
Its tool calls that have no result get one with status `unknown` — never a
made-up success — so the next turn's model sees that the outcome is not
known.  Leases of dead holders are dropped and approvals nobody waits for
any more expire.  A turn whose lease a live process still holds (two
backends on one folder) is left alone: that process is still running it.

A running process gives its own turn the same state in place (`settle_lost`)
when the store failed while the turn ended and its end could not be saved.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from backend.store import admissions, leases, peers
from backend.store import approvals as approvals_store
from backend.store.admissions import AdmissionRecord
from backend.store.db import Tx
from backend.store.leases import Holder, provably_dead
from backend.store.peers import PeerRecord
from backend.tools.expiry import expire_one, expire_stale
from backend.turn.finalize import UNRECORDED_RESULT, mark_lost, settle_event
from backend.turn.lease import LEASE_EXPIRED_NOTE, take_turn

log = logging.getLogger("authority")

DELEGATE_PRINCIPAL = "delegate:"  # the principal prefix of sub-agents' tasks (authority/delegate.py)

RECOVERED_NOTE = (
    "The backend stopped while this turn was running, so its outcome is unknown. "
    "It will not be re-run; send a new message to continue."
)
UNKNOWN_RESULT = (
    "The backend stopped while this call was running, so its outcome is not known: it may "
    "have run completely, partly or not at all. Check the current state before relying on it "
    "or running it again."
)
UNSAVED_NOTE = (
    "This turn's end could not be saved (the database could not be written: a full disk?), "
    "so its outcome is unknown. It will not be re-run; send a new message to continue."
)


def recover(tx: Tx, epoch: int, live_epochs: frozenset[int] = frozenset()) -> list[str]:
    """Marks orphaned turns unknown; returns the sessions whose queues should drain.

    `live_epochs`: other backends on the same database that are alive (the PostgreSQL
    store's heartbeats, store/peers.py); their turns are theirs, even one that waits for
    a lease and so holds none yet."""
    live = _drop_dead_leases(tx, epoch, live_epochs)
    _settle_orphans(tx, admissions.orphan_started(tx, epoch), live, live_epochs)
    expired = expire_stale(tx, epoch, keep=set(live))
    if expired:
        log.warning("%d pending approvals of earlier turns expired", expired)
    _cancel_orphan_delegations(tx, live)
    return admissions.sessions_with_queued(tx)


def take_over(tx: Tx, epoch: int, live_epochs: frozenset[int], grace_s: float) -> list[str]:
    """What a running backend does, every heartbeat, for peers that died (PostgreSQL store):
    their leases are taken at once (their turns end `unknown`, as a restart would leave
    them: turn/lease.take_turn), their other started turns become `unknown` too, and their
    approvals expire.  Returns the sessions with work queued for longer than `grace_s`
    that no live lease covers: nobody drains them, so this backend will."""
    now = time.time()
    alive = live_epochs | {epoch}
    dead = [lease for lease in leases.all_rows(tx)
            if lease.holder.epoch not in alive and lease.expires_at > now]
    names = peers.by_epoch(tx, sorted({lease.holder.epoch for lease in dead}))
    for lease in dead:
        peer = names.get(lease.holder.epoch)
        log.warning("session %s: taking over from backend %s, which stopped beating its "
                    "heartbeat", lease.session_id,
                    f"{peer.host} pid {peer.pid}" if peer else f"epoch {lease.holder.epoch}")
        take_turn(tx, lease, peer_dead_note(peer))
    live = {lease.session_id: lease.holder.turn_id for lease in leases.all_rows(tx)
            if lease.expires_at > now}
    orphans = [row for row in admissions.started_of_others(tx, epoch)
               if row.owner_epoch not in alive]
    _settle_orphans(tx, orphans, live, alive)
    for row in approvals_store.pending_of_others(tx, epoch):
        if row.epoch not in alive and row.session_id not in live:
            expire_one(tx, row)
    _cancel_orphan_delegations(tx, live)
    return [sid for sid in admissions.sessions_queued_before(tx, _iso(now - grace_s))
            if sid not in live]


def peer_dead_note(peer: PeerRecord | None) -> str:
    """The closing note of a turn whose backend was declared dead."""
    who = f"the backend running it ({peer.host}, pid {peer.pid})" if peer else \
        "the backend running it"
    return (f"This turn was lost: {who} stopped answering, so another backend took over "
            "the session. Its outcome is unknown and it will not be re-run; send a new "
            "message to continue.")


def _settle_orphans(tx: Tx, rows: list[AdmissionRecord], live: dict[str, str],
                    live_epochs: frozenset[int]) -> None:
    closed: set[str] = set()
    for row in rows:
        sid, turn_id = row.session_id, row.turn_id
        if live.get(sid) == turn_id or row.owner_epoch in live_epochs:
            continue  # its own process still runs it (holding the lease, or waiting for it)
        if turn_id in closed:
            admissions.mark_unknown(tx, row.admission_id)  # a steer that joined that turn
            continue
        mark_lost(tx, row, RECOVERED_NOTE, UNKNOWN_RESULT)
        if turn_id:
            closed.add(turn_id)
        if row.principal == admissions.REVIEW:
            log.info("session %s: its review was dropped: the backend running it stopped", sid)
        else:
            log.warning("admission %s of session %s is unknown: the backend running it stopped",
                        row.admission_id, sid)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _cancel_orphan_delegations(tx: Tx, live: dict[str, str]) -> None:
    """A sub-agent's task still queued was waited for by a delegate call of the earlier
    process, which is `unknown` now: nobody waits for it, so it must not start by itself.
    A parent session whose turn is still live (another backend's) still waits for its own."""
    for admission_id, principal in admissions.queued_of_principals(tx, DELEGATE_PRINCIPAL):
        if principal.removeprefix(DELEGATE_PRINCIPAL) in live:
            continue
        admissions.settle(tx, admission_id, "cancelled", failure_reason=(
            "the backend stopped before this sub-agent's task started; its parent's call "
            "is unknown"))
        settle_event(tx, admission_id)


def settle_lost(tx: Tx, admission_id: str, turn_id: str, holder: Holder) -> bool:
    """In place, for this process's own turn whose end could not be saved: the state a
    restart would give it, and its lease released.  False (and nothing done) when the
    admission is no longer that turn's `started` one: it was settled meanwhile."""
    row = admissions.by_id(tx, admission_id)
    if row is None or row.status != "started" or row.turn_id != turn_id:
        return False
    lease = leases.current(tx, row.session_id)
    if lease is not None and lease.holder != holder:
        # Another holder writes this session's transcript now: taking the lease took the
        # turn, and settling it is the taker's (turn/lease.take_turn).  Nothing is ours.
        return True
    for joined in admissions.joined(tx, row.session_id, turn_id, admission_id):
        admissions.mark_unknown(tx, joined)  # steers that joined it share its outcome
    mark_lost(tx, row, UNSAVED_NOTE, UNRECORDED_RESULT)
    leases.release(tx, row.session_id, holder)
    return True


def _drop_dead_leases(tx: Tx, epoch: int, live_epochs: frozenset[int]) -> dict[str, str]:
    """Drops leases whose holder is dead or expired; returns {session: turn} of the leases
    a live process (or one whose liveness cannot be judged) still holds.  A lease of this
    epoch or a later one is a leftover (the epoch was just bumped), unless a live peer on a
    shared store started after this process bumped it and holds it."""
    live: dict[str, str] = {}
    now = time.time()
    for lease in leases.all_rows(tx):
        leftover = lease.holder.epoch >= epoch and lease.holder.epoch not in live_epochs
        if lease.holder.epoch in live_epochs and lease.expires_at <= now:
            take_turn(tx, lease, LEASE_EXPIRED_NOTE)  # a live peer's: it will write no end
        elif lease.expires_at <= now or provably_dead(lease.holder) or leftover:
            leases.release(tx, lease.session_id, lease.holder)
        else:
            live[lease.session_id] = lease.holder.turn_id
    return live
