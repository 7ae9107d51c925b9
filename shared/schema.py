"""Generates what is derived from the typed definitions: the machine-readable protocol
description (shared/protocol.schema.json), and in shared/PROTOCOL.md the methods table
(between its `<!-- methods:begin -->` and `<!-- methods:end -->` lines, from METHODS) and
the events table (between `<!-- events:begin -->` and `<!-- events:end -->`, from EVENT_SPECS).

`python -m shared.schema` rewrites both; `python -m shared.schema --check` fails when
either has drifted from the code.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from shared.methods import METHODS
from shared.protocol import EVENT_SPECS, EVENTS, PROTOCOL_VERSION, Event

SCHEMA_PATH = Path(__file__).with_name("protocol.schema.json")
PROTOCOL_MD = Path(__file__).with_name("PROTOCOL.md")
REF = "#/components/schemas/{name}"
BEGIN, END = "<!-- methods:begin -->", "<!-- methods:end -->"
EVENTS_BEGIN, EVENTS_END = "<!-- events:begin -->", "<!-- events:end -->"


def build() -> dict[str, Any]:
    names = sorted(METHODS)
    types: list[Any] = [METHODS[m].params for m in names] + [METHODS[m].result for m in names]
    event_names = sorted(EVENTS)
    types += [EVENTS[e] for e in event_names] + [Event]
    found, components = msgspec.json.schema_components(types, ref_template=REF)
    schemas = list(found)
    n = len(names)
    methods = {
        name: {
            "scope": METHODS[name].scope,
            "params": schemas[i],
            "result": schemas[n + i],
            **({"owner_only": True} if METHODS[name].owner_only else {}),
        }
        for i, name in enumerate(names)
    }
    events = {name: schemas[2 * n + i] for i, name in enumerate(event_names)}
    return {
        "title": "Turnkey wire protocol",
        "protocol": PROTOCOL_VERSION,
        "envelope": schemas[-1],
        "methods": methods,
        "events": events,
        "components": {"schemas": dict(sorted(components.items()))},
    }


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


def methods_table() -> str:
    """The methods table of PROTOCOL.md, one row a method in METHODS' order."""
    rows = [
        "| method | scope | request (`shared/methods.py`) | result |",
        "| --- | --- | --- | --- |",
    ]
    for name, spec in METHODS.items():
        scope = f"`{spec.scope}`" if spec.scope else "any connection"
        if spec.owner_only:
            scope += ", owner's token only"
        notes = f" (secret: {', '.join(spec.secret)})" if spec.secret else ""
        result = getattr(spec.result, "__name__", str(spec.result))
        rows.append(f"| `{name}` | {scope} | `{spec.params.__name__}`{notes} | `{result}` |")
    return "\n".join(rows) + "\n"


def events_table() -> str:
    """The events table of PROTOCOL.md, one row an event in EVENT_SPECS' order."""
    rows = ["| type | data (`shared/protocol/`) | fields |", "| --- | --- | --- |"]
    rows += [f"| `{s.name}` | `{s.data.__name__}` | {s.doc} |" for s in EVENT_SPECS]
    return "\n".join(rows) + "\n"


def _between(doc: str, begin: str, end_mark: str, table: str) -> str:
    start, end = doc.find(begin), doc.find(end_mark)
    if start < 0 or end < start:
        raise ValueError(f"{PROTOCOL_MD.name} lacks the {begin} ... {end_mark} lines")
    return doc[: start + len(begin)] + "\n" + table + doc[end:]


def with_methods_table(doc: str) -> str:
    """`doc` with the text between the methods markers replaced by the generated table."""
    return _between(doc, BEGIN, END, methods_table())


def with_tables(doc: str) -> str:
    """`doc` with both generated tables (methods, events) put between their markers."""
    return _between(with_methods_table(doc), EVENTS_BEGIN, EVENTS_END, events_table())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.schema")
    parser.add_argument("--check", action="store_true", help="fail if a file is out of date")
    args = parser.parse_args(argv)
    wanted = {SCHEMA_PATH: render(), PROTOCOL_MD: with_tables(PROTOCOL_MD.read_text())}
    stale = [path for path, text in wanted.items()
             if (path.read_text() if path.exists() else "") != text]
    if args.check:
        for path in stale:
            print(f"{path} is out of date; run: python -m shared.schema", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(wanted[path])
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
