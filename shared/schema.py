"""Generates the machine-readable protocol description from the typed definitions.

`python -m shared.schema` rewrites shared/protocol.schema.json;
`python -m shared.schema --check` fails when the file and the code drift.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from shared.protocol import EVENTS, METHODS, PROTOCOL_VERSION, Event

SCHEMA_PATH = Path(__file__).with_name("protocol.schema.json")
REF = "#/components/schemas/{name}"


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.schema")
    parser.add_argument("--check", action="store_true", help="fail if the file is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = SCHEMA_PATH.read_text() if SCHEMA_PATH.exists() else ""
        if current != text:
            print(f"{SCHEMA_PATH} is out of date; run: python -m shared.schema", file=sys.stderr)
            return 1
        return 0
    SCHEMA_PATH.write_text(text)
    print(f"wrote {SCHEMA_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
