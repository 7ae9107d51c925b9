"""A session's own provider (session.update's `provider`): its turns start there, other
sessions stay on the default, the choice survives a restart, and an unknown name is refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory
from .test_provider_recovery import RETRY_NOW, provider_table, start_with
from .wire import Rpc, RpcError, create_session, run_turn, transcript


@pytest.fixture
def other_provider() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    yield fake
    fake.close()
    assert fake.errors == []


def two_providers(backend_factory: BackendFactory, main: FakeOpenAI, other: FakeOpenAI,
                  extra: str = "") -> Backend:
    """"main" (the default) and "other", each its own fake server."""
    return start_with(backend_factory, f'default_provider = "main"\n{extra}'
                      + provider_table("main", main.base_url)
                      + provider_table("other", other.base_url))


async def test_a_session_moved_to_another_provider_asks_it_from_the_next_turn_and_after_a_restart(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, other_provider: FakeOpenAI
) -> None:
    fake_provider.default = Reply(deltas=["from main"])
    other_provider.default = Reply(deltas=["from other"])
    backend = two_providers(backend_factory, fake_provider, other_provider)
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        listed = (await rpc.call("provider.list", {}))["providers"]
        assert listed == [
            # (vision: false: models by those names are not known to see images)
            {"name": "main", "model": "main-model", "kind": "openai", "default": True,
             "vision": False},
            {"name": "other", "model": "other-model", "kind": "openai", "vision": False},
        ]
        stays = await create_session(rpc)
        moves = await create_session(rpc)
        created = (await rpc.call("session.get", {"session_id": moves}))["session"]
        assert "provider" not in created, "a new session is on the default provider"

        updated = (await rpc.call("session.update",
                                  {"session_id": moves, "provider": "other"}))["session"]
        assert (updated["provider"], updated["model"]) == ("other", "other-model"), \
            "without a model, the provider's own"
        changed = await rpc.wait_event(lambda e: e["type"] == "session.updated"
                                       and e["session_id"] == moves and "seq" in e)
        assert changed["data"]["session"]["provider"] == "other"

        _, done = await run_turn(rpc, moves, "which provider?")
        assert done["data"]["text"] == "from other"
        _, done = await run_turn(rpc, stays, "and this one?")
        assert done["data"]["text"] == "from main"
        [asked] = other_provider.snapshot()
        assert asked.body["model"] == "other-model"
        [kept] = fake_provider.snapshot()
        assert kept.body["model"] == "main-model"
    finally:
        await rpc.close()

    backend.restart()
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        again = (await rpc.call("session.get", {"session_id": moves}))["session"]
        assert (again["provider"], again["model"]) == ("other", "other-model")
        _, done = await run_turn(rpc, moves, "still there?")
        assert done["data"]["text"] == "from other"
        _, done = await run_turn(rpc, stays, "and you?")
        assert done["data"]["text"] == "from main"
        assert len(other_provider.snapshot()) == 2
        assert len(fake_provider.snapshot()) == 2
        rows = backend.query("SELECT session_id, provider FROM sessions")
        assert {r["session_id"]: r["provider"] for r in rows} == {moves: "other", stays: None}

        back = (await rpc.call("session.update", {"session_id": moves, "provider": ""}))["session"]
        assert "provider" not in back, '"" goes back to the default provider'
        assert back["model"] == "main-model"
        _, done = await run_turn(rpc, moves, "home again")
        assert done["data"]["text"] == "from main"
    finally:
        await rpc.close()


async def test_an_unknown_provider_is_refused_naming_the_configured_ones(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, other_provider: FakeOpenAI
) -> None:
    backend = two_providers(backend_factory, fake_provider, other_provider)
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc)
        before = (await rpc.call("session.get", {"session_id": sid}))["session"]
        with pytest.raises(RpcError) as refused:
            await rpc.call("session.update", {"session_id": sid, "provider": "nowhere",
                                              "model": "x"})
        assert refused.value.code == -32602
        assert refused.value.data == {"field": "provider"}
        message = refused.value.message
        assert "'nowhere'" in message
        assert "main, other" in message, "it names the configured providers"
        assert "provider.list" in message
        after = (await rpc.call("session.get", {"session_id": sid}))["session"]
        assert after == before, "nothing of a refused update is kept"
        with pytest.raises(RpcError) as long:
            await rpc.call("session.update", {"session_id": sid, "provider": "p" * 201})
        assert long.value.code == -32602
    finally:
        await rpc.close()


async def test_a_failing_session_provider_falls_back_once_and_a_removed_one_fails_saying_so(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, other_provider: FakeOpenAI
) -> None:
    """The chain is the session's provider, then the fallbacks minus it; a provider taken out
    of config is never silently swapped for another."""
    other_provider.default = Reply.http_error(500, "kaput", **RETRY_NOW)
    fake_provider.default = Reply(deltas=["main stepped in"])
    backend = two_providers(backend_factory, fake_provider, other_provider,
                            extra='fallback_providers = ["other", "main"]\n')
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc)
        await rpc.call("session.update", {"session_id": sid, "provider": "other"})
        _, done = await run_turn(rpc, sid, "hello")
        assert done["data"]["text"] == "main stepped in"
        assert len(other_provider.snapshot()) == 3, "three attempts on the session's provider, once"
        assert fake_provider.snapshot()[0].body["model"] == "main-model", "a fallback as its own"

        await rpc.call("config.set", {"patch": {"fallback_providers": [],
                                                "providers": {"other": None}}})
        _, done = await run_turn(rpc, sid, "again")
        assert done["data"]["status"] == "failed"
        assert "“other”, which is not set up any more" in done["data"]["failure_reason"]
        note = (await transcript(rpc, sid))[-1]
        assert (note["note_kind"], note["meta"]["kind"]) == ("failed", "not_configured")
        assert len(fake_provider.snapshot()) == 1, "nothing sent to another provider unasked"
    finally:
        await rpc.close()
