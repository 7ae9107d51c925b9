"""Scoped tokens end to end: minted by the owner, each call and event checked against the
token's scopes, revocation closing open connections, secrets kept off the disk, restarts."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus

from backend.ids import instant
from shared.errors import ErrorCode
from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend
from .wire import (
    Connect,
    Json,
    Rpc,
    RpcError,
    create_session,
    is_event,
    open_ws,
    run_turn,
    submit,
    terminal,
    wait_complete,
    wait_settled,
)

FORBIDDEN = ErrorCode.FORBIDDEN
# One call per scope, with params that would be invalid: scope is checked before params.
NEEDS: dict[str, tuple[str, dict[str, Any]]] = {
    "read": ("session.list", {"limit": "many"}),
    "submit": ("prompt.submit", {"session_id": 1}),
    "approve": ("approval.respond", {"approval_id": "apr_x", "decision": "maybe"}),
    "admin": ("config.set", {"patch": "nope"}),
}


async def mint(owner: Rpc, scopes: list[str], label: str = "test") -> Json:
    return await owner.call("token.create", {"scopes": scopes, "label": label})


async def refused(backend: Backend, token: str) -> int:
    """The HTTP status of an upgrade with `token` (it must be refused)."""
    try:
        ws = await open_ws(backend.port, token)
    except InvalidStatus as exc:
        return exc.response.status_code
    await ws.close()
    raise AssertionError("the upgrade was accepted")


async def error_of(rpc: Rpc, method: str, params: dict[str, Any]) -> RpcError:
    with pytest.raises(RpcError) as caught:
        await rpc.call(method, params)
    return caught.value


async def assert_allowed_only(rpc: Rpc, scopes: set[str]) -> None:
    """Each scope's sample call gets -32003 exactly when the token lacks that scope."""
    for scope, (method, params) in NEEDS.items():
        error = await error_of(rpc, method, params)
        if scope in scopes:
            assert error.code == -32602, f"{method} with {scope}: {error}"
        else:
            assert error.code == FORBIDDEN, f"{method} without {scope}: {error}"
            assert scope in error.message


