"""websockets' asyncio client, loaded without python-socks.

`websockets.asyncio.client` imports python-socks at import time when it is installed, for
SOCKS proxies (~25 ms of an app's start-up).  Our client always connects with `proxy=None`
(shared/client.py), so the proxy code is never reached: the import is made with python-socks
hidden, and websockets keeps its "python-socks is not installed" fallback, which only a
SOCKS proxy would call.  A process that imported python-socks earlier is left as it is.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def _socks_hidden() -> Iterator[None]:
    if "python_socks" in sys.modules:
        yield
        return
    sys.modules["python_socks"] = None  # type: ignore[assignment]  # import raises ImportError
    try:
        yield
    finally:
        if sys.modules.get("python_socks", 0) is None:
            del sys.modules["python_socks"]  # a later, deliberate import still works


with _socks_hidden():
    from websockets.asyncio.client import ClientConnection, connect

__all__ = ["ClientConnection", "connect"]
