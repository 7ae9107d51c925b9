"""Command line of the backend process: `python -m backend serve --data-dir DIR [--port 0]`,
and `python -m backend store-migrate --to DSN [--data-dir DIR] [--switch]` (store_migrate.py).

`--host` (or `--listen HOST:PORT`) beyond loopback serves wss only: with no `--tls-cert`,
a self-signed certificate is made once into DIR/tls/ and its fingerprint published.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

from backend import host
from backend.errors import ConfigError, StoreRefused
from backend.server.tls import TlsFiles
from shared.lazy_imports import defer_startup_imports
from shared.paths import default_data_dir


class BadListen(Exception):
    """The listening options do not make sense; the message says what to give instead."""


def _listen(args: argparse.Namespace) -> tuple[str, int]:
    """--listen HOST:PORT (IPv6 in brackets) wins over --host and --port."""
    if args.listen is None:
        return args.host, args.port
    host, sep, port = args.listen.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise BadListen(f"--listen takes HOST:PORT (e.g. 0.0.0.0:8765), not {args.listen!r}")
    return host, int(port)


def _tls_files(args: argparse.Namespace) -> TlsFiles | None:
    """The certificate given to serve with, if any (off loopback without one, the backend
    makes its own once it holds the folder's lock: backend/app.py)."""
    if (args.tls_cert is None) != (args.tls_key is None):
        raise BadListen("give both --tls-cert and --tls-key, or neither")
    if args.tls_cert is None:
        return None
    return TlsFiles(args.tls_cert.expanduser().resolve(), args.tls_key.expanduser().resolve())


def main(argv: list[str] | None = None) -> int:
    defer_startup_imports()
    parser = argparse.ArgumentParser(prog="turnkey-backend", description="Turnkey's backend")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the backend")
    s.add_argument("--data-dir", type=Path, default=None,
                   help="data folder (default: $TURNKEY_HOME or the platform's data dir)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=0, help="0 picks a free port")
    s.add_argument("--listen", default=None, metavar="HOST:PORT",
                   help="where to listen (instead of --host and --port); beyond loopback the "
                        "backend serves TLS (wss) only")
    s.add_argument("--tls-cert", type=Path, default=None,
                   help="PEM certificate to serve TLS with (default beyond loopback: a "
                        "self-signed one made once in DATA_DIR/tls/)")
    s.add_argument("--tls-key", type=Path, default=None, help="the certificate's PEM private key")
    s.add_argument("--allow-remote", action="store_true",
                   help="accepted for older scripts; a non-loopback host needs nothing more")
    _store_migrate_parser(sub)
    args = parser.parse_args(argv)
    host.private_umask()  # transcripts, logs, the token and the TLS key are private to this user
    data_dir = (args.data_dir or default_data_dir()).expanduser().resolve()
    if args.command == "store-migrate":
        from backend import store_migrate

        return store_migrate.main(data_dir, args.to, args.switch)
    from backend.app import serve
    from shared import logs

    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    logs.setup(data_dir)
    try:
        where, port = _listen(args)
        tls = _tls_files(args)
        return asyncio.run(serve(data_dir, where, port, tls))
    except BadListen as exc:
        return _refuse(str(exc))
    except (ConfigError, StoreRefused) as exc:
        return _refuse(exc.message)
    except KeyboardInterrupt:
        return 0


def _store_migrate_parser(sub: Any) -> None:
    m = sub.add_parser("store-migrate", help="copy the folder's SQLite store into an empty "
                                             "PostgreSQL database, and check the copy")
    m.add_argument("--data-dir", type=Path, default=None,
                   help="data folder (default: $TURNKEY_HOME or the platform's data dir)")
    m.add_argument("--to", required=True, metavar="DSN",
                   help="postgresql://USER@HOST:PORT/DATABASE (keep a password in ~/.pgpass "
                        "or PGPASSWORD)")
    m.add_argument("--switch", action="store_true",
                   help="once verified, set store in config.toml to it (the old file is kept "
                        "beside it)")


def _refuse(message: str) -> int:
    """Will not start: one line on stderr, the same line in the log; exit status 2."""
    print(f"turnkey-backend: {message}", file=sys.stderr, flush=True)
    logging.getLogger("backend").error("not starting: %s", message, extra={"stderr": False})
    return 2


if __name__ == "__main__":
    sys.exit(main())