async def test_a_read_token_reads_and_sees_events_but_changes_nothing(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    owner = await connect(name="owner")
    made = await mint(owner, ["read"], "dashboard")
    assert set(made) == {"token_id", "token", "scopes", "label"}, made
    assert made["scopes"] == ["read"]
    assert made["label"] == "dashboard"
    assert made["token"] != backend.token
    assert len(made["token"]) >= 43

    reader = await connect(token=made["token"], name="reader")
    assert reader.init_result["principal"] == {"token_id": made["token_id"], "scopes": ["read"]}
    sid = await create_session(owner)
    await reader.call("session.subscribe", {"session_id": sid})
    fake_provider.script(Reply(deltas=["seen ", "by all"]))
    receipt, _ = await run_turn(owner, sid, "hello")
    done = await wait_complete(reader, receipt["admission_id"])
    assert done["data"]["text"] == "seen by all"
    listed = (await reader.call("session.list", {}))["sessions"]
    assert [s["session_id"] for s in listed] == [sid]
    assert len((await reader.call("session.messages", {"session_id": sid}))["messages"]) == 2

    await assert_allowed_only(reader, {"read"})
    for method in ("token.create", "token.list", "token.revoke", "config.get", "shutdown",
                   "session.create", "turn.interrupt", "rules.delete"):
        assert (await error_of(reader, method, {})).code == FORBIDDEN, method
    assert backend.alive()


async def test_a_submit_token_submits_but_cannot_approve_and_is_sent_no_events(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    owner = await connect(name="owner")
    submitter = await connect(token=(await mint(owner, ["submit"], "cron"))["token"],
                              name="submitter")
    assert submitter.init_result["principal"]["scopes"] == ["submit"]
    await assert_allowed_only(submitter, {"submit"})

    sid = await create_session(submitter)
    await owner.call("session.subscribe", {"session_id": sid})
    fake_provider.script(Reply(deltas=["done"]))
    receipt = await submit(submitter, sid, "nightly job")
    assert receipt["status"] in {"queued", "started"}
    await wait_settled(owner, receipt["admission_id"])
    assert (await error_of(submitter, "admission.get",
                           {"admission_id": receipt["admission_id"]})).code == FORBIDDEN
    # Everything of the turn was published before the owner saw it settle; this response is
    # queued after anything the submitter would have been sent.
    await create_session(submitter)
    assert submitter.events == [], "a token without read is sent no events, not even its own"
    assert owner.events, "the owner saw the turn"


async def test_an_approve_token_answers_approvals_and_nothing_else(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "victim").mkdir()
    owner = await connect(name="owner")
    approver = await connect(token=(await mint(owner, ["approve"], "phone"))["token"],
                             name="approver")
    await assert_allowed_only(approver, {"approve"})
    fake_provider.script(Reply.calls(terminal("rm -rf victim")), Reply(deltas=["Left it."]))
    sid = await create_session(owner, cwd=str(tmp_path))
    receipt = await submit(owner, sid, "clean up")
    request = await owner.wait_event(is_event("approval.request"))
    approval_id = request["data"]["approval"]["approval_id"]

    answer = await approver.call("approval.respond",
                                 {"approval_id": approval_id, "decision": "deny"})
    assert answer["approval"]["status"] == "denied"
    done = await wait_complete(owner, receipt["admission_id"])
    assert done["data"]["text"] == "Left it."
    assert (tmp_path / "victim").is_dir()
    assert approver.events == [], "no read: not even the tray's approval broadcasts"


async def test_only_the_owner_mints_and_an_admin_token_manages_the_rest(
    backend: Backend, connect: Connect
) -> None:
    owner = await connect(name="owner")
    admin_made = await mint(owner, ["admin"], "admin script")
    admin = await connect(token=admin_made["token"], name="admin")
    await assert_allowed_only(admin, {"admin"})
    for params in ({"scopes": ["read"], "label": "x"}, {}, {"bogus": 1}):
        error = await error_of(admin, "token.create", params)
        assert error.code == FORBIDDEN, f"an admin token minting with {params}: {error}"
        assert "owner" in error.message

    reader_made = await mint(owner, ["read"], "reader")
    listed = (await admin.call("token.list", {}))["tokens"]
    assert [t["token_id"] for t in listed] == [admin_made["token_id"], reader_made["token_id"]]
    assert set(listed[0]) == {"token_id", "label", "scopes", "created_at", "revoked",
                              "revoked_at"}, "never the secret or its hash"
    assert listed[1]["scopes"] == ["read"]
    assert listed[1]["revoked"] is False

    assert await admin.call("token.revoke", {"token_id": reader_made["token_id"]}) == {}
    listed = (await admin.call("token.list", {}))["tokens"]
    assert listed[1]["revoked"] is True
    assert listed[1]["revoked_at"]
    changed = await admin.call("config.set", {"patch": {"approvals": {"timeout_s": 120}}})
    assert changed["approvals"]["timeout_s"] == 120


async def test_revoking_closes_its_connections_with_1008_and_it_no_longer_connects(
    backend: Backend, connect: Connect
) -> None:
    owner = await connect(name="owner")
    made = await mint(owner, ["read"], "revoked soon")
    other = await mint(owner, ["read"], "stays")
    first = await connect(token=made["token"], name="first")
    second = await connect(token=made["token"], name="second")
    bystander = await connect(token=other["token"], name="bystander")

    assert await owner.call("token.revoke", {"token_id": made["token_id"]}) == {}
    assert await first.wait_closed() == 1008
    assert await second.wait_closed() == 1008
    assert await refused(backend, made["token"]) == 401
    assert (await bystander.call("session.list", {}))["sessions"] == []
    assert await owner.call("token.revoke", {"token_id": made["token_id"]}) == {}, "idempotent"

    # An admin token revoking itself gets its answer, then the close.
    admin_made = await mint(owner, ["admin"], "self-revoking")
    admin = await connect(token=admin_made["token"], name="admin")
    assert await admin.call("token.revoke", {"token_id": admin_made["token_id"]}) == {}
    assert await admin.wait_closed() == 1008
    assert await refused(backend, admin_made["token"]) == 401


async def test_token_params_are_checked(backend: Backend, connect: Connect) -> None:
    owner = await connect()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"scopes": [], "label": "x"}, "scopes"),
        ({"scopes": ["root"], "label": "x"}, "scopes.0"),
        ({"scopes": ["read", "sudo"], "label": "x"}, "scopes.1"),
        ({"scopes": "read", "label": "x"}, "scopes"),
        ({"scopes": ["read"]}, "label"),
        ({"scopes": ["read"], "label": ""}, "label"),
        ({"scopes": ["read"], "label": "   "}, "label"),
        ({"scopes": ["read"], "label": "x" * 101}, "label"),
        ({"scopes": ["read"], "label": "x", "principal": "owner"}, "principal"),
        ({"scopes": ["read"], "label": "x", "token_id": "owner"}, "token_id"),
    ]
    for params, field in cases:
        error = await error_of(owner, "token.create", params)
        assert (error.code, error.data.get("field")) == (-32602, field), f"{params}: {error}"
    assert (await owner.call("token.list", {}))["tokens"] == [], "nothing was minted"

    missing = await error_of(owner, "token.revoke", {"token_id": "tok_nope"})
    assert (missing.code, missing.data.get("kind")) == (-32004, "token")
    itself = await error_of(owner, "token.revoke", {"token_id": "owner"})
    assert (itself.code, itself.data.get("field")) == (-32602, "token_id")
    extra = await error_of(owner, "token.revoke", {"token_id": "tok_nope", "scopes": ["admin"]})
    assert (extra.code, extra.data.get("field")) == (-32602, "scopes")

    reader = await connect(token=(await mint(owner, ["read"]))["token"], name="reader")
    for field in ("scopes", "principal", "token_id", "role"):
        claimed = await error_of(reader, "session.list", {field: "admin"})
        assert (claimed.code, claimed.data.get("field")) == (-32602, field)
    await assert_allowed_only(reader, {"read"})


