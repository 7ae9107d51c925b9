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
        ('{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}', -32600),
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
