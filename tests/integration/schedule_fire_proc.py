"""A second scheduler in its own process: runs the real firing transaction once.

    python schedule_fire_proc.py STORE SCHEDULE_ID NOW_ISO GO_FILE READY_FILE

STORE is a state.db path (SQLite) or a postgresql:// URL.  Opens the database, creates
READY_FILE, waits until GO_FILE exists (so two of these start their write together), runs
`fire_due` for the schedule at NOW_ISO, prints `fired ADMISSION_ID` or `none`.  Used by
test_schedules.py to prove that the database alone keeps one (schedule, fire time) from
firing twice.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from backend.authority.schedules import fire_due
from backend.store.db import Database, SqliteDatabase
from backend.store.pg import PgDatabase
from shared.config import STORE_SCHEMES


def open_store(store: str) -> Database:
    """The store as the backend opens it: PostgreSQL for a URL, else the SQLite file."""
    if store.startswith(STORE_SCHEMES):
        return PgDatabase(store)
    return SqliteDatabase(Path(store))


async def main(store: str, schedule_id: str, now_iso: str, go: str, ready: str) -> None:
    db = open_store(store)
    await db.open()
    try:
        await asyncio.to_thread(Path(ready).touch)
        while not await asyncio.to_thread(Path(go).exists):
            await asyncio.sleep(0.005)
        now = datetime.fromisoformat(now_iso)
        fired = await db.write(lambda tx: fire_due(tx, schedule_id, now, now, "fake-model"))
        print(f"fired {fired.receipt.admission_id}" if fired is not None else "none", flush=True)
    finally:
        await db.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
