"""`schedule.*` as the methods call them: each change one transaction of the store (the
session it names checked in it), then the scheduler woken, since its next firing may be
sooner."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from backend import wire
from backend.authority import schedule_edits
from backend.authority.sessions import folder, must_exist
from backend.errors import NotFound
from backend.store import schedules
from backend.store.db import Database, Tx
from shared import protocol as p
from shared.zones import local_zone_name

T = TypeVar("T")


class ScheduleBook:
    def __init__(self, db: Database, wake: Callable[[], None]) -> None:
        self.db = db
        self.wake = wake

    async def create(self, params: p.ScheduleCreateParams, principal: str) -> p.Schedule:
        cwd = folder(params.new_session.cwd) if params.new_session is not None else None
        values = schedule_edits.create_values(
            params, principal, local_zone_name(), datetime.now(UTC), cwd)

        def job(tx: Tx) -> p.Schedule:
            if params.session_id is not None:
                must_exist(tx, params.session_id)
            row = schedules.insert(tx, values)
            schedules.changed(tx, row)
            return wire.schedule(row)

        return await self._changing(job)

    async def listing(self) -> list[p.Schedule]:
        return [wire.schedule(r) for r in await self.db.read(schedules.all_)]

    async def update(self, params: p.ScheduleUpdateParams) -> p.Schedule:
        now = datetime.now(UTC)

        def job(tx: Tx) -> p.Schedule:
            row = schedules.get(tx, params.schedule_id)
            if row is None:
                raise NotFound("schedule", params.schedule_id)
            fields = schedule_edits.update_fields(row, params, now)
            return wire.schedule(schedules.update(tx, row.schedule_id, fields) if fields else row)

        return await self._changing(job)

    async def delete(self, schedule_id: str) -> bool:
        def job(tx: Tx) -> bool:
            if not schedules.delete(tx, schedule_id):
                raise NotFound("schedule", schedule_id)
            return True

        return await self._changing(job)

    async def _changing(self, job: Callable[[Tx], T]) -> T:
        result = await self.db.write(job)
        self.wake()
        return result
