"""Strings the backend cannot keep: lone surrogates and over-long names get -32602 naming the param."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from shared.methods import METHODS
from shared.protocol import CWD_MAX, ID_MAX, MODEL_MAX, TITLE_MAX
from tests.fakes.openai_server import FakeOpenAI

from .backend_proc import Backend
from .test_bad_input import _raw_error
from .wire import Connect, Json, assert_backend_healthy

LONE = "\ud800"
# The string params whose lone surrogates the handler replaces (a prompt's text, a scheduled
# prompt's, a memory notebook's), as the method table declares them.
CLEANED = {(method, field) for method, spec in METHODS.items() for field in spec.cleaned}


def _sample(t: msgspec.inspect.Type) -> Any:
    """A well-typed value of `t` (whether it names anything that exists does not matter)."""
    if isinstance(t, msgspec.inspect.UnionType):
        return _sample(next(x for x in t.types if not isinstance(x, msgspec.inspect.NoneType)))
    if isinstance(t, msgspec.inspect.LiteralType):
        return t.values[0]
    if isinstance(t, msgspec.inspect.StrType):
        return "x"
    if isinstance(t, msgspec.inspect.BoolType):
        return False
    if isinstance(t, msgspec.inspect.IntType):
        return max(1, t.ge or 0)
    if isinstance(t, msgspec.inspect.StructType):
        return {f.encode_name: _sample(f.type) for f in t.fields if f.required}
    if isinstance(t, msgspec.inspect.ListType):
        return [_sample(t.item_type)]
    if isinstance(t, msgspec.inspect.DictType):
        return {}
    raise AssertionError(f"no sample for {t}")


def _string_paths(t: msgspec.inspect.Type, path: str) -> Iterator[tuple[str, Any]]:
    """(dotted path, params with a lone surrogate at that path) for every string a type holds."""
    if isinstance(t, msgspec.inspect.UnionType):
        for x in t.types:
            yield from _string_paths(x, path)
    elif isinstance(t, msgspec.inspect.StrType | msgspec.inspect.LiteralType):
        yield path, f"a{LONE}b"
    elif isinstance(t, msgspec.inspect.StructType):
        base = _sample(t)
        for f in t.fields:
            sub = f"{path}.{f.encode_name}" if path else f.encode_name
            for where, value in _string_paths(f.type, sub):
                yield where, {**base, f.encode_name: value}
    elif isinstance(t, msgspec.inspect.ListType):
        for where, value in _string_paths(t.item_type, f"{path}.0"):
            yield where, [value]
    elif isinstance(t, msgspec.inspect.DictType):  # config.set's patch: any value, any depth
        yield f"{path}.default_provider", {"default_provider": f"a{LONE}b"}
        yield f"{path}.providers.main.model", {"providers": {"main": {"model": LONE}}}


def _cases() -> list[Any]:
    cases = []
    for method, spec in sorted(METHODS.items()):
        for field, params in _string_paths(msgspec.inspect.type_info(spec.params), ""):
            if (method, field) not in CLEANED:
                cases.append(pytest.param(method, field, params, id=f"{method}-{field}"))
    return cases


CASES = _cases()


def test_every_method_with_string_params_is_covered() -> None:
    covered = {c.values[0] for c in CASES}
    with_strings = {m for m, s in METHODS.items() if "str" in repr(msgspec.inspect.type_info(s.params))}
    assert with_strings <= covered, with_strings - covered
    assert ("session.create", "title") in {(c.values[0], c.values[1]) for c in CASES}
    assert ("prompt.submit", "text") in CLEANED


def _frame(method: str, params: Json, rid: str = "s1") -> str:
    frame = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    assert "\\ud800" in frame, "the surrogate travels as a JSON escape, as a client sends it"
    return frame


def _no_tracebacks(backend: Backend) -> None:
    texts = [backend.stderr_path.read_text(errors="replace")]
    texts += [p.read_text(errors="replace") for p in (backend.data_dir / "logs").glob("*")]
    for text in texts:
        assert "Traceback" not in text, text[-3000:]
        assert "Logging error" not in text, text[-3000:]


@pytest.mark.parametrize(("method", "field", "params"), CASES)
async def test_lone_surrogate_in_a_string_param_is_invalid_params(
    method: str, field: str, params: Json, backend: Backend, connect: Connect,
) -> None:
    rpc = await connect()
    resp = await _raw_error(rpc, _frame(method, params), -32602)
    error = resp["error"]
    assert error["data"]["field"] == field, error
    assert "surrogate" in error["message"], error
    assert "\ufffd" not in error["message"], "the message describes the value, not quotes it"
    assert "\\ud800" not in error["message"], "the message describes the value, not quotes it"
    assert "sessions" in await rpc.call("session.list", {}), "the connection stays"
    _no_tracebacks(backend)


async def test_lone_surrogates_elsewhere_in_a_frame(
    backend: Backend, connect: Connect, fake_provider: FakeOpenAI,
) -> None:
    rpc = await connect()
    await _raw_error(rpc, _frame(f"session.{LONE}", {"title": LONE}), -32601)
    resp = await _raw_error(rpc, _frame("session.list", {f"li{LONE}mit": 5}), -32602)
    assert resp["error"]["data"]["field"] == "li\ufffdmit", "replaced in the answer, not refused"
    resp = await _raw_error(rpc, _frame("session.list", {"limit": LONE}), -32602)
    assert resp["error"]["data"]["field"] == "limit", "a type error is reported as one"
    await assert_backend_healthy(backend, fake_provider)
    _no_tracebacks(backend)


def _long(n: int) -> str:
    return "t" * n


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        pytest.param("session.create", {"title": _long(TITLE_MAX + 1)}, "title", id="create-title"),
        pytest.param("session.create", {"model": _long(MODEL_MAX + 1)}, "model", id="create-model"),
        pytest.param("session.create", {"cwd": "/" + _long(CWD_MAX)}, "cwd", id="create-cwd"),
        pytest.param("session.update", {"title": _long(3 * 1024 * 1024)}, "title", id="update-title"),
        pytest.param("session.update", {"model": _long(MODEL_MAX + 1)}, "model", id="update-model"),
        pytest.param("session.get", {"session_id": _long(ID_MAX + 1)}, "session_id", id="get-id"),
        pytest.param("config.set", {"patch": {"providers": {"main": {"model": _long(MODEL_MAX + 1)}}}},
                     "patch", id="config-model"),
    ],
)
async def test_over_long_titles_models_folders_and_ids_are_invalid_params(
    method: str, params: Json, field: str, backend: Backend, connect: Connect,
) -> None:
    rpc = await connect()
    sid = (await rpc.call("session.create", {}))["session"]["session_id"]
    if method == "session.update":
        params = {"session_id": sid, **params}
    before = (await rpc.call("session.get", {"session_id": sid}))["session"]
    resp = await rpc.request(method, params)
    assert resp["error"]["code"] == -32602, resp["error"]
    got = resp["error"]["data"]["field"]
    assert got == field or got.startswith(f"{field}."), resp["error"]
    assert len(resp["error"]["message"]) < 500, "the error does not quote the value"
    assert (await rpc.call("session.get", {"session_id": sid}))["session"] == before
    assert len((await rpc.call("session.list", {}))["sessions"]) == 1, "nothing was created"


async def test_titles_and_models_up_to_the_bound_are_kept_whole(connect: Connect) -> None:
    rpc = await connect()
    title, model = "\U0001f600" * TITLE_MAX, _long(MODEL_MAX)  # characters, not bytes
    session = (await rpc.call("session.create", {"title": title, "model": model}))["session"]
    assert (session["title"], session["model"]) == (title, model)
    updated = await rpc.call("session.update", {"session_id": session["session_id"],
                                                "title": f"  {title[4:]}  "})
    assert updated["session"]["title"] == title[4:], "surrounding whitespace is trimmed"
