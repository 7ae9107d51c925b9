"""Normalizing submitted input: what is queued is what the backend understood."""

import pytest

from backend.authority.payload import MAX_TEXT_BYTES, Payload, normalize
from backend.errors import InvalidParams
from shared.protocol import Attachment, PromptSubmitParams


def submit(text: str, **kw: object) -> PromptSubmitParams:
    return PromptSubmitParams(session_id="s", request_id="r", text=text, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_text_is_refused(text: str) -> None:
    with pytest.raises(InvalidParams) as err:
        normalize(submit(text))
    assert err.value.field == "text"


def test_text_is_capped_at_one_mib() -> None:
    assert normalize(submit("x" * MAX_TEXT_BYTES)).text
    with pytest.raises(InvalidParams) as err:
        normalize(submit("x" * (MAX_TEXT_BYTES + 1)))
    assert err.value.field == "text"


def test_lone_surrogates_are_replaced_and_line_endings_unified() -> None:
    assert normalize(submit("a\ud800\r\nb")).text == "a\ufffd\nb"


def test_digest_depends_on_content_only() -> None:
    a, b = normalize(submit("hello")), normalize(submit("hello"))
    assert a.digest == b.digest
    assert a.digest != normalize(submit("hello!")).digest
    assert Payload.from_json(a.to_json()) == a


def test_attachments_are_refused_until_supported() -> None:
    with pytest.raises(InvalidParams) as err:
        normalize(submit("hi", attachments=[Attachment(path="/tmp/x")]))
    assert err.value.field == "attachments"
