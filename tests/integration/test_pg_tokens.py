"""A token's end reaches every backend on one PostgreSQL database: revoked, expired or given
other scopes through one backend, its connections to the other close with 1008, and a call
sent on them is refused and never runs, even when the other backend was never told (the
token is read from the store again on each call).  The backends are `pair` (conftest.py).
"""

from __future__ import annotations

import asyncio
import time

from websockets.exceptions import ConnectionClosed, InvalidStatus

from backend.server.listener import RECHECK_S
from shared.errors import CloseCode, ErrorCode
from tests.fakes.openai_server import FakeOpenAI

from .backend_proc import Backend
from .wire import Json, Rpc, create_session, open_ws

CLOSED = CloseCode.POLICY_VIOLATION
WAIT_S = 5.0  # generous: the close is expected within about a second


async def _owner(backend: Backend, name: str) -> Rpc:
    return await Rpc.open(backend.port, backend.token, name=name)


async def _mint(owner: Rpc, scopes: list[str], **extra: object) -> Json:
    return await owner.call("token.create", {"scopes": scopes, "label": "shared", **extra})


async def _status(backend: Backend, token: str) -> int:
    """The HTTP status of an upgrade with `token`, which must be refused."""
    try:
        ws = await open_ws(backend.port, token)
    except InvalidStatus as exc:
        return exc.response.status_code
    await ws.close()
    raise AssertionError("the upgrade was accepted")


async def _refused(rpc: Rpc, method: str, params: Json) -> Json | None:
    """Sends one call that must not run: answered -32003 (returned), or the connection closed
    before answering (None)."""
    try:
        response = await rpc.request(method, params, timeout=WAIT_S)
    except (ConnectionError, ConnectionClosed):
        return None
    assert "error" in response, f"{method} was accepted: {response}"
    assert response["error"]["code"] == ErrorCode.FORBIDDEN, response
    return dict(response["error"])


def _admissions_of(backend: Backend, token_id: str) -> int:
    rows = backend.query("SELECT COUNT(*) AS n FROM admissions WHERE principal = ?", (token_id,))
    return int(rows[0]["n"])


async def _no_model_asked(fakes: tuple[FakeOpenAI, FakeOpenAI]) -> None:
    await asyncio.sleep(0.5)  # a turn admitted by mistake would have asked by now
    assert [r.last_user_text for fake in fakes for r in fake.snapshot()] == []


async def test_a_token_revoked_through_one_backend_stops_working_on_the_other(
    pair: tuple[Backend, Backend], fakes: tuple[FakeOpenAI, FakeOpenAI],
) -> None:
    a, b = pair
    owner = await _owner(a, "owner-a")
    made = await _mint(owner, ["read", "submit"])
    sid = await create_session(owner)
    on_b = await Rpc.open(b.port, made["token"], name="token-on-b")
    assert (await on_b.call("session.list", {}))["sessions"], "it works before the revoke"

    assert await owner.call("token.revoke", {"token_id": made["token_id"]}) == {}
    # Sent at once: whether B heard the notice yet or not, the call must not run.
    await _refused(on_b, "prompt.submit", {"session_id": sid, "text": "after the revoke",
                                           "request_id": "r-late"})
    assert await on_b.wait_closed(WAIT_S) == CLOSED
    assert await _status(b, made["token"]) == 401
    assert _admissions_of(a, made["token_id"]) == 0, "the refused prompt was not admitted"
    await _no_model_asked(fakes)
    await owner.close()


