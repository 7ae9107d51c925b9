"""Command line of the backend process: `python -m backend serve --data-dir DIR [--port 0]`."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import sys
from pathlib import Path

from backend import host
from backend.errors import ConfigError, StoreRefused
from shared.paths import default_data_dir


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="turnkey-backend", description="Turnkey's backend")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the backend")
    s.add_argument("--data-dir", type=Path, default=None,
                   help="data folder (default: $TURNKEY_HOME or the platform's data dir)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=0, help="0 picks a free port")
    s.add_argument("--allow-remote", action="store_true",
                   help="listen on a non-loopback host (not available in protocol 1)")
    args = parser.parse_args(argv)
    if not _loopback(args.host):
        print("turnkey-backend: only loopback hosts are allowed; remote access (with TLS) is "
              "not available in protocol 1", file=sys.stderr)
        return 2
    host.private_umask()  # transcripts, logs and the token are private to this user
    data_dir = (args.data_dir or default_data_dir()).expanduser().resolve()
    from backend.app import serve
    from shared import logs

    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    logs.setup(data_dir)
    try:
        return asyncio.run(serve(data_dir, args.host, args.port))
    except (ConfigError, StoreRefused) as exc:
        return _refuse(exc.message)
    except KeyboardInterrupt:
        return 0


def _refuse(message: str) -> int:
    """Will not start: one line on stderr, the same line in the log; exit status 2."""
    print(f"turnkey-backend: {message}", file=sys.stderr, flush=True)
    logging.getLogger("backend").error("not starting: %s", message, extra={"stderr": False})
    return 2


if __name__ == "__main__":
    sys.exit(main())
