"""Connection strings (shared/remote.py): what `turnkey token create` prints, parsed back,
and what a bad one is told."""

from __future__ import annotations

import pytest

from shared.remote import BadConnectionString, RemoteTarget, parse

FP = "ab" * 32


def test_a_string_round_trips() -> None:
    target = RemoteTarget("192.0.2.7", 8765, "t0k/en+=?&", FP)
    assert parse(target.connection_string()) == target
    assert target.url == "wss://192.0.2.7:8765/rpc"


def test_ipv6_and_a_fingerprint_with_colons() -> None:
    colons = ":".join(FP.upper()[i:i + 2] for i in range(0, 64, 2))
    target = parse(f"turnkey://[fd00::2]:9000?token=abc&fp={colons}")
    assert target == RemoteTarget("fd00::2", 9000, "abc", FP)
    assert target.url == "wss://[fd00::2]:9000/rpc"
    assert parse(target.connection_string()) == target


def test_loopback_may_go_without_tls() -> None:
    target = parse("turnkey://127.0.0.1:5000?token=abc")
    assert target.fingerprint == ""
    assert target.url == "ws://127.0.0.1:5000/rpc"


@pytest.mark.parametrize(("text", "says"), [
    ("turnkey://203.0.113.9:8765?token=abc", "must use TLS"),
    ("turnkey://203.0.113.9:8765?token=abc&fp=12", "64 hex digits"),
    (f"turnkey://host?token=abc&fp={FP}", "no port"),
    (f"turnkey://host:99999?token=abc&fp={FP}", "not a connection string"),
    ("https://host:1?token=abc", "starts with turnkey://"),
    (f"turnkey://host:1?fp={FP}", "exactly one token"),
    (f"turnkey://host:1?token=a&token=b&fp={FP}", "exactly one token"),
    (f"turnkey://host:1?token=a&fp={FP}&fp={FP}", "more than one fp"),
])
def test_a_bad_string_says_what_to_fix(text: str, says: str) -> None:
    with pytest.raises(BadConnectionString, match=says):
        parse(text)
