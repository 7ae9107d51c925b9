"""JSON-RPC framing rules, without sockets."""

import pytest

from backend.server import rpc


def test_request_and_notification() -> None:
    req = rpc.parse('{"jsonrpc":"2.0","id":7,"method":"session.list","params":{"limit":3}}')
    assert (req.id, req.method, req.params) == (7, "session.list", {"limit": 3})
    note = rpc.parse('{"jsonrpc":"2.0","method":"session.list"}')
    assert note.id is None
    assert note.params == {}


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("{not json", -32700),
        ("[]", -32600),
        ('[{"jsonrpc":"2.0","id":1,"method":"x"}]', -32600),
        ('"hello"', -32600),
        ('{"jsonrpc":"2.0","id":null,"method":"x"}', -32600),
        ('{"jsonrpc":"2.0","id":true,"method":"x"}', -32600),
        ('{"jsonrpc":"1.0","id":1,"method":"x"}', -32600),
        ('{"jsonrpc":"2.0","id":1}', -32600),
        ('{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":NaN}}', -32700),  # not JSON
    ],
)
def test_bad_frames(frame: str, code: int) -> None:
    with pytest.raises(rpc.FrameError) as err:
        rpc.parse(frame)
    assert err.value.error.code == code


def test_error_keeps_a_readable_id() -> None:
    with pytest.raises(rpc.FrameError) as err:
        rpc.parse('{"jsonrpc":"1.0","id":"abc","method":"x"}')
    assert err.value.id == "abc"


def test_params_that_are_not_an_object_reach_dispatch() -> None:
    # Refused there (-32600), after the scope check: tests/integration/test_fuzzed_input.py.
    assert rpc.parse('{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}').params == [1]


def test_a_byte_order_mark_is_skipped() -> None:
    assert rpc.parse('\ufeff{"jsonrpc":"2.0","id":1,"method":"x"}').id == 1


def test_numbers_no_field_takes_stay_text() -> None:
    digits = "7" * 5000
    request = rpc.parse(f'{{"jsonrpc":"2.0","id":2,"method":"x","params":{{"a":{digits},"b":1e999}}}}')
    assert request.params == {"a": digits, "b": "1e999"}


def test_a_frame_too_deep_is_refused_with_its_id() -> None:
    deep = "[" * 10_000 + "]" * 10_000
    with pytest.raises(rpc.FrameError) as err:
        rpc.parse(f'{{"params":{{"id":5,"x":{deep}}},"jsonrpc":"2.0","id":"top","method":"x"}}')
    assert (err.value.error.code, err.value.id) == (-32600, "top")
