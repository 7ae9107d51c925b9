"""Rows as typed records: each table's record derives from `Record`, a frozen msgspec
struct whose fields are the table's columns by name, and `Record.from_row` builds one.

A turn builds a record for every row of the transcript it sends, so this is on the hot
path: a msgspec struct is built about ten times faster than a frozen dataclass, and the
field-to-column plan (`_Plan`) is made once per record class and column list, so a row is
read by index.  SQLite has no boolean: a field annotated `bool` is read from its 0/1
column as a bool.  A column held in another form (the lease holder's text) is decoded by
the record's own `from_row`, which passes the decoded value to `record`.
"""

from __future__ import annotations

import operator
import typing
from collections.abc import Callable, Iterable
from typing import Any, Self, TypeVar

import msgspec

from backend.store.db import Row


class Record(msgspec.Struct, frozen=True, gc=False):
    """Base of the store's records.  Rows of plain values, never in a cycle, so the cyclic
    collector does not track them (a long session reads 100,000 at once)."""

    @classmethod
    def from_row(cls, row: Row) -> Self:
        return record(cls, row)

    @classmethod
    def from_rows(cls, rows: Iterable[Row]) -> list[Self]:
        """`from_row` for many rows of one query (a list or a cursor, read as it goes): the
        columns are matched to fields once."""
        it = iter(rows)
        first = next(it, None)
        if first is None:
            return []
        plan = _plan_for(cls, first)
        if plan.bools:
            return [record(cls, first), *(record(cls, r) for r in it)]
        take = plan.take
        return [cls(*take(first)), *(cls(*take(r)) for r in it)]


R = TypeVar("R", bound=Record)


class _Plan(msgspec.Struct, frozen=True):
    take: Callable[[Row], tuple[Any, ...]]  # the fields' columns, in field order
    bools: tuple[int, ...]  # which fields are bools


_PLANS: dict[tuple[type[Record], tuple[str, ...]], _Plan] = {}


def _plan(cls: type[Record], keys: tuple[str, ...]) -> _Plan:
    hints = typing.get_type_hints(cls)
    names = cls.__struct_fields__
    take = operator.itemgetter(*(keys.index(name) for name in names))
    return _Plan(take, tuple(i for i, name in enumerate(names) if hints[name] is bool))


def _plan_for(cls: type[Record], row: Row) -> _Plan:
    keys = tuple(row.keys())
    plan = _PLANS.get((cls, keys))
    if plan is None:
        plan = _PLANS[(cls, keys)] = _plan(cls, keys)
    return plan


def record(cls: type[R], row: Row, **decoded: Any) -> R:
    """`cls` from `row`: each field the column of its name, unless given in `decoded`."""
    if decoded:  # a lease or a lock: a row at a time
        return cls(**{n: decoded[n] if n in decoded else row[n] for n in cls.__struct_fields__})
    plan = _plan_for(cls, row)
    values = list(plan.take(row))
    for i in plan.bools:
        values[i] = bool(values[i])
    return cls(*values)
