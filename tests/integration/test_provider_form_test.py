"""provider.test of a settings form before it is saved: the form's values are what gets
called (`provider_config`), nothing is saved, and a key given inline (`api_key`) is used for
that one request and appears nowhere else: not in the data folder (database, WAL, logs,
config, secrets), not in an event, a result or an error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory
from .wire import Json, Rpc, RpcError, create_session, run_turn

INLINE_KEY = "sk-test-INLINEFORM-0123456789abcdef"
ERROR_PAGE = b"<!DOCTYPE html><html><body><h1>501 Not Implemented</h1></body></html>"


@pytest.fixture
def failing_provider() -> Iterator[FakeOpenAI]:
    """A second fake on another port whose every answer is a 501 error page."""
    fake = FakeOpenAI()
    fake.default = Reply(status=501, raw=ERROR_PAGE, content_type="text/html")
    yield fake
    fake.close()


def _start(factory: BackendFactory, base_url: str) -> Backend:
    backend = factory(base_url, start=False)
    backend.extra_env["TURNKEY_NO_KEYRING"] = "1"
    backend.start()
    return backend


async def _error(rpc: Rpc, params: Json) -> RpcError:
    try:
        await rpc.call("provider.test", params)
    except RpcError as exc:
        return exc
    raise AssertionError("provider.test succeeded")


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return [str(p.relative_to(root)) for p in sorted(root.rglob("*"))
            if p.is_file() and needle in p.read_bytes()]


async def test_the_forms_url_is_what_gets_tested_and_nothing_is_saved(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, failing_provider: FakeOpenAI,
    tmp_path: Path,
) -> None:
    backend = _start(backend_factory, fake_provider.base_url)
    config_file = backend.data_dir / "config.toml"
    saved_toml = config_file.read_bytes()
    rpc = await Rpc.open(backend.port, backend.token, name="form")
    try:
        saved_view = await rpc.call("config.get")
        form = {"base_url": failing_provider.base_url}
        result = await rpc.call("provider.test", {"provider": "main", "provider_config": form})
        assert result["ok"] is False, result
        assert (result["provider"], result["model"]) == ("main", "fake-model")
        assert result["error"]["kind"] == "server_error"
        assert result["error"]["message"] == (
            "The provider's server answered with an error page (HTTP 501: Not Implemented). "
            "Check the base URL in Settings → Providers.")
        assert result["error"]["detail"] == "main: HTTP 501: the provider returned an HTML page"
        assert len(failing_provider.snapshot()) == 1, "the form's URL was called"
        assert fake_provider.snapshot() == [], "the saved URL was not"

        assert config_file.read_bytes() == saved_toml, "config.toml is untouched"
        assert await rpc.call("config.get") == saved_view, "nothing changed in the backend"
        saved = await rpc.call("provider.test", {"provider": "main"})
        assert saved["ok"] is True, "the saved settings still work"
        sid = await create_session(rpc, cwd=str(tmp_path))
        _, done = await run_turn(rpc, sid, "hello")
        assert done["data"]["status"] == "completed", "turns use the saved provider"
        assert len(failing_provider.snapshot()) == 1
        assert len(fake_provider.snapshot()) == 2

        # And the other way round: a broken saved URL, fixed in the form, tests OK.
        await rpc.call("config.set", {"patch": {"providers": {"main": {
            "base_url": failing_provider.base_url}}}})
        fixed = await rpc.call("provider.test", {"provider": "main", "provider_config": {
            "base_url": fake_provider.base_url, "model": "form-model"}})
        assert fixed["ok"] is True, fixed
        assert fixed["model"] == "form-model", "the form's model was asked for"
        assert fake_provider.snapshot()[-1].body["model"] == "form-model"
        assert len(failing_provider.snapshot()) == 1
    finally:
        await rpc.close()


async def test_a_new_provider_can_be_tested_before_it_is_saved(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, failing_provider: FakeOpenAI,
) -> None:
    backend = _start(backend_factory, failing_provider.base_url)
    rpc = await Rpc.open(backend.port, backend.token, name="form")
    try:
        draft = {"kind": "openai", "base_url": fake_provider.base_url, "model": "draft-model",
                 "context_window": None}  # null: the default, as in config.set
        result = await rpc.call("provider.test", {"provider": "draft", "provider_config": draft})
        assert (result["ok"], result["provider"], result["model"]) == (True, "draft", "draft-model")
        assert "draft" not in (await rpc.call("config.get"))["providers"]
        assert "draft" not in (backend.data_dir / "config.toml").read_text()

        bad = await _error(rpc, {"provider": "draft", "provider_config": {
            "model": "m", "context_window": -5}})
        assert (bad.code, bad.data) == (-32602, {"field": "provider_config.context_window"})
        missing = await _error(rpc, {"provider": "draft", "provider_config": {"kind": "openai"}})
        assert missing.data == {"field": "provider_config.model"}
        unnamed = await _error(rpc, {"provider_config": draft})
        assert unnamed.data == {"field": "provider"}
        unknown = await _error(rpc, {"provider": "draft"})
        assert unknown.data == {"field": "provider"}, "without a form, the name must be saved"
    finally:
        await rpc.close()


async def test_an_inline_key_is_used_once_and_appears_nowhere(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, tmp_path: Path,
) -> None:
    backend = _start(backend_factory, fake_provider.base_url)
    rpc = await Rpc.open(backend.port, backend.token, name="form")
    try:
        ok = await rpc.call("provider.test", {"provider": "main", "provider_config": {},
                                              "api_key": INLINE_KEY + "\n"})
        assert ok["ok"] is True, ok
        assert fake_provider.snapshot()[-1].authorization == f"Bearer {INLINE_KEY}", "trimmed, used"

        fake_provider.script(Reply.http_error(401, f"Incorrect API key provided: {INLINE_KEY}"))
        refused = await rpc.call("provider.test", {"provider": "main", "api_key": INLINE_KEY})
        assert refused["error"]["kind"] == "auth"
        assert INLINE_KEY not in json.dumps(refused), "the server's echo of the key is redacted"

        again = await rpc.call("provider.test", {"provider": "main"})
        assert again["ok"] is True
        assert fake_provider.snapshot()[-1].authorization is None, "not kept for the next test"
        sid = await create_session(rpc, cwd=str(tmp_path))
        _, done = await run_turn(rpc, sid, "hello")
        assert done["data"]["status"] == "completed"
        assert fake_provider.snapshot()[-1].authorization is None, "nor for turns"
        config = await rpc.call("config.get")
        assert config["providers"]["main"]["api_key"] == "unset"

        # Refused params never quote the key, in the error or the log.
        empty = await _error(rpc, {"provider": "main", "api_key": "  \n"})
        assert (empty.code, empty.data) == (-32602, {"field": "api_key"})
        huge = await _error(rpc, {"provider": "main", "api_key": INLINE_KEY * 300})
        assert huge.data == {"field": "api_key"}
        assert INLINE_KEY not in huge.message
        confused = await _error(rpc, {"provider": "main", INLINE_KEY: "oops"})
        assert confused.data == {"field": ""}, "an unknown field is not named: it may be the key"
        nosuch = await _error(rpc, {"provider": "nosuch", "api_key": INLINE_KEY})
        assert nosuch.data == {"field": "provider"}
        unnamed = await _error(rpc, {"api_key": INLINE_KEY})
        assert unnamed.data == {"field": "provider"}
    finally:
        await rpc.close()

    assert not (backend.data_dir / "secrets.json").exists(), "nothing was stored"
    wire = json.dumps(rpc.events) + json.dumps(rpc.responses)
    assert INLINE_KEY not in wire, "no event, result or error carries the key"
    assert _files_holding(backend.data_dir, INLINE_KEY.encode()) == []
    assert list((backend.data_dir / "logs").glob("*")), "there were logs to check"
    backend.terminate()  # stderr flushed, WAL checkpointed
    assert _files_holding(backend.data_dir, INLINE_KEY.encode()) == []
    assert INLINE_KEY.encode() not in backend.store_dump()


async def test_an_admin_token_cannot_send_the_stored_key_elsewhere(
    backend_factory: BackendFactory, fake_provider: FakeOpenAI, failing_provider: FakeOpenAI,
) -> None:
    """An admin token (not the owner) points a test, or the saved provider, at its own
    listener: the stored key never arrives there (issue 32, item 6)."""
    stored = "sk-test-STORED-KEY-0123456789"
    backend = _start(backend_factory, fake_provider.base_url)
    owner = await Rpc.open(backend.port, backend.token, name="owner")
    try:
        await owner.call("secret.set", {"name": "main", "value": stored})
        await owner.call("config.set", {"patch": {"providers": {"main": {"api_key_secret": "main"}}}})
        assert (await owner.call("provider.test", {"provider": "main"}))["ok"] is True
        assert fake_provider.snapshot()[-1].headers.get("authorization") == f"Bearer {stored}"
        made = await owner.call("token.create", {"scopes": ["admin"], "label": "script"})
        admin = await Rpc.open(backend.port, made["token"], name="admin")
        try:
            thief = failing_provider.base_url  # "their own listener"
            for form in ({"base_url": thief}, {"kind": "anthropic", "base_url": thief},
                         {"base_url": thief, "api_key_secret": "main"}):
                result = await admin.call("provider.test",
                                          {"provider": "main", "provider_config": form})
                assert result["ok"] is False
                assert result["error"]["kind"] == "auth"
                assert result["error"]["message"].startswith("The saved key is sent only to")
            copy = await admin.call("provider.test", {"provider": "copy", "provider_config": {
                "base_url": thief, "model": "m", "api_key_secret": "main"}})
            assert copy["ok"] is False, "a new provider naming the stored secret gets no key"
            for patch in ({"main": {"base_url": thief}},
                          {"copy": {"base_url": thief, "model": "m", "api_key_secret": "main"}}):
                with pytest.raises(RpcError) as refused:
                    await admin.call("config.set", {"patch": {"providers": patch}})
                assert refused.value.code == -32003
            assert failing_provider.snapshot() == [], "nothing reached the other listener"
            # With the key pasted in the form, a test of another address is a test of that key.
            pasted = await admin.call("provider.test", {"provider": "main", "provider_config": {
                "base_url": thief}, "api_key": "sk-test-PASTED"})
            assert pasted["error"]["kind"] == "server_error"
            [arrived] = failing_provider.snapshot()
            assert stored not in json.dumps(arrived.headers)
        finally:
            await admin.close()
    finally:
        await owner.close()
