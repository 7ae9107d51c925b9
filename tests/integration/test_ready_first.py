"""Ready first, build later: the backend says READY and answers `initialize` before it has built
what a turn needs (backend/app.py, backend/server/gate.py); every other call waits for the build,
and a build that fails is an error to those calls, not a hang.

The build is held by a test hook (TURNKEY_TEST_BUILD_GATE: it waits until that file exists), so
"before the build" is a fact here, not a race.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory
from .wire import Rpc, RpcError, submit, wait_complete

HELD_S = 1.0  # how long a call is shown to wait while the build is held


def _held(backend_factory: BackendFactory, fake: FakeOpenAI, gate: Path) -> Backend:
    return backend_factory(fake.base_url, extra_env={"TURNKEY_TEST_BUILD_GATE": str(gate)})


async def test_initialize_is_answered_before_the_build_and_a_turn_waits_for_it(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    fake_provider.default = Reply(deltas=["built ", "then answered"])
    gate = tmp_path / "build-gate"
    backend = _held(backend_factory, fake_provider, gate)  # READY with the build held
    rpc = await Rpc.open(backend.port, backend.token)  # initialize, answered
    assert rpc.init_result["epoch"] == backend.info["epoch"]
    assert rpc.init_result["capabilities"]["provider"]["name"] == "main"
    assert "prompt.submit" in rpc.init_result["capabilities"]["methods"]
    create = asyncio.ensure_future(rpc.call("session.create", {}))
    await asyncio.sleep(HELD_S)
    assert not create.done(), "session.create waits for the build"
    assert not fake_provider.requests
    gate.write_text("go")
    sid = (await create)["session"]["session_id"]
    receipt = await submit(rpc, sid, "hi")
    done = await wait_complete(rpc, receipt["admission_id"])
    assert done["data"]["text"] == "built then answered"
    again = await Rpc.open(backend.port, backend.token)  # after the build: the full answer
    assert again.init_result["capabilities"]["provider"] == rpc.init_result["capabilities"]["provider"]
    await again.close()
    await rpc.close()


async def test_a_build_that_fails_is_an_error_to_the_waiting_call(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    gate = tmp_path / "build-gate"
    backend = _held(backend_factory, fake_provider, gate)
    rpc = await Rpc.open(backend.port, backend.token)
    create = asyncio.ensure_future(rpc.call("session.create", {}))
    await asyncio.sleep(HELD_S)
    gate.write_text("fail")
    with pytest.raises(RpcError) as failed:
        await create
    assert "could not start" in failed.value.message
    assert "build gate said fail" in failed.value.message
    assert backend.proc is not None
    assert await asyncio.to_thread(backend.proc.wait, 20) == 0, "it stops; the next start retries"
    # What the backend logged about it is this test's subject, not a fault of the run.
    for path in [backend.stderr_path, *sorted((backend.data_dir / "logs").glob("*"))]:
        path.write_text("")
