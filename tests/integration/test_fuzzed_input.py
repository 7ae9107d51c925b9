"""Bad input a schema-driven fuzzer found (issue 32, item 8), each as a test, and a fuzzer of
our own over shared/protocol.schema.json: no hostile value of any param of any method gets
an internal error, loses its request id, or takes the backend down."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI

from .backend_proc import Backend
from .test_tokens import mint
from .wire import Connect, Json, Rpc, RpcError, assert_backend_healthy

SCHEMA = json.loads((Path(__file__).parents[2] / "shared" / "protocol.schema.json").read_text())
INTERNAL = -32603

# Parsed and refused before anything reaches the store: the same code on both stores.
PROTOCOL_ONLY = pytest.mark.sqlite_only("params refused by the protocol layer; no store is involved")


def cursor(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode()


async def refused(rpc: Rpc, method: str, params: Any) -> RpcError:
    with pytest.raises(RpcError) as caught:
        await rpc.call(method, params)
    return caught.value


async def raw(rpc: Rpc, frame: str) -> Json:
    """Sends a frame as text; returns the one response it gets."""
    before = len(rpc.responses)
    await rpc.send_raw(frame)
    await rpc.wait_until(lambda: len(rpc.responses) > before, timeout=10, what="response")
    answer = rpc.responses[before]
    assert isinstance(answer, dict)
    return answer


@pytest.mark.parametrize("bad", [
    cursor({"after": 5}), cursor({"offset": "x"}), cursor({"offset": 10**30}),
    cursor({"offset": -5}), cursor({"after": ["a"]}), cursor([1, 2]), "%%%", "x" * 2000,
])
@PROTOCOL_ONLY
async def test_a_cursor_of_the_wrong_shape_is_invalid_params(connect: Connect, bad: str) -> None:
    rpc = await connect()
    for query in (None, "hello"):
        error = await refused(rpc, "session.list", {"cursor": bad, "query": query})
        assert (error.code, error.data) == (-32602, {"field": "cursor"}), error


@PROTOCOL_ONLY
async def test_a_search_with_nul_or_a_megabyte_is_invalid_params(connect: Connect) -> None:
    rpc = await connect()
    for query in ("a\x00b", "x" * 1_000_000):
        error = await refused(rpc, "session.list", {"query": query})
        assert (error.code, error.data) == (-32602, {"field": "query"}), error
        assert len(error.message) < 1000, "the value is not echoed whole"


@PROTOCOL_ONLY
async def test_lone_surrogates_outside_a_prompt_are_invalid_params(
    backend: Backend, connect: Connect,
) -> None:
    rpc = await connect()
    sid = (await rpc.call("session.create", {"cwd": str(backend.data_dir.parent)}))["session"]
    for method, params in (
        ("schedule.create", {"text": "bad \ud800 text", "session_id": sid["session_id"],
                             "at": "2099-01-01T00:00:00Z"}),
        ("memory.set", {"target": "user", "text": "likes \udfff tea"}),
    ):
        error = await refused(rpc, method, params)
        assert (error.code, error.data) == (-32602, {"field": "text"}), (method, error)
    assert not (backend.data_dir / "memory" / "USER.md").exists(), "nothing stored as U+FFFD"


@PROTOCOL_ONLY
async def test_a_key_that_is_not_ascii_is_refused_when_given(connect: Connect) -> None:
    rpc = await connect()
    error = await refused(rpc, "secret.set", {"name": "main", "value": "sk-clé-ünïcode"})
    assert (error.code, error.data) == (-32602, {"field": "value"})
    assert "clé" not in error.message, "never quoted"
    error = await refused(rpc, "provider.test", {"provider": "main", "provider_config": {},
                                                 "api_key": "sk-\u00e9t\u00e9"})
    assert (error.code, error.data) == (-32602, {"field": "api_key"})


@PROTOCOL_ONLY
async def test_numbers_no_field_takes_are_refused_by_field(connect: Connect) -> None:
    rpc = await connect()
    answer = await raw(rpc, '{"jsonrpc":"2.0","id":41,"method":"config.set",'
                            '"params":{"patch":{"approvals":{"timeout_s":1e999}}}}')
    assert answer["id"] == 41
    assert answer["error"]["code"] == -32602, answer
    assert "approvals" in answer["error"]["data"]["field"]
    answer = await raw(rpc, '{"jsonrpc":"2.0","id":42,"method":"config.set",'
                            '"params":{"patch":{"approvals":{"timeout_s":NaN}}}}')
    assert answer["error"]["code"] == -32700, "NaN is not JSON"
    timeout = (await rpc.call("config.get"))["approvals"]["timeout_s"]
    assert timeout != float("inf")


async def test_an_admin_token_cannot_move_the_store(backend: Backend, connect: Connect) -> None:
    owner = await connect()
    admin = await connect(token=(await mint(owner, ["admin"]))["token"])
    error = await refused(admin, "config.set", {"patch": {"store": "postgresql://x@nowhere/db"}})
    assert error.code == -32003
    assert "store" in error.message
    assert "postgresql://x@nowhere" not in (backend.data_dir / "config.toml").read_text()


@PROTOCOL_ONLY
async def test_a_megabyte_method_name_is_not_echoed_or_logged_whole(
    backend: Backend, connect: Connect,
) -> None:
    rpc = await connect()
    name = "m" * 1_000_000
    error = await refused(rpc, name, {})
    assert error.code == -32601
    assert len(error.message) < 1000
    log = (backend.data_dir / "logs" / "backend.log").read_text()
    assert name[:10_000] not in log


async def test_list_params_are_judged_by_scope_first(backend: Backend, connect: Connect) -> None:
    owner = await connect()
    reader = await connect(token=(await mint(owner, ["read"]))["token"])
    answer = await raw(reader, '{"jsonrpc":"2.0","id":5,"method":"config.set","params":[1,2]}')
    assert (answer["id"], answer["error"]["code"]) == (5, -32003), answer
    answer = await raw(owner, '{"jsonrpc":"2.0","id":6,"method":"config.set","params":[1,2]}')
    assert (answer["id"], answer["error"]["code"]) == (6, -32600), answer


@PROTOCOL_ONLY
async def test_extreme_but_valid_json_keeps_its_request_id(connect: Connect) -> None:
    rpc = await connect()
    deep = "[" * 10_000 + "]" * 10_000
    answer = await raw(rpc, '{"jsonrpc":"2.0","id":"deep","method":"session.list",'
                            f'"params":{{"cursor":{deep}}}}}')
    assert (answer["id"], answer["error"]["code"]) == ("deep", -32600), answer
    digits = "9" * 5000
    answer = await raw(rpc, '{"jsonrpc":"2.0","id":"big","method":"session.list",'
                            f'"params":{{"limit":{digits}}}}}')
    assert (answer["id"], answer["error"]["code"]) == ("big", -32602), answer
    answer = await raw(rpc, '\ufeff{"jsonrpc":"2.0","id":"bom","method":"session.list"}')
    assert answer["id"] == "bom"
    assert "result" in answer, answer


# --- a fuzzer over the generated schema ------------------------------------------------

HOSTILE: tuple[Any, ...] = (
    None, True, -1, 0, 2**63, -(2**63) - 1, 10**30, 1.5, "", " ", "\x00", "a\x00b", "\ud800",
    "x" * 70_000, "../../etc/passwd", "<system>", "ses_" + "0" * 24, [], [1, "a"], {}, {"a": 1},
    "2099-13-45T99:99:99Z", "* * * * * * *", "Mars/Olympus",
)
PLAIN = {"string": "x", "integer": 1, "number": 1.0, "boolean": False, "array": [], "object": {}}
SKIPPED = {"initialize", "shutdown"}  # the handshake itself; and stopping the backend


def resolved(node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str):
        return dict(SCHEMA["components"]["schemas"][ref.rsplit("/", 1)[1]])
    return node


def plausible(node: dict[str, Any]) -> Any:
    """A value of the node's type, valid or not: enough for the other params to pass."""
    node = resolved(node)
    if "enum" in node:
        return node["enum"][0]
    for option in node.get("anyOf", ()):
        if resolved(option).get("type") != "null":
            return plausible(option)
    if node.get("type") == "object":
        return {k: plausible(v) for k, v in node.get("properties", {}).items()
                if k in node.get("required", ())}
    return PLAIN.get(str(node.get("type")), "x")


def calls() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for method, spec in sorted(SCHEMA["methods"].items()):
        if method in SKIPPED:
            continue
        params = resolved(spec["params"])
        base = plausible(params)
        out += [(method, whole) for whole in ([1], "x", 3, True)]
        for field in params.get("properties", {}):
            out += [(method, {**base, field: value}) for value in HOSTILE]
        out.append((method, {**base, "\ud800": 1, "unknown_" + "k" * 300: 1}))
    return out


async def test_no_hostile_param_gets_an_internal_error(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI,
) -> None:
    rpc = await connect()
    internal = []
    for i, (method, params) in enumerate(calls()):
        frame = json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        answer = await raw(rpc, frame)
        assert answer.get("id") == i, f"{method}: the request id was lost: {answer}"
        error = answer.get("error")
        if error and error["code"] == INTERNAL:
            internal.append((method, str(params)[:200], error["message"]))
    assert internal == [], f"{len(internal)} internal errors, e.g. {internal[:5]}"
    await assert_backend_healthy(backend, fake_provider)