async def test_the_secret_is_never_written_down(backend: Backend, connect: Connect) -> None:
    owner = await connect()
    made = await mint(owner, ["read", "submit"], "secret keeper")
    user = await connect(token=made["token"], name="user")
    await create_session(user)
    await error_of(user, "config.get", {})  # a forbidden call is logged
    assert await refused(backend, made["token"][:-2]) == 401
    await owner.call("token.revoke", {"token_id": made["token_id"]})
    assert await user.wait_closed() == 1008
    assert await refused(backend, made["token"]) == 401

    files = [p for p in backend.data_dir.rglob("*") if p.is_file()]
    assert any(p.name == "backend.log" for p in files), files
    stored = backend.store_dump()
    assert hashlib.sha256(made["token"].encode()).hexdigest().encode() in stored, (
        "the scan reads the table the hash is in")
    assert made["token"].encode() not in stored, "the secret is in the store"
    for path in files:
        assert made["token"].encode() not in path.read_bytes(), f"the secret is in {path}"


async def test_tokens_survive_a_restart(backend: Backend, connect: Connect) -> None:
    owner = await connect(name="owner")
    kept = await mint(owner, ["read", "approve"], "kept")
    revoked = await mint(owner, ["read"], "revoked")
    await owner.call("token.revoke", {"token_id": revoked["token_id"]})
    listed = (await owner.call("token.list", {}))["tokens"]
    old_owner_token = backend.token

    backend.restart()
    assert backend.token != old_owner_token, "the owner token is made afresh at each start"
    assert await refused(backend, old_owner_token) == 401
    assert await refused(backend, revoked["token"]) == 401
    again = await connect(token=kept["token"], name="kept")
    assert again.init_result["principal"] == {"token_id": kept["token_id"],
                                              "scopes": ["read", "approve"]}
    owner = await connect(name="owner again")
    assert (await owner.call("token.list", {}))["tokens"] == listed


async def test_new_scopes_close_the_old_connections_and_apply_on_reconnecting(
    backend: Backend, connect: Connect
) -> None:
    owner = await connect(name="owner")
    made = await mint(owner, ["read", "submit"], "narrowed")
    held = await connect(token=made["token"], name="held")
    admin = await connect(token=(await mint(owner, ["admin"], "admin"))["token"], name="admin")

    same = await owner.call("token.update", {"token_id": made["token_id"],
                                             "scopes": ["submit", "read"]})
    assert same["token"]["scopes"] == ["read", "submit"]
    assert (await held.call("session.list", {}))["sessions"] == [], "the same scopes: kept"
    refused_admin = await error_of(admin, "token.update", {"token_id": made["token_id"],
                                                           "scopes": ["read", "admin"]})
    assert refused_admin.code == FORBIDDEN
    assert "owner" in refused_admin.message

    changed = await owner.call("token.update", {"token_id": made["token_id"], "scopes": ["read"]})
    assert set(changed["token"]) == {"token_id", "label", "scopes", "created_at", "revoked",
                                     "revoked_at"}, "as token.list shows it; never the secret"
    assert changed["token"]["scopes"] == ["read"]
    assert await held.wait_closed() == 1008
    again = await connect(token=made["token"], name="again")
    assert again.init_result["principal"] == {"token_id": made["token_id"], "scopes": ["read"]}
    await assert_allowed_only(again, {"read"})
    listed = (await owner.call("token.list", {}))["tokens"]
    assert [t["scopes"] for t in listed if t["token_id"] == made["token_id"]] == [["read"]]


