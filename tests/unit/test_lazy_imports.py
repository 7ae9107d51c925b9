"""shared/lazy_imports.py: importlib.metadata is not run by `import websockets`, and works as
itself the moment something uses it.  Each check in a fresh interpreter (sys.modules is global)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.integration.backend_proc import REPO


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_websockets_import_does_not_run_importlib_metadata() -> None:
    out = run("""
        import sys
        from shared.lazy_imports import defer_startup_imports
        defer_startup_imports()
        import websockets.asyncio.server, websockets.asyncio.client
        print(type(sys.modules["importlib.metadata"]).__name__, "zipfile" in sys.modules)
    """)
    assert out == "Deferred False"


def test_without_the_deferral_it_would_run() -> None:
    """The check above can fail: websockets does import importlib.metadata eagerly."""
    out = run("""
        import sys
        import websockets.asyncio.server
        print(type(sys.modules["importlib.metadata"]).__name__, "zipfile" in sys.modules)
    """)
    assert out == "module True"


def test_deferred_module_works_every_way_it_is_reached() -> None:
    out = run("""
        import sys
        from shared.lazy_imports import defer_startup_imports
        defer_startup_imports()
        import importlib.metadata
        from importlib.metadata import version
        import importlib.metadata._meta  # a submodule under the stand-in
        import websockets
        print(version("websockets") == websockets.version.version,
              importlib.metadata.distribution("msgspec").metadata["Name"],
              sys.modules["importlib.metadata"].version is version,
              isinstance(importlib.metadata.PackageNotFoundError("x"), ModuleNotFoundError))
    """)
    assert out == "True msgspec True True"


def test_the_backend_reaches_ready_without_it(tmp_path: Path) -> None:
    """`python -m backend serve` defers it first thing: nothing before READY runs it (one
    pipe for stdout and -X importtime's stderr keeps their order)."""
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "backend", "serve", "--data-dir",
         str(tmp_path / "data")], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    before_ready: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("TURNKEY_BACKEND_READY"):
                break
            before_ready.append(line)
        else:
            raise AssertionError("no READY line:\n" + "".join(before_ready[-20:]))
    finally:
        proc.kill()
        proc.wait(timeout=30)
    imported = {line.rsplit("|", 1)[-1].strip() for line in before_ready if "|" in line}
    assert "websockets.version" in imported  # the check below means something
    assert "importlib.metadata" not in imported
    assert "zipfile" not in imported
