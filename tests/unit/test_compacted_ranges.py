"""A compression takes its middle out of the model's view as one id range (migration 9), not
by rewriting every row: the model's view, its size count and people's `compacted` marks all
follow the ranges, on a real migrated SQLite file."""

from __future__ import annotations

import functools

from backend.store import compression, messages, sessions
from backend.store.db import Database, Tx


async def seed(db: Database, n: int) -> list[int]:
    """A session `s` of n rows alternating user/assistant, a note every 5th; returns their ids."""

    def job(tx: Tx) -> list[int]:
        sessions.insert(tx, "s", "t", "/", "m")
        ids = []
        for i in range(n):
            if i % 5 == 4:
                messages.insert(tx, "s", "system_note", f"note {i}", note_kind="interrupted")
            else:
                messages.insert(tx, "s", "user" if i % 2 == 0 else "assistant", f"m{i}")
            ids.append(int(tx.all("SELECT max(id) FROM messages")[0][0]))
        return ids

    return await db.write(job)


async def hide(db: Database, after: int, before: int) -> None:
    await db.write(functools.partial(compression.hide, session_id="s", after_id=after,
                                     before_id=before))


async def model_ids(db: Database) -> list[int]:
    return [r.id for r in await db.read(lambda tx: messages.for_model(tx, "s"))]


async def test_a_range_hides_exactly_the_rows_strictly_between_its_ids(db: Database) -> None:
    ids = await seed(db, 20)
    await db.write(lambda tx: compression.hide(tx, "s", ids[2], ids[15]))
    assert await model_ids(db) == [*ids[:3], *ids[15:]]
    n, chars = await db.read(lambda tx: messages.model_size(tx, "s"))
    shown = [r for r in await db.read(lambda tx: messages.for_model(tx, "s"))
             if r.role != "system_note"]
    assert (n, chars) == (len(shown), sum(len(r.content) for r in shown))


async def test_overlapping_and_separate_ranges_combine(db: Database) -> None:
    ids = await seed(db, 40)
    for after, before in ((2, 10), (2, 20), (5, 12), (25, 30)):  # as positions in ids
        await hide(db, ids[after], ids[before])
    assert await model_ids(db) == [*ids[:3], *ids[20:26], *ids[30:]]
    assert await db.read(lambda tx: messages.hidden_ranges(tx, "s")) == [
        (ids[2], ids[20]), (ids[25], ids[30])]
    # The same range twice is one range (a retried commit changes nothing).
    await db.write(lambda tx: compression.hide(tx, "s", ids[25], ids[30]))
    assert await model_ids(db) == [*ids[:3], *ids[20:26], *ids[30:]]


async def test_people_see_hidden_rows_marked_compacted_but_notes_as_they_were(db: Database) -> None:
    ids = await seed(db, 12)
    await db.write(lambda tx: compression.hide(tx, "s", ids[1], ids[10]))
    page, _ = await db.read(lambda tx: messages.page(tx, "s", None, 50))
    marks = {m.content: m.compacted for m in page}
    assert marks == {f"m{i}" if i % 5 != 4 else f"note {i}": (2 <= i <= 9 and i % 5 != 4)
                     for i in range(12)}


async def test_the_flag_and_the_ranges_together(db: Database) -> None:
    ids = await seed(db, 10)
    await db.write(lambda tx: compression.compact(tx, "s", [ids[0]]))  # as before migration 9
    await db.write(lambda tx: compression.hide(tx, "s", ids[5], ids[8]))
    assert await model_ids(db) == [*ids[1:6], *ids[8:]]


async def test_the_view_read_a_page_at_a_time_is_the_whole_view(db: Database) -> None:
    ids = await seed(db, 40)
    for after, before in ((2, 10), (25, 30)):
        await hide(db, ids[after], ids[before])
    whole = await db.read(lambda tx: messages.for_model(tx, "s"))
    for size in (1, 3, 7, 100):
        paged, after = [], 0
        while page := await db.read(functools.partial(
                messages.model_page, session_id="s", after_id=after, limit=size)):
            assert len(page) <= size
            paged += page
            after = page[-1].id
        assert paged == whole, size
