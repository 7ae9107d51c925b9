"""A Matrix door set up over the wire, as the app's Messaging form does it: `door.test` checks a
homeserver and an access token for real against Synapse (tests/matrix_server.py), saving
nothing; `door.set` writes `[doors.matrix]` and keeps the token in the secrets store, and the
door starts at once.  The token is never in config.toml, the store, the logs or an error."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.matrix_client import wait_until
from tests.matrix_server import MatrixServer
from tests.pg_server import free_port

from .backend_proc import Backend, BackendFactory
from .wire import Json, Rpc, RpcError

WAIT_S = 40.0


def _start(factory: BackendFactory, fake: FakeOpenAI) -> Backend:
    """A backend without a keyring: secrets go to DIR/secrets.json (0600), which the test reads."""
    backend = factory(fake.base_url, "idle_exit_minutes = 0\n", start=False)
    backend.extra_env["TURNKEY_NO_KEYRING"] = "1"
    backend.start()
    return backend


def _holding(root: Path, needle: str, skip: tuple[str, ...] = ()) -> list[str]:
    """Files under `root` (the data folder: config, database, WAL, logs) that contain `needle`."""
    return [str(p.relative_to(root)) for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in skip and needle.encode() in p.read_bytes()]


async def _refusal(rpc: Rpc, method: str, params: Json) -> RpcError:
    with pytest.raises(RpcError) as caught:
        await rpc.call(method, params)
    return caught.value


async def test_door_test_says_what_worked_and_what_failed(
        matrix: MatrixServer, backend_factory: BackendFactory, fake_provider: FakeOpenAI) -> None:
    backend = _start(backend_factory, fake_provider)
    bot, other = matrix.register("agent"), matrix.register("someone")
    before = (backend.data_dir / "config.toml").read_bytes()
    rpc = await Rpc.open(backend.port, backend.token, name="form")
    try:
        form = {"homeserver": matrix.url + "/", "user_id": bot.user_id}
        good = await rpc.call("door.test", {**form, "access_token": bot.access_token})
        assert (good["ok"], good["reached"]) == (True, True), good
        assert (good["account"], good["device_id"]) == (bot.user_id, bot.device_id)
        assert "error" not in good

        bad = await rpc.call("door.test", {**form, "access_token": "syt_not_a_real_token"})
        assert (bad["ok"], bad["reached"]) == (False, True), bad
        assert bad["error"].startswith(f"Reached {matrix.url}, but it refused the access token "
                                       "(M_UNKNOWN_TOKEN"), bad
        assert "syt_not_a_real_token" not in json.dumps(bad)

        theirs = await rpc.call("door.test", {**form, "access_token": other.access_token})
        assert (theirs["ok"], theirs["account"]) == (False, other.user_id), theirs
        assert f"belongs to {other.user_id}, not {bot.user_id}" in theirs["error"]

        port = free_port()
        away = await rpc.call("door.test", {**form, "homeserver": f"http://127.0.0.1:{port}",
                                            "access_token": bot.access_token})
        assert (away["ok"], away["reached"]) == (False, False), away
        assert away["error"] == (f"Cannot reach http://127.0.0.1:{port}: connection refused. "
                                 "Check the homeserver URL and that this computer can reach it.")

        elsewhere = await rpc.call("door.test", {**form, "homeserver": f"{matrix.url}/chat",
                                                 "access_token": bot.access_token})
        assert (elsewhere["ok"], elsewhere["reached"]) == (False, False), elsewhere
        assert "not as a Matrix homeserver" in elsewhere["error"]

        # No door saved: there is no stored token to test with.
        none = await _refusal(rpc, "door.test", form)
        assert (none.code, none.data) == (-32602, {"field": "access_token"})
        for field, params in (("homeserver", {**form, "homeserver": "matrix.org"}),
                              ("user_id", {**form, "user_id": "agent"})):
            error = await _refusal(rpc, "door.test", {**params, "access_token": bot.access_token})
            assert (error.code, error.data) == (-32602, {"field": field}), error
            assert bot.access_token not in error.message
    finally:
        await rpc.close()
    assert (backend.data_dir / "config.toml").read_bytes() == before, "nothing was saved"
    assert not (backend.data_dir / "secrets.json").exists()
    for token in (bot.access_token, other.access_token):
        assert not _holding(backend.data_dir, token)
        assert token.encode() not in backend.store_dump()


async def test_door_set_saves_the_door_and_keeps_its_token_in_the_secrets_store(
        matrix: MatrixServer, backend_factory: BackendFactory, fake_provider: FakeOpenAI) -> None:
    backend = _start(backend_factory, fake_provider)
    bot, alice, bob = matrix.register("agent"), matrix.register("alice"), matrix.register("bob")
    rpc = await Rpc.open(backend.port, backend.token, name="form")
    try:
        assert (await rpc.call("door.list"))["doors"] == []
        form = {"homeserver": matrix.url, "user_id": bot.user_id, "allowed_users": [alice.user_id]}
        none = await _refusal(rpc, "door.set", form)
        assert (none.code, none.data) == (-32602, {"field": "access_token"}), "a new door needs one"
        for field, params in (("homeserver", {**form, "homeserver": "ftp://x"}),
                              ("allowed_users.1", {**form, "allowed_users": [alice.user_id, "bob"]})):
            error = await _refusal(rpc, "door.set", {**params, "access_token": bot.access_token})
            assert (error.code, error.data) == (-32602, {"field": field}), error

        saved = await rpc.call("door.set", {**form, "access_token": f" {bot.access_token}\n"})
        assert saved["door"]["name"] == "matrix"
        assert saved["door"]["account"] == bot.user_id
        assert saved["door"]["token_secret"] == "doors.matrix"
        assert saved["stored"] == "file"
        assert "plain text" in saved["warning"]
        await rpc.wait_event(lambda e: e.get("type") == "door.state"
                             and e["data"]["door"]["state"] == "connected", timeout=WAIT_S)
        (door,) = (await rpc.call("door.list"))["doors"]
        assert (door["state"], door["allowed_users"]) == ("connected", [alice.user_id])

        table = tomllib.loads((backend.data_dir / "config.toml").read_text())["doors"]["matrix"]
        assert table == {"homeserver": matrix.url, "user_id": bot.user_id,
                         "allowed_users": [alice.user_id], "enabled": True}
        secrets = json.loads((backend.data_dir / "secrets.json").read_text())
        assert secrets == {"doors.matrix": bot.access_token}
        assert (backend.data_dir / "secrets.json").stat().st_mode & 0o777 == 0o600
        assert _holding(backend.data_dir, bot.access_token) == ["secrets.json"]
        assert bot.access_token.encode() not in backend.store_dump()
        assert bot.access_token not in backend.stderr_tail(10**9)

        # The door works: an allowed user's invitation is accepted.
        client = matrix.client(alice)
        room = client.create_room(invite=[bot.user_id], name="set up in the app")
        wait_until(lambda: bot.user_id in client.joined_members(room), timeout=WAIT_S,
                   what="the door to join")

        # Editing it without a token keeps the stored one; its other keys stay as they were.
        config = backend.data_dir / "config.toml"
        await rpc.call("config.set", {"patch": {"doors": {"matrix": {"edit_interval_s": 0.5}}}})
        edited = await rpc.call("door.set", {**form, "allowed_users": [alice.user_id, bob.user_id,
                                                                       alice.user_id]})
        assert "stored" not in edited
        assert edited["door"]["allowed_users"] == sorted([alice.user_id, bob.user_id])
        table = tomllib.loads(config.read_text())["doors"]["matrix"]
        assert table["allowed_users"] == [alice.user_id, bob.user_id]
        assert table["edit_interval_s"] == 0.5
        assert "access_token" not in config.read_text()
        # The saved door's token is tested where it was saved for, and only there.
        stored = await rpc.call("door.test", {"homeserver": matrix.url, "user_id": bot.user_id})
        assert stored["ok"] is True, stored
        moved = await rpc.call("door.test", {"homeserver": "http://127.0.0.1:9",
                                             "user_id": bot.user_id})
        assert moved == {"ok": False, "reached": False, "error": (
            "The saved access token is sent only to the homeserver it was saved for. Paste the "
            "token in the form to test another homeserver, or save the door first.")}
    finally:
        await rpc.close()
    assert _holding(backend.data_dir, bot.access_token) == ["secrets.json"]
    assert bot.access_token not in backend.stderr_tail(10**9)


async def test_only_the_owner_may_set_a_door_up(
        matrix: MatrixServer, backend_factory: BackendFactory, fake_provider: FakeOpenAI) -> None:
    """A door lets people outside this computer prompt the agent: like loosening approvals,
    only the owner's token (from a process no tool call started) may add one."""
    backend = _start(backend_factory, fake_provider)
    bot = matrix.register("agent")
    owner = await Rpc.open(backend.port, backend.token, name="owner")
    made = await owner.call("token.create", {"scopes": ["admin"], "label": "script"})
    reader = await owner.call("token.create", {"scopes": ["read"], "label": "reader"})
    admin = await Rpc.open(backend.port, made["token"], name="admin")
    read = await Rpc.open(backend.port, reader["token"], name="read")
    try:
        form = {"homeserver": matrix.url, "user_id": bot.user_id, "access_token": bot.access_token}
        refused = await _refusal(admin, "door.set", form)
        assert (refused.code, refused.data) == (-32003, {"fields": ["doors.matrix"]}), refused
        assert bot.access_token not in refused.message
        for method in ("door.test", "door.set"):
            error = await _refusal(read, method, form)
            assert error.code == -32003, error
        assert (await owner.call("door.list"))["doors"] == []
        assert not (backend.data_dir / "secrets.json").exists(), "nothing stored"
        assert "doors" not in tomllib.loads((backend.data_dir / "config.toml").read_text())
    finally:
        for rpc in (admin, read, owner):
            await rpc.close()