async def test_a_revoke_whose_notice_never_came_is_caught_by_the_next_call(
    pair: tuple[Backend, Backend], fakes: tuple[FakeOpenAI, FakeOpenAI],
) -> None:
    """The row is changed by plain SQL, which tells no backend: each finds out on the token's
    next call, refuses it and closes the connection, or on its own look at the tokens of
    its open connections (every RECHECK_S), which closes one that makes no call."""
    a, b = pair
    owner = await _owner(a, "owner-a")
    made = await _mint(owner, ["read", "submit"])
    sid = await create_session(owner)
    on_a = await Rpc.open(a.port, made["token"], name="token-on-a")
    on_b = await Rpc.open(b.port, made["token"], name="token-on-b")
    idle = await Rpc.open(b.port, made["token"], name="idle-on-b")

    a.query("UPDATE tokens SET revoked = 1, revoked_at = ? WHERE token_id = ?",
            ("2026-01-01T00:00:00.000Z", made["token_id"]))
    # At once: each backend's own look skips connections that made a call in the last
    # RECHECK_S (their calls check them), so these two are found out by their call.
    for rpc in (on_a, on_b):
        error = await _refused(rpc, "prompt.submit", {"session_id": sid, "text": "unseen",
                                                      "request_id": f"r-{rpc.name}"})
        assert error is not None, "refused with an answer"
        assert "was revoked" in error["message"], error
        assert await rpc.wait_closed(WAIT_S) == CLOSED
    # A connection that makes no call is closed by the backend's own look at its tokens,
    # once it has made none for RECHECK_S.
    assert await idle.wait_closed(2 * RECHECK_S + WAIT_S) == CLOSED
    assert _admissions_of(a, made["token_id"]) == 0
    await _no_model_asked(fakes)
    for backend in pair:
        assert await _status(backend, made["token"]) == 401
    await owner.close()


async def test_an_expired_token_is_closed_on_every_backend_and_refused_after(
    pair: tuple[Backend, Backend],
) -> None:
    owner = await _owner(pair[0], "owner-a")
    made = await _mint(owner, ["read"], expires_in_s=3)
    expires = made["expires_at"]
    listed = {t["token_id"]: t for t in (await owner.call("token.list", {}))["tokens"]}
    assert listed[made["token_id"]]["expires_at"] == expires
    opened = [await Rpc.open(backend.port, made["token"], name=f"on-{i}")
              for i, backend in enumerate(pair)]
    for rpc in opened:
        assert rpc.init_result["principal"]["expires_at"] == expires
        await rpc.call("session.list", {})

    started = time.monotonic()
    for rpc in opened:
        assert await rpc.wait_closed(3 + WAIT_S) == CLOSED
    assert time.monotonic() - started > 1, "not closed before its time"
    for backend in pair:
        assert await _status(backend, made["token"]) == 401
    await owner.close()


async def test_new_scopes_close_the_connections_everywhere_and_apply_on_reconnecting(
    pair: tuple[Backend, Backend], fakes: tuple[FakeOpenAI, FakeOpenAI],
) -> None:
    a, b = pair
    owner = await _owner(a, "owner-a")
    made = await _mint(owner, ["read", "submit"])
    sid = await create_session(owner)
    bystander = await Rpc.open(b.port, (await _mint(owner, ["read"]))["token"], name="other")
    on_a = await Rpc.open(a.port, made["token"], name="token-on-a")
    on_b = await Rpc.open(b.port, made["token"], name="token-on-b")

    changed = await owner.call("token.update", {"token_id": made["token_id"],
                                                "scopes": ["read"]})
    assert changed["token"]["scopes"] == ["read"]
    assert await on_a.wait_closed(WAIT_S) == CLOSED
    assert await on_b.wait_closed(WAIT_S) == CLOSED
    again = await Rpc.open(b.port, made["token"], name="token-on-b-again")
    assert again.init_result["principal"]["scopes"] == ["read"]
    with_old_scope = await _refused(again, "prompt.submit", {
        "session_id": sid, "text": "needs submit", "request_id": "r-1"})
    assert with_old_scope is not None
    assert "'submit' scope" in with_old_scope["message"]
    assert (await again.call("session.list", {}))["sessions"], "what it keeps still works"
    assert not bystander.closed.is_set(), "another token's connection stays open"
    assert _admissions_of(a, made["token_id"]) == 0
    await _no_model_asked(fakes)
    for rpc in (again, bystander, owner):
        await rpc.close()
