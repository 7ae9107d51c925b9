"""Standard-library modules loaded on first use instead of at import.

`websockets` (the backend's listener and every client) imports `importlib.metadata` only to
read its own version from it in development builds, and that import costs ~20 ms of a start
(email, zipfile, csv...).  `defer` puts a stand-in in `sys.modules` that carries the module's
name and spec, so `import importlib.metadata` finds it and runs nothing; the first read of any
other attribute imports the real module and every later read is answered from it.
(`importlib.util.LazyLoader` does not do here: on Python 3.11 the import system's own look at
`__spec__` already runs the module.)
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

DEFERRED = ("importlib.metadata",)


class Deferred(types.ModuleType):
    """Stands in for a module until one of its own attributes is read."""

    def __init__(self, name: str, spec: Any) -> None:
        super().__init__(name)
        self.__spec__ = spec
        self.__loaded: types.ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:  # only for what the stand-in itself lacks
        real = self.__loaded
        if real is None:
            name = self.__name__
            if sys.modules.get(name) is self:
                del sys.modules[name]
            real = self.__loaded = importlib.import_module(name)  # binds it on its parent too
        return getattr(real, attr)


def defer(name: str) -> None:
    """Makes `name` load on first use; a no-op when it is already imported or not found."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None:
        return
    stand_in = Deferred(name, spec)
    sys.modules[name] = stand_in
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, stand_in)  # what `import parent.child` binds


def defer_startup_imports() -> None:
    """Called first by the entry points (the backend's and the `turnkey` command's)."""
    for name in DEFERRED:
        defer(name)