async def test_token_update_params_are_checked(backend: Backend, connect: Connect) -> None:
    owner = await connect()
    made = await mint(owner, ["read"])
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"token_id": made["token_id"], "scopes": []}, -32602, "scopes"),
        ({"token_id": made["token_id"], "scopes": ["root"]}, -32602, "scopes.0"),
        ({"token_id": made["token_id"]}, -32602, "scopes"),
        ({"scopes": ["read"]}, -32602, "token_id"),
        ({"token_id": made["token_id"], "scopes": ["read"], "label": "x"}, -32602, "label"),
        ({"token_id": "owner", "scopes": ["read"]}, -32602, "token_id"),
    ]
    for params, code, field in cases:
        error = await error_of(owner, "token.update", params)
        assert (error.code, error.data.get("field")) == (code, field), f"{params}: {error}"
    missing = await error_of(owner, "token.update", {"token_id": "tok_nope", "scopes": ["read"]})
    assert (missing.code, missing.data.get("kind")) == (-32004, "token")
    await owner.call("token.revoke", {"token_id": made["token_id"]})
    gone = await error_of(owner, "token.update", {"token_id": made["token_id"],
                                                  "scopes": ["admin"]})
    assert (gone.code, gone.data.get("field")) == (-32602, "token_id")
    assert "revoked" in gone.message
    assert "token.create" in gone.message


async def test_an_expiring_token_closes_its_connections_and_connects_no_more(
    backend: Backend, connect: Connect
) -> None:
    owner = await connect(name="owner")
    for bad in (0, -1, 2.5, "60", 10 * 365 * 24 * 3600 + 1):
        error = await error_of(owner, "token.create", {"scopes": ["read"], "label": "x",
                                                       "expires_in_s": bad})
        assert (error.code, error.data.get("field")) == (-32602, "expires_in_s"), f"{bad}: {error}"
    made = await mint(owner, ["read"], "brief")
    assert "expires_at" not in made, "no expiry asked: none"
    brief = await owner.call("token.create", {"scopes": ["read"], "label": "brief",
                                              "expires_in_s": 2})
    listed = {t["token_id"]: t for t in (await owner.call("token.list", {}))["tokens"]}
    assert listed[brief["token_id"]]["expires_at"] == brief["expires_at"]
    assert "expires_at" not in listed[made["token_id"]]

    held = await connect(token=brief["token"], name="held")
    assert held.init_result["principal"]["expires_at"] == brief["expires_at"]
    assert (await held.call("session.list", {}))["sessions"] == []
    assert await held.wait_closed() == 1008
    assert await refused(backend, brief["token"]) == 401
    still = await connect(token=made["token"], name="still")
    assert (await still.call("session.list", {}))["sessions"] == []


def test_the_cli_mints_an_expiring_token_lists_it_and_changes_its_scopes(
    backend: Backend,
) -> None:
    def turnkey(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "desktop.cli", "--data-dir",
                               str(backend.data_dir), "token", *args], env=backend.env(),
                              capture_output=True, text=True, timeout=60, check=False)

    wrong = turnkey("create", "--scopes", "read", "--label", "x", "--expires-in", "2 weeks")
    assert wrong.returncode == 2
    assert "30m, 2h, 7d" in wrong.stderr
    made = turnkey("create", "--scopes", "read,submit", "--label", "laptop", "--expires-in", "2h")
    assert made.returncode == 0, made.stderr
    assert ", until 20" in made.stderr
    token_id = made.stderr.split()[1]
    assert token_id.startswith("tok_"), made.stderr
    [row] = backend.query("SELECT expires_at, created_at FROM tokens WHERE token_id = ?",
                          (token_id,))
    lifetime = instant(row["expires_at"]) - instant(row["created_at"])
    assert 7199 <= lifetime <= 7201, row

    narrowed = turnkey("scopes", token_id, "read")
    assert narrowed.returncode == 0, narrowed.stderr
    assert f"{token_id} now has read" in narrowed.stdout
    listed = turnkey("list")
    assert listed.returncode == 0, listed.stderr
    [line] = [x for x in listed.stdout.splitlines() if x.startswith(token_id)]
    assert f"expires {row['expires_at'][:19]}" in line
    assert line.split()[3] == "read", line
    bad = turnkey("scopes", token_id, "read,root")
    assert bad.returncode == 1
    assert "scopes" in bad.stderr
