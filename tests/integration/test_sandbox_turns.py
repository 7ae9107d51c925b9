"""The sandbox in real turns: what a hostile model's commands can reach through a real backend.

The model (a scripted fake provider) asks for the commands an attacker would:
read the owner token, read the provider key from the backend's environment,
leave children running past a crash.  The backend runs them for real.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.procs import unique_sleep, wait_gone, wait_started

from .backend_proc import Backend, BackendFactory
from .wire import Json, Rpc, create_session, is_event, submit, terminal, transcript, wait_complete

KEY = "sk-test-0123456789-do-not-leak"


async def answer(rpc: Rpc, count: int, decision: str) -> list[Json]:
    """Answers the next ``count`` approval requests (each once, in the order asked)."""
    asked: list[Json] = []
    for _ in range(count):
        request = await rpc.wait_event(
            lambda e: e["type"] == "approval.request" and "seq" in e
            and e["data"]["approval"]["approval_id"] not in [a["approval_id"] for a in asked])
        asked.append(request["data"]["approval"])
        await rpc.call("approval.respond", {"approval_id": asked[-1]["approval_id"], "decision": decision})
    return asked


def _keyed_backend(factory: BackendFactory, fake: FakeOpenAI, env: dict[str, str] | None = None) -> Backend:
    """A backend whose provider key comes from its environment, as many people configure it."""
    backend = factory(fake.base_url, start=False, extra_env={"TK_TEST_PROVIDER_KEY": KEY, **(env or {})})
    config = backend.data_dir / "config.toml"
    config.write_text(config.read_text() + 'api_key_env = "TK_TEST_PROVIDER_KEY"\n')
    backend.start()
    return backend


async def test_commands_cannot_read_the_token_the_key_or_the_data_folder(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    backend = _keyed_backend(backend_factory, fake_provider)
    data = backend.data_dir
    probes = [
        f"cat {data}/backend.json",
        f"ls -A {data}",
        "tr '\\0' '\\n' < /proc/$PPID/environ",
        "cat /proc/*/environ | tr '\\0' '\\n'",
        "env",
        f"grep -rs {backend.token[:12]} {data.parent} /var/tmp | head -3",
    ]
    fake_provider.script(Reply.calls(*[terminal(p) for p in probes]), Reply(deltas=["Looked."]))
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        assert rpc.init_result["capabilities"]["sandbox"] == {"active": True, "kind": "bubblewrap",
                                                         "network": False}
        sid = await create_session(rpc, cwd=str(tmp_path))
        receipt = await submit(rpc, sid, "look around")
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "completed", done
        rows = [m for m in await transcript(rpc, sid) if m["role"] == "tool"]
        assert len(rows) == len(probes)
        seen = "\n".join(m["content"] for m in rows)
        assert backend.token not in seen
        assert KEY not in seen
        assert "TK_TEST_PROVIDER_KEY" not in seen
        assert "TURNKEY_" not in seen
        # And nothing the model was sent carries them either.
        sent = json.dumps([r.body for r in fake_provider.snapshot()])
        assert backend.token not in sent
        assert KEY not in sent
    finally:
        await rpc.close()


async def test_a_detached_child_dies_with_a_backend_killed_by_sigkill(
    backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    marker = tmp_path / "late"
    # The processes are found by command line across the machine, so the sleeps carry a
    # number of this run's own: another run of this test at the same time is not ours.
    mine = unique_sleep(62)
    command = f"setsid nohup sh -c '{mine}1; touch {marker}' >/dev/null 2>&1 & {mine}2"
    fake_provider.script(Reply.calls(terminal(command)))
    rpc = await Rpc.open(backend.port, backend.token)
    sid = await create_session(rpc, cwd=str(tmp_path))
    receipt = await submit(rpc, sid, "detach and wait")
    await rpc.wait_event(is_event("tool.start", receipt["admission_id"]))
    # Both sleeps run: the daemon has left its shell's session.  (Not just two processes
    # naming them: bubblewrap's two halves do from the moment it clones, and a kill before
    # the outer half lets the inner one go on leaves the inner one waiting for it, alone
    # and forever: bwrap's own start-up, which the next backend's start clears, procs.py.)
    assert await wait_started(f"{mine}1", f"{mine}2")
    backend.kill9()
    await rpc.wait_closed()
    # No restart: the sandbox's pid namespace ends with the backend, detached children too.
    assert await wait_gone(mine) == []
    assert not marker.exists()


async def test_network_and_leaving_the_sandbox_ask_plainly(
    backend: Backend, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    session = tmp_path / "session"
    session.mkdir()
    fake_provider.script(
        Reply.calls(terminal("echo ordinary > here.txt"),
                    terminal(f"touch {outside}/in-sandbox"),
                    terminal(f"touch {outside}/approved", sandbox=False),
                    terminal("echo net", network=True)),
        Reply(deltas=["Done."]),
    )
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc, cwd=str(session))
        receipt = await submit(rpc, sid, "work")
        asked = await answer(rpc, 2, "once")
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "completed", done
    finally:
        await rpc.close()
    assert "outside the sandbox" in asked[0]["reason"]
    assert asked[0]["summary"].startswith("[no sandbox] ")
    assert "network" in asked[1]["reason"]
    assert (session / "here.txt").read_text() == "ordinary\n"  # asked nothing
    assert not (outside / "in-sandbox").exists()  # read-only there
    assert (outside / "approved").exists()  # the person let it out


async def test_without_bubblewrap_everything_not_plainly_read_only_asks(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    backend = _keyed_backend(backend_factory, fake_provider, {"TURNKEY_BWRAP": "none"})
    fake_provider.script(
        Reply.calls(terminal("ls"), terminal("touch made.txt"),
                    terminal(f"cat {backend.data_dir}/backend.json"), terminal("env")),
        Reply(deltas=["Done."]),
    )
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sandbox = rpc.init_result["capabilities"]["sandbox"]
        assert sandbox["active"] is False
        assert "TURNKEY_BWRAP=none" in sandbox["reason"]
        sid = await create_session(rpc, cwd=str(tmp_path))
        receipt = await submit(rpc, sid, "work")
        asked = await answer(rpc, 2, "deny")
        done = await wait_complete(rpc, receipt["admission_id"])
        assert done["data"]["status"] == "completed", done
        rows = [m for m in await transcript(rpc, sid) if m["role"] == "tool"]
    finally:
        await rpc.close()
    assert [a["summary"] for a in asked] == ["touch made.txt", f"cat {backend.data_dir}/backend.json"]
    assert "without a sandbox" in asked[0]["reason"]
    assert "data folder" in asked[1]["reason"]
    assert [r["status"] for r in rows] == ["ok", "denied", "denied", "ok"]
    assert not (tmp_path / "made.txt").exists()
    assert KEY not in rows[3]["content"]  # the environment is an allowlist here too
