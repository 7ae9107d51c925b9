"""Fixtures: a scripted fake provider, real backend processes on temp data dirs, raw clients."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI

from .backend_proc import Backend, BackendFactory
from .wire import Connect, Rpc


@pytest.fixture
def backend_factory(tmp_path: Path) -> Iterator[BackendFactory]:
    """``make(base_url, extra_config="", start=True)``: a Backend on its own data dir."""
    made: list[Backend] = []

    def make(base_url: str, extra_config: str = "", start: bool = True,
             extra_env: dict[str, str] | None = None) -> Backend:
        backend = Backend(tmp_path / f"data{len(made)}", base_url, extra_config, extra_env)
        made.append(backend)
        if start:
            backend.start()
        return backend

    yield make
    errors: list[str] = []
    for backend in made:
        backend.close()
        print(backend.stderr_tail())  # shown by pytest only when the test failed
        errors += backend.logged_errors()
    assert not errors, "the backend logged errors:\n" + "\n".join(errors[:20])


@pytest.fixture
def backend(backend_factory: BackendFactory, fake_provider: FakeOpenAI) -> Backend:
    """A started backend whose default provider is ``fake_provider``."""
    return backend_factory(fake_provider.base_url)


@pytest.fixture
async def connect(backend: Backend) -> AsyncIterator[Connect]:
    """``await connect(initialize=True, token=..., headers=..., name=...)`` to ``backend``."""
    opened: list[Rpc] = []

    async def _connect(
        *,
        initialize: bool = True,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        name: str = "rpc",
    ) -> Rpc:
        rpc = await Rpc.open(
            backend.port,
            token if token is not None else backend.token,
            initialize=initialize,
            headers=headers,
            name=name,
        )
        opened.append(rpc)
        return rpc

    yield _connect
    for rpc in opened:
        if not rpc.closed.is_set():
            try:
                await rpc.close()
            except (TimeoutError, OSError):
                rpc.abort()
