"""`turnkey store migrate --to postgresql://...`: a data folder's SQLite store copied into
PostgreSQL, checked, and (with --switch) made the folder's store.

The copy and its check are store/copy.py; this module decides whether to run them and
says what happened.  It refuses, before writing anything:

- while a backend runs on the folder: it takes the folder's lock (DIR/backend.lock, the
  one a backend takes at start) and keeps it until done, so the file stays quiet and no
  backend starts meanwhile;
- while a backend uses the target database, and when the target already holds data:
  two stores are never merged, and nothing is overwritten;
- when the folder's config already names another store, or the file is not the current
  layout (store/copy.py says why an older file is not upgraded here).

The file itself is opened read-only and left as it was: removing the `store` line from
config.toml goes back to it.  The attachments' files (DIR/attachments) are copied into the
database too, and left where they are.

Exit status: 0 copied and verified; 1 the copy failed (rolled back) or the verification
found a difference; 2 refused (what to do is said); 3 a backend is running on the folder
or on the target database; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import psycopg

from backend.config import ConfigFile
from backend.errors import ConfigError, InvalidParams, StoreRefused
from backend.server import discovery
from backend.store import copy, pg_schema
from shared.config import STORE_SCHEMES, store_redacted

OK, FAILED, REFUSED, BUSY, INTERRUPTED = 0, 1, 2, 3, 130
APP_NAME = "turnkey-store-migrate"
BACKEND_APPS = ("turnkey-backend", "turnkey-listener")  # store/pg.py's connections
CONNECT_TIMEOUT_S = 10
BACKUP_SUFFIX = ".before-store-migrate"


class Refused(Exception):
    """The migration will not run; `status` is the exit status, the message what to do."""

    def __init__(self, message: str, status: int = REFUSED) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def main(data_dir: Path, dsn: str, switch: bool) -> int:
    """Runs the whole command; returns its exit status."""
    try:
        return _migrate(data_dir, dsn, switch)
    except Refused as exc:
        return _say_error(exc.message, exc.status)
    except KeyboardInterrupt:
        return _say_error("interrupted: a copy not yet committed was rolled back whole (one "
                          "already committed stays in the database)", INTERRUPTED)


def _migrate(data_dir: Path, dsn: str, switch: bool) -> int:
    _check_dsn(dsn, switch)
    config = _config(data_dir)
    lock = _lock(data_dir)
    try:
        src = _source(data_dir / "state.db")
        try:
            dst = _connect(dsn)
            try:
                return _copy_and_check(data_dir, config, src, dst, dsn, switch)
            finally:
                dst.close()
        finally:
            src.close()
    finally:
        os.close(lock)


def _copy_and_check(data_dir: Path, config: ConfigFile, src: sqlite3.Connection, dst: Any,
                    dsn: str, switch: bool) -> int:
    name = store_redacted(dsn)
    _prepare_target(dst, dsn)
    print(f"copying {data_dir / 'state.db'} into {name}")
    started = time.monotonic()
    try:
        copied = copy.copy_all(src, dst, _progress, data_dir / "attachments")
    except copy.CopyRefused as exc:
        raise Refused(exc.message) from None
    except copy.CopyFailed as exc:
        return _say_error(_clean_text(exc.message, dsn), FAILED)
    took = time.monotonic() - started
    try:
        source, found = _verify(src, dst, data_dir / "attachments")
    except (psycopg.Error, KeyboardInterrupt) as exc:
        why = "interrupted" if isinstance(exc, KeyboardInterrupt) else _clean(exc, dsn)
        return _say_error(f"the copy into {name} was committed but could not be checked "
                          f"({why}); drop and create the database again, then migrate again",
                          FAILED)
    if found:
        return _say_error(
            f"the copy in {name} differs from {data_dir / 'state.db'}:\n  " + "\n  ".join(found)
            + "\nthe file is unchanged; drop and create the database again before migrating "
            "again", FAILED)
    return _done(config, copied, took, dsn, switch, source)


# --- refusals before anything is written ---------------------------------------------


def _prepare_target(dst: Any, dsn: str) -> None:
    """The target's schema created (or found current), once no backend uses it; refused
    when it holds data already (said now; the copy checks again under its lock)."""
    name = store_redacted(dsn)
    _refuse_live_backends(dst, name)
    try:
        pg_schema.migrate(dst, name)
    except StoreRefused as exc:
        raise Refused(exc.message) from None
    except psycopg.Error as exc:
        raise Refused(f"could not create the schema in {name}: {_clean(exc, dsn)}") from None
    if held := copy.occupied(dst):
        raise Refused(copy.occupied_message(held))


def _check_dsn(dsn: str, switch: bool) -> None:
    if not dsn.startswith(STORE_SCHEMES):
        raise Refused("--to takes a PostgreSQL connection string: "
                      "postgresql://USER@HOST:PORT/DATABASE")
    if switch and _password(dsn):
        raise Refused("--switch would write the password into config.toml; keep it in "
                      "~/.pgpass or PGPASSWORD (libpq reads both) and give --to without it")


def _config(data_dir: Path) -> ConfigFile:
    if not data_dir.is_dir():
        raise Refused(f"{data_dir} is not a folder: give the data folder to copy with --data-dir")
    config = ConfigFile(data_dir / "config.toml")
    try:
        cfg = config.load()
    except ConfigError as exc:
        raise Refused(f"{exc.message}; fix config.toml first") from None
    if cfg.store:
        raise Refused(f"this folder already keeps its sessions in {store_redacted(cfg.store)} "
                      "(store in config.toml), not in its state.db; remove that line first "
                      "if the file is the store to copy")
    return config


def _lock(data_dir: Path) -> int:
    """The folder's lock, held until the copy is done (see the module's docstring)."""
    try:
        return discovery.acquire(data_dir)
    except discovery.AlreadyRunning as exc:
        raise Refused(f"a backend is running on {data_dir} (pid {exc.running.pid}); stop it "
                      "first (`turnkey backend stop`) so the copy sees a file nobody writes",
                      BUSY) from None
    except OSError as exc:
        raise Refused(f"could not lock {data_dir}: {exc}") from None


def _source(path: Path) -> sqlite3.Connection:
    try:
        return copy.open_source(path)
    except copy.CopyRefused as exc:
        raise Refused(exc.message) from None


def _connect(dsn: str) -> Any:
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                               application_name=APP_NAME)
    except psycopg.Error as exc:
        raise Refused(f"could not connect to {store_redacted(dsn)}: {_clean(exc, dsn)}; check "
                      "the connection string, that the server runs and that the database "
                      "exists") from None


def _refuse_live_backends(dst: Any, name: str) -> None:
    """A backend connected to the target would write beside the copy; its connections name
    themselves (store/pg.py), and the server lists them."""
    row = dst.execute(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND application_name = ANY(%s) AND pid <> pg_backend_pid()", (list(BACKEND_APPS),)
    ).fetchone()
    if int(row[0]):
        raise Refused(f"a backend is using {name}; the copy goes only into a database no "
                      "backend uses: stop it, or give another database", BUSY)


# --- checking and reporting ----------------------------------------------------------


def _verify(src: sqlite3.Connection, dst: Any,
            files: Path) -> tuple[copy.Snapshot, list[str]]:
    """Both sides read again after the commit, each in one snapshot (the attachments' bytes
    too); the source's and what differs."""
    src.execute("BEGIN")
    dst.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
    try:
        source, target = copy.snapshot(src, files), copy.snapshot(dst)
    finally:
        src.execute("ROLLBACK")
        dst.execute("ROLLBACK")
    return source, copy.differences(source, target)


