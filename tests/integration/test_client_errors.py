"""A real backend's refusals reach a client as the exception of their code, with the
contract's data as attributes: `except InvalidParams as exc: exc.field`."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.client import (
    Client,
    InvalidParams,
    NotFound,
    RpcError,
)
from shared.methods import ConfigSet, SessionCreate, SessionGet

from .backend_proc import Backend


async def test_refusals_arrive_typed(backend: Backend, tmp_path: Path) -> None:
    client = Client(backend.data_dir, name="test-errors")
    await client.connect()
    try:
        with pytest.raises(NotFound) as missing:
            await client.call(SessionGet(session_id="ses_00000000000000000000000000"))
        assert missing.value.kind == "session"
        with pytest.raises(InvalidParams) as bad:
            await client.call(SessionCreate(cwd=str(tmp_path / "no-such-folder")))
        assert bad.value.field == "cwd"
        with pytest.raises(InvalidParams) as patch:
            await client.call(ConfigSet(patch={"approvals": {"mode": "sometimes"}}))
        assert patch.value.field.endswith("approvals.mode")
        assert isinstance(patch.value, RpcError)  # `except RpcError` still catches it all
    finally:
        await client.close()
