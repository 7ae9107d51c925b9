"""shared/client.py: each error code of the contract is its own exception class."""

from __future__ import annotations

from shared.client import (
    AdmissionConflict,
    ApprovalClosed,
    Forbidden,
    InternalError,
    InvalidParams,
    NotFound,
    RpcError,
    SessionBusy,
)
from shared.errors import ErrorCode


def test_each_code_has_its_class_and_unknown_codes_stay_plain() -> None:
    classes = {ErrorCode.INVALID_PARAMS: InvalidParams, ErrorCode.FORBIDDEN: Forbidden,
               ErrorCode.NOT_FOUND: NotFound, ErrorCode.INTERNAL: InternalError,
               ErrorCode.SESSION_BUSY: SessionBusy, ErrorCode.ADMISSION_CONFLICT: AdmissionConflict,
               ErrorCode.APPROVAL_CLOSED: ApprovalClosed}
    for code, cls in classes.items():
        assert type(RpcError.refused(code, "m")) is cls
    assert type(RpcError.refused(-32099, "m")) is RpcError
    forbidden = RpcError.refused(ErrorCode.FORBIDDEN, "m", {"fields": ["sandbox.enabled"]})
    assert isinstance(forbidden, Forbidden)
    assert forbidden.fields == ["sandbox.enabled"]
    internal = RpcError.refused(ErrorCode.INTERNAL, "m", {"error_id": "err_1"})
    assert isinstance(internal, InternalError)
    assert internal.error_id == "err_1"
    odd = RpcError.refused(ErrorCode.INVALID_PARAMS, "m", {"field": 3})
    assert isinstance(odd, InvalidParams)
    assert odd.field == ""  # a backend breaking the contract does not break the client
