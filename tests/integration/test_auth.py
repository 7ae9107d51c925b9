"""Who may connect and call: bearer token, Origin, initialize first, params can't claim identity."""

from __future__ import annotations

import asyncio
import json
import stat
import subprocess

import pytest
from websockets.exceptions import InvalidStatus

from .backend_proc import REPO, Backend
from .wire import Connect, Rpc, RpcError, create_session, open_ws

SCOPES = {"read", "submit", "approve", "admin"}
# Refused at the upgrade or by the protocol layer, before any store is asked (a wrong token is
# looked up among the stored ones, so that test runs on both).
BEFORE_THE_STORE = pytest.mark.sqlite_only("refused before any store is asked; the same code on both")


async def _refused_status(backend: Backend, token: str | None, headers: dict[str, str]) -> int:
    try:
        ws = await open_ws(backend.port, token, headers)
    except InvalidStatus as refused:
        return refused.response.status_code
    await ws.close()
    raise AssertionError("the upgrade was accepted")


@BEFORE_THE_STORE
async def test_no_token_is_401(backend: Backend) -> None:
    assert await _refused_status(backend, None, {}) == 401


async def test_wrong_token_is_401(backend: Backend) -> None:
    wrong = backend.token[:-1] + ("A" if backend.token[-1] != "A" else "B")
    assert await _refused_status(backend, wrong, {}) == 401, "one changed character"
    assert await _refused_status(backend, "x", {}) == 401, "a short token"


@BEFORE_THE_STORE
async def test_browser_origin_is_403_even_with_the_right_token(backend: Backend) -> None:
    status = await _refused_status(backend, backend.token, {"Origin": "https://evil.example"})
    assert status == 403
    assert await _refused_status(backend, None, {"Origin": "https://evil.example"}) == 403, (
        "the Origin rule is checked before the token"
    )


@BEFORE_THE_STORE
async def test_first_request_must_be_initialize(connect: Connect) -> None:
    rpc = await connect(initialize=False)
    with pytest.raises(RpcError) as not_init:
        await rpc.call("session.list", {})
    assert not_init.value.code == -32002, f"before initialize: {not_init.value}"
    result = await rpc.initialize()
    assert result["protocol"] == 1


async def test_initialize_reports_the_owner_principal(backend: Backend, connect: Connect) -> None:
    rpc = await connect()
    result = rpc.init_result
    assert result["protocol"] == 1
    assert result["epoch"] == backend.info["epoch"], "initialize and backend.json agree on epoch"
    assert set(result["principal"]["scopes"]) == SCOPES, result["principal"]
    assert {"name", "version"} <= set(result["server"])


@pytest.mark.parametrize("field", ["owner_id", "principal", "scopes", "role"])
@BEFORE_THE_STORE
async def test_identity_in_params_is_an_unknown_param(connect: Connect, field: str) -> None:
    rpc = await connect()
    with pytest.raises(RpcError) as bad:
        await rpc.call("session.create", {field: "someone-else"})
    assert bad.value.code == -32602, f"{field} in params: {bad.value}"
    assert bad.value.data.get("field") == field, bad.value.data

    sid = await create_session(rpc)
    params = {"session_id": sid, "request_id": "r1", "text": "hi", field: "admin"}
    with pytest.raises(RpcError) as bad_submit:
        await rpc.call("prompt.submit", params)
    assert bad_submit.value.code == -32602
    assert bad_submit.value.data.get("field") == field
    receipts = (await rpc.call("admission.list", {"session_id": sid}))["receipts"]
    assert receipts == [], "a refused submit admits nothing"


def test_backend_json_is_private_and_complete(backend: Backend) -> None:
    path = backend.data_dir / "backend.json"
    mode = stat.S_IMODE(path.stat().st_mode)
    assert mode == 0o600, f"backend.json mode is {oct(mode)}"
    info = json.loads(path.read_text())
    assert set(info) >= {"pid", "port", "token", "protocol", "epoch", "started_at"}, info
    assert info["pid"] == backend.pid
    assert info["port"] == backend.port
    assert info["protocol"] == 1
    assert isinstance(info["epoch"], int)
    assert len(info["token"]) >= 43, "token of 43+ url-safe characters"
    assert backend.stdout_lines == [f"TURNKEY_BACKEND_READY port={backend.port}"], (
        f"exactly one READY line on stdout: {backend.stdout_lines}"
    )


async def test_second_serve_on_the_same_dir_exits_3(backend: Backend) -> None:
    second = await asyncio.to_thread(
        subprocess.run,
        backend.command(),
        cwd=REPO,
        env=backend.env(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    output = second.stdout + second.stderr
    assert second.returncode == 3, f"second serve: rc={second.returncode}\n{output}"
    assert "TURNKEY_BACKEND_READY" not in second.stdout
    assert str(backend.pid) in output, f"the message names the running pid: {output!r}"
    assert str(backend.port) in output, f"the message names the running port: {output!r}"
    assert backend.alive(), "the first backend keeps running"
    rpc = await Rpc.open(backend.port, backend.token)
    await rpc.call("session.list", {})
    await rpc.close()