def _progress(table: str, rows: int) -> None:
    print(f"  {table}: {rows} rows", flush=True)


def _done(config: ConfigFile, copied: dict[str, int], took: float, dsn: str, switch: bool,
          source: copy.Snapshot) -> int:
    rows = sum(copied.values())
    rate = f", {rows / took:,.0f} rows/s" if took > 0 else ""
    print(f"verified: {len(copied)} tables, {rows} rows, {source.counts['sessions']} sessions, "
          f"{source.events} events, {len(source.held or {})} attachment files; every count, "
          "event seq, message id and file's size matches "
          f"(copied in {took:.1f} s{rate})")
    line = f'store = "{store_redacted(dsn)}"'
    if not switch:
        print(f"to use it, put this line in {config.path} (state.db stays as it was; remove "
              f"the line to go back to it):\n{line}")
        if _password(dsn):
            print("(the password is shown as ***: leave it out and keep it in ~/.pgpass or "
                  "PGPASSWORD, which libpq reads)")
        return OK
    backup = _switch(config, dsn)
    kept = f"the previous file is kept as {backup}; " if backup else ""
    print(f"{config.path} now has {line}; {kept}state.db is untouched: remove the line to go "
          "back to it")
    return OK


def _switch(config: ConfigFile, dsn: str) -> Path | None:
    """config.toml names the new store (written atomically); the old file is copied aside
    first, because rewriting the TOML drops its comments."""
    backup = None
    if config.path.exists():
        backup = config.path.with_name(config.path.name + BACKUP_SUFFIX)
        shutil.copy2(config.path, backup)
    try:
        config.patch({"store": dsn})
    except InvalidParams as exc:
        raise Refused(f"config.toml was not changed: {exc.message}", FAILED) from None
    return backup


def _say_error(message: str, status: int) -> int:
    print(f"turnkey: {message}", file=sys.stderr, flush=True)
    return status


# --- keeping the password out of messages --------------------------------------------


def _password(dsn: str) -> str | None:
    with contextlib.suppress(ValueError):
        return urlsplit(dsn).password
    return None


def _clean_text(text: str, dsn: str) -> str:
    """`text` with the DSN's password (as written, and decoded) replaced by ***."""
    password = _password(dsn)
    if password:
        for form in {password, unquote(password)}:
            text = text.replace(form, "***")
    return text


def _clean(exc: BaseException, dsn: str) -> str:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return _clean_text(first, dsn)

