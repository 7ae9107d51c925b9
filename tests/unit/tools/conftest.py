"""Shared fixtures of the tool tests."""

from __future__ import annotations

import pytest

from backend.tools import beneath


@pytest.fixture(params=["kernel", "walk"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test with openat2 (when this kernel has it) and again with the per-component
    walk; a module opts in with `pytestmark = pytest.mark.usefixtures("resolver")`."""
    if request.param == "kernel" and not beneath.kernel_resolves():
        pytest.skip("no openat2 on this kernel")
    monkeypatch.setattr(beneath, "_kernel", request.param == "kernel")
    return str(request.param)
