"""Rows as typed records: each table's record is a frozen dataclass deriving from `Record`,
whose fields are the table's columns (by name); `Record.from_row` builds one from a row.

SQLite has no boolean: a field annotated `bool` is read from its 0/1 column as a bool.
A column held in another form (the lease holder's text) is decoded by the record's own
`from_row`, which passes the decoded value to `record`.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import typing
from typing import Any, Self, TypeVar

R = TypeVar("R")


_COLUMNS: dict[type[Any], tuple[tuple[str, bool], ...]] = {}


def _columns(cls: type[Any]) -> tuple[tuple[str, bool], ...]:
    """The record's fields, each with whether it is a bool (read once per class)."""
    found = _COLUMNS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = _COLUMNS[cls] = tuple((f.name, hints[f.name] is bool)
                                      for f in dataclasses.fields(cls))
    return found


def record(cls: type[R], row: sqlite3.Row, **decoded: Any) -> R:
    """`cls` from `row`: each field the column of its name, unless given in `decoded`."""
    values = {
        name: (bool(row[name]) if is_bool else row[name])
        for name, is_bool in _columns(cls) if name not in decoded
    }
    return cls(**values, **decoded)


class Record:
    """Base of the store's records (frozen, slotted dataclasses)."""

    __slots__ = ()

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Self:
        return record(cls, row)
