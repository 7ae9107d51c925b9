"""The store writer's thread takes the next batch itself when a COMMIT ends (Writer._drain):
a busy event loop is not on the path from one batch to the next, and what the loop gets
afterwards is still in commit order."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from backend.store.db import SqliteDatabase, Tx

WAIT_S = 10.0  # generous: the writer's thread normally gets there in a millisecond


async def test_the_next_batch_commits_while_the_loop_is_held(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "state.db")
    await db.open()
    published: list[Any] = []
    db.publisher = published.append
    running, release, next_batch_ran = threading.Event(), threading.Event(), threading.Event()
    try:
        def first(tx: Tx) -> str:
            running.set()
            release.wait(WAIT_S)  # on the writer's thread, holding its batch open
            tx.publish("first")
            return "first"

        def second(tx: Tx) -> str:
            tx.publish("second")
            return "second"

        one = db.enqueue(first)
        assert await asyncio.to_thread(running.wait, WAIT_S)
        two = db.enqueue(second)  # queued while the first batch is in flight: the next batch

        def after_second(_tx: Tx) -> None:
            next_batch_ran.set()

        three = db.enqueue(after_second)  # in the same batch as `second`, after it
        release.set()
        # The loop is held here, without awaiting: the writer's thread must go on by itself.
        assert next_batch_ran.wait(WAIT_S), "the next batch waited for the event loop"
        assert published == [], "publishing is the loop's, after the COMMIT"
        assert await one == "first"
        assert await two == "second"
        await three
    finally:
        await db.close()
    assert published == ["first", "second"], "published in commit order"
