"""The import rule of docs/ARCHITECTURE.md ("Module map and the import rule"), checked.

Every module of backend/, shared/ and desktop/ belongs to one layer.  A module may import
modules of its own layer or of a lower one, never of a higher one; `desktop` may import
only `shared` (and third-party code).  Imports inside functions count too: a deferred
import is still a dependency.  The test reads the source with `ast`; nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("backend", "shared", "desktop")

# Top to bottom.  A module's layer is the first entry that is its name or a prefix of it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("app", ("backend.app", "backend.build", "backend.__main__", "backend.store_migrate")),
    ("server", ("backend.server",)),
    ("doors", ("backend.doors",)),  # messaging platforms: in as admissions, out from events
    ("authority", ("backend.authority",)),
    ("turn", ("backend.turn",)),
    ("compress", ("backend.compress",)),
    ("mcp", ("backend.mcp",)),
    ("tools", ("backend.tools",)),
    ("providers", ("backend.providers",)),
    # The store's records as wire structs, and its reports as broadcasts: the one edge,
    # just above the store, so every caller (the tools' approvals too) reaches it.
    ("wire", ("backend.wire",)),
    ("store", ("backend.store",)),
    # `backend` itself (backend/__init__.py) holds only __version__.
    ("base", ("backend", "backend.bulk", "backend.config", "backend.errors", "backend.host", "backend.ids",
              "backend.race", "backend.secrets")),
    ("shared", ("shared",)),
)
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}

# Imports that break the rule today, each named, with why it is allowed for now.
# (importer module, imported module).
# None today; an entry here must say why and when it goes (test_allow_list_is_not_stale).
ALLOWED: dict[tuple[str, str], str] = {}

# The one way desktop reaches into the backend: `turnkey backend serve` runs the backend in
# the same executable, which in the bundled app is the only Python there is.
DESKTOP_MAY_IMPORT = ("backend.__main__",)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer_of(name: str) -> str | None:
    """The layer of a module of ours, or None for third-party and standard-library code."""
    if within(name, "desktop"):
        return "desktop"
    for layer, prefixes in LAYERS:
        # The bare `backend` package is base; its submodules are placed by their own names.
        if any(name == p if p == "backend" else within(name, p) for p in prefixes):
            return layer
    if within(name, "backend"):
        raise AssertionError(f"{name} is in no layer: add it to LAYERS in {__file__}")
    return None


def imports(path: Path) -> list[tuple[str, int]]:
    """Every module `path` imports, anywhere in the file, with its line number.
    `from X import Y` counts as X.Y when that names one of our modules, else X."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package.pop()
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.append((sub if _is_module(sub) else target, node.lineno))
    return found


def _is_module(name: str) -> bool:
    rel = ROOT.joinpath(*name.split("."))
    return rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file()


def sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def violations() -> list[str]:
    found = []
    for path in sources():
        importer = module_name(path)
        mine = layer_of(importer)
        assert mine is not None
        for target, line in imports(path):
            theirs = layer_of(target)
            if theirs is None or (importer, target) in ALLOWED:
                continue
            where = f"{path.relative_to(ROOT)}:{line}: {importer} ({mine}) imports {target} ({theirs})"
            if mine == "desktop":
                if theirs not in ("desktop", "shared") and target not in DESKTOP_MAY_IMPORT:
                    found.append(where)
            elif theirs == "desktop" or RANK[theirs] < RANK[mine]:
                found.append(where)
    return found


def test_every_import_goes_down_or_sideways() -> None:
    bad = violations()
    assert not bad, (
        "imports against the layer rule of docs/ARCHITECTURE.md (a module may import its own "
        "layer or a lower one; desktop only shared):\n  " + "\n  ".join(bad)
    )


# The wire: its types, the method table, the typed client, the schema made of them.
WIRE = ("shared.protocol", "shared.methods", "shared.client", "shared.schema")


def test_the_store_never_imports_the_wire_protocol() -> None:
    """The store returns its own records and reports what changed; the wire's structs are
    made of them at one edge, backend/wire.py.  `shared` is below the store, so the layer
    rule alone would let it import `shared.protocol`: this forbids it (and the other wire
    modules of WIRE).  The closed sets of words both sides use are in shared/literals.py."""
    bad = sorted({
        f"{path.relative_to(ROOT)}:{line}: imports {target}"
        for path in (ROOT / "backend" / "store").rglob("*.py")
        for target, line in imports(path)
        if any(within(target, w) for w in WIRE)
    })
    assert not bad, "backend/store/ speaks in its records, never the wire's:\n  " + "\n  ".join(bad)


