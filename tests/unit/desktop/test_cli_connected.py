"""The CLI's `@connected` commands: connected for their body, closed after it whatever
happens, and a refused call ended with one line on stderr and exit status 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop import commands
from desktop.commands import Route, connected
from shared.client import Client, RpcError
from shared.errors import ErrorCode

ROUTE = Route(Path("/nowhere"))


class FakeClient:
    """All `connected` itself does with a client: hand it to the body, then close it."""

    def __init__(self) -> None:
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    fake = FakeClient()

    async def handed(route: Route) -> FakeClient:
        assert route is ROUTE
        return fake

    monkeypatch.setattr(commands, "ensure_client", handed)
    return fake


@connected
async def refused(client: Client, error: RpcError) -> int:
    print("asked")
    raise error


@connected
async def answered(client: Client, words: str, *, status: int = 0) -> int:
    print(f"{words} from {type(client).__name__}")
    return status


@pytest.mark.parametrize(("error", "line"), [
    (RpcError.refused(ErrorCode.INVALID_PARAMS, "the hour field: 25 is out of range; use 0-23",
                      {"field": "cron"}),
     "turnkey: the hour field: 25 is out of range; use 0-23 (cron)"),
    (RpcError.refused(ErrorCode.INVALID_PARAMS, "must start with http:// or https://",
              {"field": "patch.mcp.servers.web.url"}),
     "turnkey: must start with http:// or https:// (mcp.servers.web.url)"),
    (RpcError.refused(ErrorCode.INVALID_PARAMS, "invalid params: unknown field", {"field": ""}),
     "turnkey: invalid params: unknown field"),
    (RpcError.refused(ErrorCode.NOT_FOUND, "schedule 'sch_1' not found", {"kind": "schedule"}),
     "turnkey: schedule 'sch_1' not found"),
    (RpcError.refused(ErrorCode.FORBIDDEN, "token lacks the admin scope"),
     "turnkey: token lacks the admin scope"),
])
async def test_a_refused_call_is_one_line_and_status_1(
    client: FakeClient, capsys: pytest.CaptureFixture[str], error: RpcError, line: str,
) -> None:
    assert await refused(ROUTE, error) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("asked\n", line + "\n")
    assert client.closed == 1


async def test_the_body_gets_the_client_and_its_arguments(
    client: FakeClient, capsys: pytest.CaptureFixture[str],
) -> None:
    assert await answered(ROUTE, "hello", status=3) == 3
    assert capsys.readouterr() == ("hello from FakeClient\n", "")
    assert client.closed == 1


async def test_any_other_failure_goes_on_up_after_closing(client: FakeClient) -> None:
    @connected
    async def broken(client: Client) -> int:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        await broken(ROUTE)
    assert client.closed == 1
