"""`turnkey token`'s words: a lifetime as people write it (`--expires-in`), and a token's
state in the list (revoked, expired, expiring, active)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

import pytest

from desktop.cli import duration_s
from desktop.token_commands import state
from shared import protocol as p

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90), ("1", 1), ("45s", 45), ("30m", 1800), ("2h", 7200), (" 2H ", 7200),
    ("1.5h", 5400), ("7d", 604800),
])
def test_a_lifetime_in_seconds_or_with_a_unit(text: str, seconds: int) -> None:
    assert duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "0", "0.4", "-5m", "2w", "two hours", "nan", "inf"])
def test_anything_else_is_refused_saying_how_to_write_it(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"30m, 2h, 7d"):
        duration_s(text)


def token(**fields: object) -> p.TokenInfo:
    base: dict[str, object] = dict(token_id="tok_1", label="laptop", scopes=["read"],
                                   created_at="2026-11-30T09:00:00.000Z", revoked=False,
                                   revoked_at=None)
    base.update(fields)
    return p.TokenInfo(**base)  # type: ignore[arg-type]


def test_the_list_says_whether_a_token_is_revoked_expired_or_expiring() -> None:
    assert state(token(), NOW) == "active"
    assert state(token(expires_at="2026-12-01T12:00:00.000Z"), NOW) == \
        "expires 2026-12-01T12:00:00"
    assert state(token(expires_at="2026-12-01T09:59:59.999Z"), NOW) == \
        "expired 2026-12-01T09:59:59"
    assert state(token(revoked=True, revoked_at="2026-12-01T08:00:00.000Z",
                       expires_at="2026-12-01T12:00:00.000Z"), NOW) == \
        "revoked 2026-12-01T08:00:00"