def test_shared_imports_neither_backend_nor_desktop() -> None:
    bad = [
        f"{path.relative_to(ROOT)}:{line}: imports {target}"
        for path in sorted((ROOT / "shared").rglob("*.py"))
        for target, line in imports(path)
        if within(target, "backend") or within(target, "desktop")
    ]
    assert not bad, "shared/ is the contract both sides import; it imports neither:\n  " + "\n  ".join(bad)


# What a view-model of desktop/state/ never imports: Qt and what is built on it.
QT = ("PySide6", "shiboken6", "qasync", "desktop.qt", "desktop.link", "desktop.app")


def test_desktop_state_is_qt_free() -> None:
    """desktop/state/ holds what the widgets show and decide, without Qt (docs/CONTRIBUTING.md,
    "Adding a desktop panel"): its tests need no display, and a widget stays a layout."""
    bad = [
        f"{path.relative_to(ROOT)}:{line}: imports {target}"
        for path in sorted((ROOT / "desktop" / "state").rglob("*.py"))
        for target, line in imports(path)
        if any(within(target, qt) for qt in QT)
    ]
    assert not bad, "desktop/state/ imports no Qt (nor desktop.qt, nor the link):\n  " + "\n  ".join(bad)


def test_allow_list_is_not_stale() -> None:
    """An allowed violation that is gone must leave the list, so it cannot come back unseen."""
    present = {(module_name(p), t) for p in sources() for t, _ in imports(p)}
    stale = sorted(f"{a} -> {b}" for a, b in ALLOWED if (a, b) not in present)
    assert not stale, "remove these from ALLOWED in tests/unit/test_layers.py:\n  " + "\n  ".join(stale)


@pytest.mark.parametrize(("name", "layer"), [
    ("backend.app", "app"), ("backend.__main__", "app"), ("backend", "base"),
    ("backend.server.methods", "server"), ("backend.store", "store"), ("backend.wire", "wire"),
    ("backend.config", "base"), ("shared.protocol", "shared"), ("desktop.qt.tray", "desktop"),
    ("msgspec", None), ("sqlite3", None),
])
def test_layer_of(name: str, layer: str | None) -> None:
    assert layer_of(name) == layer


