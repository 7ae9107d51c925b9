"""Bad frames, params and providers get the contract's answer, and the backend keeps serving."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from websockets.exceptions import ConnectionClosed

from tests.fakes.openai_server import FakeOpenAI, Reply

from .backend_proc import Backend, BackendFactory
from .wire import (
    Connect,
    Json,
    Rpc,
    RpcError,
    assert_backend_healthy,
    create_session,
    get_receipt,
    submit,
    wait_complete,
    wait_settled,
)

MAX_FRAME = 4 * 1024 * 1024

# Parsed and refused before anything reaches the store: the same code on both stores.
PROTOCOL_ONLY = pytest.mark.sqlite_only("a frame or params the protocol layer refuses; no store is involved")


def _error_code(resp: object) -> int | None:
    if isinstance(resp, dict) and isinstance(resp.get("error"), dict):
        return int(resp["error"].get("code", 0))
    return None


async def _raw_error(rpc: Rpc, frame: str, code: int) -> Json:
    """Send a raw text frame; return the error response to it, which must carry ``code``."""
    before = len(rpc.responses)
    await rpc.send_raw(frame)

    def answers() -> list[object]:
        return list(rpc.responses[before:])

    try:
        await rpc.wait_until(lambda: bool(answers()), timeout=10, what="response")
    except AssertionError:
        raise AssertionError(f"no response to {frame[:80]!r} (closed code {rpc.close_code})")
    resp = answers()[0]
    assert _error_code(resp) == code, f"{frame[:80]!r}: expected error {code}, got {resp}"
    assert isinstance(resp, dict)
    assert resp.get("jsonrpc") == "2.0", resp
    return resp


async def _call_error(rpc: Rpc, method: str, params: Json) -> RpcError:
    with pytest.raises(RpcError) as err:
        await rpc.call(method, params)
    return err.value


@PROTOCOL_ONLY
async def test_malformed_json_is_a_parse_error_and_the_connection_stays(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    rpc = await connect()
    resp = await _raw_error(rpc, '{"jsonrpc": "2.0", "id": 7, "method": ', -32700)
    assert resp.get("id") is None, "a parse error has id null"
    await _raw_error(rpc, "\x00\x01 not json at all", -32700)
    assert "sessions" in await rpc.call("session.list", {}), "the same connection still works"
    await assert_backend_healthy(backend, fake_provider)


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param({"jsonrpc": "2.0", "id": None, "method": "session.list"}, id="id-null"),
        pytest.param([{"jsonrpc": "2.0", "id": 1, "method": "session.list"}], id="batch"),
        pytest.param([], id="empty-batch"),
        pytest.param({"id": 2, "method": "session.list"}, id="no-jsonrpc"),
        pytest.param({"jsonrpc": "1.0", "id": 3, "method": "session.list"}, id="jsonrpc-1.0"),
        pytest.param({"jsonrpc": "2.0", "id": 4, "method": 42}, id="method-not-string"),
        pytest.param(42, id="scalar"),
    ],
)
@PROTOCOL_ONLY
async def test_not_jsonrpc_shaped_is_invalid_request(
    frame: object, backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    rpc = await connect()
    await _raw_error(rpc, json.dumps(frame), -32600)
    assert all(not isinstance(r, list) for r in rpc.responses), "no batch responses"
    assert "sessions" in await rpc.call("session.list", {})
    await assert_backend_healthy(backend, fake_provider)


async def test_notification_is_processed_without_a_response(connect: Connect) -> None:
    rpc = await connect()
    title = "made by a notification"
    note = {"jsonrpc": "2.0", "method": "session.create", "params": {"title": title}}
    await rpc.send_raw(json.dumps(note))
    for _ in range(100):
        sessions = (await rpc.call("session.list", {}))["sessions"]
        if any(s["title"] == title for s in sessions):
            break
        await asyncio.sleep(0.05)
    assert any(s["title"] == title for s in sessions), "the notification was not processed"
    assert all("id" in r and r["id"] is not None for r in rpc.responses), rpc.responses


@PROTOCOL_ONLY
async def test_unknown_method_and_wrong_param_types(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    rpc = await connect()
    err = await _call_error(rpc, "session.explode", {})
    assert err.code == -32601, err
    err = await _call_error(rpc, "session.list", {"limit": "x"})
    assert err.code == -32602, err
    assert err.data.get("field") == "limit", err.data
    err = await _call_error(rpc, "session.list", {"limti": 5})
    assert err.code == -32602, "unknown params are errors, so typos show"
    assert err.data.get("field") == "limti", err.data
    sid = await create_session(rpc)
    params = {"session_id": sid, "request_id": 5, "text": "hi"}
    err = await _call_error(rpc, "prompt.submit", params)
    assert err.code == -32602, err
    assert err.data.get("field") == "request_id", err.data
    await assert_backend_healthy(backend, fake_provider)


async def test_missing_things_are_not_found(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    rpc = await connect()
    err = await _call_error(rpc, "session.get", {"session_id": "no-such-session"})
    assert err.code == -32004, err
    assert err.data.get("kind") == "session", err.data
    params = {"session_id": "no-such-session", "request_id": "r", "text": "hi"}
    err = await _call_error(rpc, "prompt.submit", params)
    assert err.code == -32004, err
    assert err.data.get("kind") == "session", err.data
    err = await _call_error(rpc, "admission.get", {"admission_id": "no-such-admission"})
    assert err.code == -32004, err
    assert err.data.get("kind") == "admission", err.data
    await assert_backend_healthy(backend, fake_provider)


async def test_empty_prompt_is_invalid(backend: Backend, connect: Connect, fake_provider: FakeOpenAI) -> None:
    rpc = await connect()
    sid = await create_session(rpc)
    err = await _call_error(rpc, "prompt.submit", {"session_id": sid, "request_id": "e", "text": ""})
    assert err.code == -32602, err
    assert err.data.get("field") == "text", err.data
    assert (await rpc.call("admission.list", {"session_id": sid}))["receipts"] == []
    assert fake_provider.snapshot() == []
    await assert_backend_healthy(backend, fake_provider)


async def test_huge_prompt_is_capped_or_refused(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    rpc = await connect()
    sid = await create_session(rpc)
    text = "y" * (2 * 1024 * 1024)  # over the 1 MiB text cap, under the 4 MiB frame limit
    resp = await rpc.request("prompt.submit", {"session_id": sid, "request_id": "big", "text": text})
    if "error" in resp:
        assert resp["error"]["code"] == -32602, resp["error"]
        assert resp["error"]["data"]["field"] == "text", resp["error"]
    else:
        complete = await wait_complete(rpc, resp["result"]["receipt"]["admission_id"])
        assert complete["data"]["status"] in ("completed", "failed"), complete["data"]
        [req] = fake_provider.snapshot()
        assert len(req.last_user_text.encode()) <= 1024 * 1024, "text is capped at 1 MiB"
    assert not rpc.closed.is_set(), "a big but legal frame keeps the connection"
    await assert_backend_healthy(backend, fake_provider)


def _has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


async def test_lone_surrogate_is_accepted_and_cleaned(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    rpc = await connect()
    sid = await create_session(rpc)
    params = {"session_id": sid, "request_id": "sur", "text": "before \ud800 after"}
    frame = json.dumps({"jsonrpc": "2.0", "id": "sur-1", "method": "prompt.submit", "params": params})
    assert "\\ud800" in frame, "sent as a JSON escape"
    await rpc.send_raw(frame)
    resp = await rpc.wait_response(lambda r: isinstance(r, dict) and r.get("id") == "sur-1")
    assert "result" in resp, f"a lone surrogate is accepted: {resp}"
    adm = resp["result"]["receipt"]["admission_id"]
    complete = await wait_complete(rpc, adm)
    assert complete["data"]["status"] == "completed", complete["data"]
    [req] = fake_provider.snapshot()
    sent = req.last_user_text
    assert "before" in sent, sent
    assert "after" in sent, sent
    assert not _has_surrogate(sent), f"a surrogate reached the provider: {sent!r}"
    rows = (await rpc.call("session.messages", {"session_id": sid}))["messages"]
    assert not _has_surrogate(rows[0]["content"]), rows[0]
    await assert_backend_healthy(backend, fake_provider)


@PROTOCOL_ONLY
async def test_binary_frame_closes_with_1003(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    bystander = await connect(name="bystander")
    rpc = await connect()
    await rpc.send_raw(b"\x00\x01binary")
    assert await rpc.wait_closed() == 1003
    assert "sessions" in await bystander.call("session.list", {}), "others keep being served"
    await assert_backend_healthy(backend, fake_provider)


@pytest.mark.parametrize("initialized", [True, False])
@PROTOCOL_ONLY
async def test_oversized_frame_closes_with_1009(
    initialized: bool, backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    bystander = await connect(name="bystander")
    rpc = await connect(initialize=initialized)
    params = {"title": "x" * (MAX_FRAME + 64 * 1024)}
    try:
        frame = {"jsonrpc": "2.0", "id": 1, "method": "session.create", "params": params}
        await rpc.send_raw(json.dumps(frame))
    except ConnectionClosed:
        pass  # closed while we were still sending: fine, the code is what matters
    assert await rpc.wait_closed() == 1009
    assert "sessions" in await bystander.call("session.list", {}), "others keep being served"
    await assert_backend_healthy(backend, fake_provider)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _assert_failed_turn(rpc: Rpc, sid: str, text: str) -> Json:
    receipt = await submit(rpc, sid, text)
    complete = await wait_complete(rpc, receipt["admission_id"], timeout=90)
    data = complete["data"]
    assert data["status"] == "failed", f"the turn must fail: {data}"
    reason = data.get("failure_reason")
    assert isinstance(reason, str), f"failure_reason must be given: {data}"
    assert reason.strip(), f"failure_reason must be readable: {data}"
    assert "Traceback" not in reason, reason
    await wait_settled(rpc, receipt["admission_id"], timeout=30)
    final = await get_receipt(rpc, receipt["admission_id"])
    assert (final["status"], final.get("outcome")) == ("terminal", "failed"), final
    rows = (await rpc.call("session.messages", {"session_id": sid}))["messages"]
    assert any(r["role"] == "user" and r["content"] == text for r in rows), (
        f"accepted input is never lost: {rows}"
    )
    return dict(data)


async def test_unreachable_provider_fails_the_turn(backend_factory: BackendFactory) -> None:
    port = _closed_port()
    backend = backend_factory(f"http://127.0.0.1:{port}/v1")
    rpc = await Rpc.open(backend.port, backend.token)
    try:
        sid = await create_session(rpc)
        await _assert_failed_turn(rpc, sid, "anyone there?")
        assert "sessions" in await rpc.call("session.list", {})
    finally:
        await rpc.close()
    revived = FakeOpenAI(port=port)  # the provider comes back on the same address
    try:
        await assert_backend_healthy(backend, revived)
    finally:
        revived.close()
    assert revived.errors == []


BROKEN_SSE = b'data: {"choices": [{"delta": {"content": "x"\n\ndata: [DONE]\n\n'
ERROR_IN_STREAM = b'data: {"error": {"message": "model overloaded", "type": "server_error"}}\n\n'


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(Reply.http_error(500, "exploded", **{"Retry-After": "0"}), id="http-500"),
        pytest.param(Reply.http_error(401, "invalid api key"), id="http-401"),
        pytest.param(
            Reply(raw=b"<html><body>Bad gateway</body></html>", content_type="text/html"),
            id="html",
        ),
        pytest.param(Reply(deltas=["half ", "an answer"], truncate=True), id="truncated"),
        pytest.param(Reply(raw=BROKEN_SSE), id="malformed-sse"),
        pytest.param(Reply(raw=ERROR_IN_STREAM), id="error-event-in-stream"),
    ],
)
async def test_broken_provider_fails_the_turn(
    reply: Reply, backend: Backend, connect: Connect, fake_provider: FakeOpenAI
) -> None:
    fake_provider.routes["doomed"] = reply
    rpc = await connect()
    sid = await create_session(rpc)
    await _assert_failed_turn(rpc, sid, "doomed question")
    await assert_backend_healthy(backend, fake_provider)
