"""Pruning: the cheap first step of compression, shrinking old tool traffic without a model call.

Outside the protected tail, a tool result longer than OUTPUT_LIMIT becomes a
short placeholder, and every string inside a call's JSON arguments longer
than ARG_LIMIT is cut (the file a `write_file` wrote is in the file, not
needed again in the context).  Arguments stay valid JSON whenever they were
valid JSON.  Pruning is idempotent: a cut value or a placeholder is never cut
again, so pruning an already-pruned transcript returns it unchanged, byte for
byte.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from msgspec.structs import replace as struct_replace

from backend.compress.model import Call, Entry
from backend.compress.plan import Plan

PRUNED_OUTPUT = "[Old tool output cleared to save context space]"
ARG_LIMIT = 200
OUTPUT_LIMIT = 200
TRUNCATED = "...[truncated]"


def prune(entries: Sequence[Entry], keep_from: int) -> list[Entry]:
    """The entries with those before index `keep_from` pruned; entries from `keep_from` on are untouched.

    Returns a new list; a changed entry is a new Entry with the same id (and
    meta), an unchanged one is the same object.
    """
    out = list(entries)
    for i in range(min(max(keep_from, 0), len(out))):
        entry = out[i]
        if entry.role == "tool" and len(entry.content) > OUTPUT_LIMIT:
            out[i] = struct_replace(entry, content=PRUNED_OUTPUT)
        elif entry.role == "assistant" and entry.calls:
            calls = tuple(_prune_call(c) for c in entry.calls)
            if calls != entry.calls:
                out[i] = struct_replace(entry, calls=calls)
    return out


def prune_plan(p: Plan) -> Plan:
    """The same boundaries with the head and the middle pruned; the tail is never pruned."""
    before = [*p.head, *p.middle]
    pruned = prune(before, len(before))
    n = len(p.head)
    return replace(p, head=tuple(pruned[:n]), middle=tuple(pruned[n:]))


def prune_arguments(raw: str) -> str:
    """Call arguments with every string value over ARG_LIMIT cut to ARG_LIMIT + TRUNCATED.

    Valid JSON (of any shape) is walked and, only if something was cut,
    re-serialized: it stays valid JSON.  Text that is not valid JSON (a model
    may send that) is cut as a whole the same way; the marker ends in `]`
    after a bare word, so a cut text never parses as JSON and a second pass
    cuts it at the same place again, to the same result.  Keys are not cut.
    Valid JSON that Python cannot write back as it was (a number beyond the
    float range, nesting deeper than the recursion limit) is kept whole.
    """
    if len(raw) <= ARG_LIMIT:  # no string inside can be longer than the whole text
        return raw
    try:
        value = json.loads(raw, parse_constant=_reject_constant, parse_float=_finite_float)
        cut, changed = _cut_strings(value)
        return json.dumps(cut, ensure_ascii=False) if changed else raw
    except (_Unrepresentable, RecursionError):  # JSON we could not write back faithfully: kept whole
        return raw
    except ValueError:
        return _cut(raw)


def _prune_call(call: Call) -> Call:
    arguments = prune_arguments(call.arguments)
    return call if arguments == call.arguments else struct_replace(call, arguments=arguments)


def _cut(text: str) -> str:
    return text[:ARG_LIMIT] + TRUNCATED if len(text) > ARG_LIMIT else text


def _cut_strings(value: Any) -> tuple[Any, bool]:
    """The value with long strings cut, and whether anything changed."""
    if isinstance(value, str):
        cut = _cut(value)
        return cut, cut != value
    if isinstance(value, list):
        items = [_cut_strings(v) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    if isinstance(value, dict):
        pairs = {k: _cut_strings(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(c for _, c in pairs.values())
    return value, False


class _Unrepresentable(Exception):
    pass


def _reject_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")  # NaN and Infinity: Python accepts them, JSON does not


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 is valid JSON, but would be written back as Infinity
        raise _Unrepresentable(text)
    return value