def test_front_ends_call_the_backend_through_typed_requests() -> None:
    """desktop/ (the app and the CLI) sends `call(SomeRequest(...))`, never a method name and a
    dict: a typo or a renamed field then fails mypy, not a person's click."""
    bad = []
    for path in sorted((ROOT / "desktop").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "call" and node.args \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: call({node.args[0].value!r}, ...)")
    assert not bad, "untyped calls; use the request types of shared/methods.py:\n  " + "\n  ".join(bad)


def test_the_postgresql_store_shares_the_writer_not_the_sqlite_store() -> None:
    """Both stores implement the one protocol (store/writer.py's AbstractStore) and share its
    `Writer`; PostgreSQL's is not a SQLite store with parts overridden, so store/pg.py imports
    nothing of store/db.py (the SQLite file's module) and PgDatabase derives from `Writer`."""
    path = ROOT / "backend" / "store" / "pg.py"
    bad = [f"line {line}: imports {target}" for target, line in imports(path)
           if within(target, "backend.store.db")]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bases = [ast.unparse(base) for node in ast.walk(tree)
             if isinstance(node, ast.ClassDef) and node.name == "PgDatabase" for base in node.bases]
    assert bases == ["Writer"], f"PgDatabase derives from {bases}, not store/writer.py's Writer"
    assert not bad, "store/pg.py reaches into the SQLite store:\n  " + "\n  ".join(bad)


def test_postgresql_tables_are_generated_from_the_declaration() -> None:
    """store/schema.py declares every table once; store/pg_schema.py generates their DDL from
    it and writes only what PostgreSQL alone has.  The one table it may create by hand is its
    own bookkeeping, schema_migrations."""
    path = ROOT / "backend" / "store" / "pg_schema.py"
    found = [f"line {node.lineno}: {' '.join(node.value.split())[:60]}"
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and "CREATE TABLE" in node.value.upper()
             and "SCHEMA_MIGRATIONS" not in node.value.upper()]
    assert not found, ("CREATE TABLE written by hand in store/pg_schema.py; declare the table "
                       "in store/schema.py instead:\n  " + "\n  ".join(found))


# --- the transport is thin: server/methods.py decodes and calls services ----------------

METHODS_PY = ROOT / "backend" / "server" / "methods.py"
MAX_COLLABORATORS = 5  # Methods.__init__'s parameters besides self
MAX_HANDLER_STATEMENTS = 8  # a handler decodes, subscribes and calls: a few statements


def _methods_class() -> ast.ClassDef:
    tree = ast.parse(METHODS_PY.read_text(encoding="utf-8"))
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Methods")


def test_methods_reach_the_store_only_through_services() -> None:
    """server/methods.py imports no `backend.store` module (nor `Tx`) and runs no
    transaction: each method's rules and SQL belong to the service that owns them."""
    tree = ast.parse(METHODS_PY.read_text(encoding="utf-8"))
    bad = [f"line {line}: imports {target}" for target, line in imports(METHODS_PY)
           if within(target, "backend.store")]
    bad += [f"line {node.lineno}: .{node.func.attr}(...)" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("read", "write")]
    assert not bad, "backend/server/methods.py does store work; move it to a service:\n  " \
        + "\n  ".join(bad)


def test_methods_take_a_handful_of_collaborators() -> None:
    """The services come grouped (`Services`, server/services.py), not one parameter each."""
    init = next(n for n in _methods_class().body
                if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    params = [a.arg for a in init.args.args + init.args.kwonlyargs if a.arg != "self"]
    assert len(params) <= MAX_COLLABORATORS, f"Methods.__init__ takes {params}"


def test_handlers_are_short() -> None:
    """A handler that grows past a few statements holds logic its service should own."""
    long = [f"{n.name}: {len(n.body)} statements" for n in _methods_class().body
            if isinstance(n, ast.AsyncFunctionDef) and len(n.body) > MAX_HANDLER_STATEMENTS]
    assert not long, "handlers with logic of their own:\n  " + "\n  ".join(long)


def test_doors_write_no_sql() -> None:
    """A door's statements are the store's (`store/doors.py` for its tables, the others for
    theirs): nothing in backend/doors/ runs SQL on a transaction itself."""
    bad = [f"{path.relative_to(ROOT)}:{node.lineno}: tx.{node.func.attr}(...)"
           for path in sorted((ROOT / "backend" / "doors").rglob("*.py"))
           for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
           if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
           and node.func.attr in ("execute", "executemany", "one", "all")
           and isinstance(node.func.value, ast.Name) and node.func.value.id == "tx"]
    assert not bad, "SQL in backend/doors/; put it in backend/store/:\n  " + "\n  ".join(bad)


# --- events: named by their struct, emitted at one edge ---------------------------------------

# The one module that calls the store's event log to add an event (backend/wire.py: `emit`,
# `broadcast`, `announcement`); the store itself (backend/store/) builds its own records.
EVENT_EDGE = ("backend.wire", "backend.store")
EVENT_LOG = "backend.store.events"
# What only the edge calls: the log's writers and the records a published event is made of.
EMITTERS = ("append", "broadcast", "EventRecord", "StoredEvent")


def event_log_calls(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """Calls in `source` of the event log's writers (`events.append(...)`, `EventRecord(...)`,
    whatever name the module or the function was imported as)."""
    tree = ast.parse(source, filename=filename)
    modules: set[str] = set()  # names bound to backend.store.events
    functions: dict[str, str] = {}  # names bound to one of EMITTERS
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names if a.name == EVENT_LOG and a.asname)
        elif isinstance(node, ast.ImportFrom) and node.module == "backend.store":
            modules.update(a.asname or a.name for a in node.names if a.name == "events")
        elif isinstance(node, ast.ImportFrom) and node.module == EVENT_LOG:
            functions.update({a.asname or a.name: a.name for a in node.names if a.name in EMITTERS})
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in EMITTERS and isinstance(f.value, ast.Name) \
                and f.value.id in modules:
            found.append((node.lineno, f"{f.value.id}.{f.attr}(...)"))
        elif isinstance(f, ast.Name) and f.id in functions:
            found.append((node.lineno, f"{f.id}(...)"))
    return found


def test_events_are_emitted_only_at_the_wire_edge() -> None:
    """Every event goes through backend/wire.py (`wire.emit(tx, sid, TurnStarted(...))`),
    which names it from its struct's row in the events table: nothing else calls the store's
    `events.append` / `events.broadcast` or builds an event record, so no event is sent by
    a name string or with a dict."""
    bad = [
        f"{path.relative_to(ROOT)}:{line}: {call}"
        for path in sorted((ROOT / "backend").rglob("*.py"))
        if not any(within(module_name(path), edge) for edge in EVENT_EDGE)
        for line, call in event_log_calls(path.read_text(encoding="utf-8"), str(path))
    ]
    assert not bad, "emit events with backend.wire.emit / broadcast / announcement:\n  " + "\n  ".join(bad)


def event_names() -> set[str]:
    """The event names of the events table, read from the `EventSpec(...)` rows' sources."""
    names = set()
    for path in (ROOT / "shared" / "protocol").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "EventSpec" and node.args \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                names.add(node.args[0].value)
    return names


def test_no_event_name_is_passed_as_a_string() -> None:
    """Outside the store (which keeps its rows by name), no call in backend/ passes an event's
    name as a literal: an event is its struct, named once in the table."""
    names = event_names()
    assert {"message.delta", "door.state"} <= names, "the EventSpec rows moved?"
    bad = []
    for path in sorted((ROOT / "backend").rglob("*.py")):
        if within(module_name(path), "backend.store"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                args = [*node.args, *(k.value for k in node.keywords)]
                bad += [f"{path.relative_to(ROOT)}:{node.lineno}: {a.value!r}" for a in args
                        if isinstance(a, ast.Constant) and a.value in names]
    assert not bad, "an event named by a string; emit its struct:\n  " + "\n  ".join(bad)


# The wire contract is split by domain (shared/protocol/: sessions, turns, approvals, ...);
# no part grows back into the 1,000-line module it was.  The package's __init__.py is not a
# part: it is the re-export list, a line per name, and grows with the names, not with code.
PROTOCOL_PART_MAX = 400


def test_the_protocol_is_split_into_small_parts() -> None:
    assert not (ROOT / "shared" / "protocol.py").exists(), "shared.protocol is a package"
    big = [f"{path.relative_to(ROOT)}: {n} lines"
           for path in sorted((ROOT / "shared" / "protocol").glob("*.py"))
           if path.name != "__init__.py"
           and (n := len(path.read_text(encoding="utf-8").splitlines())) > PROTOCOL_PART_MAX]
    assert not big, f"parts of shared/protocol/ over {PROTOCOL_PART_MAX} lines; split by domain:\n  " \
        + "\n  ".join(big)


def cli_connection_violations(source: str) -> list[str]:
    """Module-level functions of a CLI source, other than `connected`, that connect to a
    backend (`ensure_client`) or catch a refusal (`except RpcError`) themselves."""
    bad = []
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name == "connected":
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) \
                    and inner.func.id == "ensure_client":
                bad.append(f"{node.name}:{inner.lineno}: connects itself")
            if isinstance(inner, ast.ExceptHandler) and inner.type is not None \
                    and "RpcError" in ast.unparse(inner.type):
                bad.append(f"{node.name}:{inner.lineno}: prints its own refusal")
    return bad


def test_cli_commands_connect_and_report_refusals_through_one_decorator() -> None:
    """desktop/commands.py: `@connected` owns the connection and the one refusal line; a
    command body takes a connected client.  (It once repeated the block in 12 commands.)"""
    path = ROOT / "desktop" / "commands.py"
    bad = cli_connection_violations(path.read_text(encoding="utf-8"))
    assert not bad, "commands that connect or report refusals themselves; use @connected:\n  " \
        + "\n  ".join(bad)


def test_the_time_zone_is_guessed_only_in_shared_zones() -> None:
    """This computer's zone is guessed once (shared/zones.py), so a schedule made without a
    zone and the zone the app's form proposes are the same wall clock."""
    bad = []
    for path in sources():
        if path == ROOT / "shared" / "zones.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value == "/etc/localtime":
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: reads /etc/localtime")
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("environ.get") \
                    and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "TZ":
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: reads TZ")
    assert not bad, "guess the zone with shared.zones.local_zone_name:\n  " + "\n  ".join(bad)


def event_name_comparisons(source: str, names: set[str], filename: str = "<source>") -> list[tuple[int, str]]:
    """Where `source` compares an event's name as a literal: `x.type == "tool.start"`,
    `!=`, `in ("session.created", ...)`, or a `case "tool.start":`."""
    def literals(node: ast.expr) -> list[str]:
        items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return [i.value for i in items if isinstance(i, ast.Constant) and i.value in names]

    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Compare) \
                and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            found += [(node.lineno, name) for side in (node.left, *node.comparators)
                      for name in literals(side)]
        elif isinstance(node, ast.MatchValue):
            found += [(node.lineno, name) for name in literals(node.value)]
    return found


def test_the_desktop_dispatches_events_on_their_struct() -> None:
    """desktop/ tells one event from another by its data's struct (`isinstance(event.data,
    p.ApprovalRequested)`, or `match event.data: case p.ToolStart(): ...`), which the client
    decoded with `EVENTS[type]`, never by comparing `event.type` with a name: a renamed or
    mistyped name then fails mypy and this test, not silently at run time."""
    names = event_names()
    assert event_name_comparisons('if e.type in ("door.state", "x") or e.type != "mcp.server": pass',
                                  names) == [(1, "door.state"), (1, "mcp.server")]
    bad = [
        f"{path.relative_to(ROOT)}:{line}: {name!r}"
        for path in sorted((ROOT / "desktop").rglob("*.py"))
        for line, name in event_name_comparisons(path.read_text(encoding="utf-8"), names, str(path))
    ]
    assert not bad, "an event told by its name; test its data's struct instead:\n  " + "\n  ".join(bad)
