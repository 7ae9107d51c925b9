"""Sub-agents' sessions in the store: the link to the parent's call, depth, listing, deletion."""

from __future__ import annotations

import pytest

from backend.authority.delegate import child_of
from backend.errors import NotFound, StoreUnavailable
from backend.store import sessions
from backend.store.db import Database, Tx
from backend.store.events import StoredEvent
from backend.tools.delegate import Delegation


def _child(tx: Tx, sid: str, parent: str, call: str) -> None:
    row = sessions.row(tx, parent)
    assert row is not None
    sessions.insert_delegated(tx, sid, row, call, f"Sub-agent {sid}")


async def test_a_child_takes_its_parents_folder_and_model_and_names_the_call(db: Database) -> None:
    def job(tx: Tx) -> None:
        sessions.insert(tx, "p", "Parent", "/work/here", "big-model")
        _child(tx, "c", "p", "call_1")

    await db.write(job)
    got = await db.read(lambda tx: sessions.get(tx, "c"))
    assert got is not None
    assert (got.cwd, got.model, got.delegated_from, got.delegated_call) == \
        ("/work/here", "big-model", "p", "call_1")
    assert got.parent_session_id is None, "rotation's link is another thing"
    assert await db.read(lambda tx: sessions.delegated_child(tx, "p", "call_1")) == "c"
    assert await db.read(lambda tx: sessions.delegated_child(tx, "p", "call_2")) is None


async def test_a_child_takes_its_parents_provider(db: Database) -> None:
    """A sub-agent asks the provider its parent session chose, not the default."""
    def job(tx: Tx) -> None:
        sessions.insert(tx, "p", "Parent", "/", "sonnet", provider="claude")
        _child(tx, "c", "p", "call_1")
        sessions.insert(tx, "q", "Parent", "/", "m")
        _child(tx, "d", "q", "call_1")

    await db.write(job)
    got = await db.read(lambda tx: [sessions.get(tx, s) for s in ("c", "d")])
    assert [(s.provider, s.model) for s in got if s is not None] == [("claude", "sonnet"), (None, "m")]


async def test_one_child_per_call(db: Database) -> None:
    def job(tx: Tx) -> None:
        sessions.insert(tx, "p", "Parent", "/", "m")
        _child(tx, "c1", "p", "call_1")

    await db.write(job)
    with pytest.raises(StoreUnavailable, match=r"UNIQUE constraint failed: sessions\.delegated_from"):
        await db.write(lambda tx: _child(tx, "c2", "p", "call_1"))


async def test_depth_counts_delegations_up_to_a_persons_session(db: Database) -> None:
    def job(tx: Tx) -> None:
        sessions.insert(tx, "p", "Parent", "/", "m")
        _child(tx, "c", "p", "call_1")
        _child(tx, "g", "c", "call_2")

    await db.write(job)
    depths = await db.read(lambda tx: [sessions.delegation_depth(tx, s) for s in ("p", "c", "g")])
    assert depths == [0, 1, 2]
    assert await db.read(lambda tx: sessions.delegation_depth(tx, "nope")) == 0


async def test_listing_hides_sub_agents_unless_asked_and_deleting_the_parent_keeps_them(
    db: Database,
) -> None:
    def job(tx: Tx) -> None:
        sessions.insert(tx, "p", "Parent about zebras", "/", "m")
        sessions.insert(tx, "q", "Other", "/", "m")
        _child(tx, "c", "p", "call_1")
        tx.execute("UPDATE sessions SET title = 'zebras too' WHERE session_id = 'c'")

    await db.write(job)

    async def ids(which: sessions.Which) -> set[str]:
        rows = await db.read(lambda tx: sessions.page(tx, 10, None, which))
        return {r.session_id for r in rows}

    assert await ids(sessions.PEOPLES) == {"p", "q"}
    assert await ids(sessions.Which(delegated=True)) == {"p", "q", "c"}
    assert await ids(sessions.Which(delegated_from="p")) == {"c"}
    found = await db.read(lambda tx: sessions.search(tx, "zebras", 10, 0))
    assert [h.session.session_id for h in found] == ["p"]
    found = await db.read(lambda tx: sessions.search(tx, "zebras", 10, 0, sessions.Which(delegated=True)))
    assert {h.session.session_id for h in found} == {"p", "c"}

    await db.write(lambda tx: sessions.delete(tx, "p"))
    orphan = await db.read(lambda tx: sessions.get(tx, "c"))
    assert orphan is not None, "its work stays"
    assert orphan.delegated_from is None
    assert orphan.delegated_call == "call_1"
    listed = await db.read(lambda tx: sessions.page(tx, 10, None))
    assert {r.session_id for r in listed} == {"q", "c"}, "an unlinked child shows in the list"


async def test_the_same_call_finds_its_child_instead_of_making_a_second(db: Database) -> None:
    published: list[object] = []
    db.publisher = published.append
    await db.write(lambda tx: sessions.insert(tx, "p", "Parent", "/srv", "m"))
    job = Delegation(parent_session_id="p", parent_turn_id="t1", call_id="call_1",
                     prompt="framed", title="Sub-agent: x")
    first = await db.write(lambda tx: child_of(tx, job))
    again = await db.write(lambda tx: child_of(tx, job))
    assert first == again
    created = [e for e in published if isinstance(e, StoredEvent) and e.event.type == "session.created"]
    assert [e.event.session_id for e in created] == [first], "announced once"
    other = await db.write(lambda tx: child_of(tx, Delegation("p", "t1", "call_2", "f", "t")))
    assert other != first
    with pytest.raises(NotFound):
        await db.write(lambda tx: child_of(tx, Delegation("gone", "t1", "call_1", "f", "t")))
