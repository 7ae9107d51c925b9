"""Params decoding: field paths for -32602, and surrogate handling."""

import pytest

from shared import codec
from shared.protocol import PromptSubmitParams, SessionListParams


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": "x"}, "limit"),
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"cursor": 3}, "cursor"),
        ({"owner_id": 1}, "owner_id"),
    ],
)
def test_list_params_errors_name_the_field(params: dict[str, object], field: str) -> None:
    with pytest.raises(codec.ParamsError) as err:
        codec.convert(params, SessionListParams)
    assert err.value.field == field


def test_nested_path_is_dotted() -> None:
    params = {"session_id": "s", "request_id": "r", "text": "t", "attachments": [{"path": 3}]}
    with pytest.raises(codec.ParamsError) as err:
        codec.convert(params, PromptSubmitParams)
    assert err.value.field == "attachments.0.path"


def test_missing_field_is_named() -> None:
    with pytest.raises(codec.ParamsError) as err:
        codec.convert({"session_id": "s", "text": "t"}, PromptSubmitParams)
    assert err.value.field == "request_id"


def test_lone_surrogates_survive_decoding_and_are_cleaned() -> None:
    decoded = codec.decode('{"t": "a\\ud800b\\ud83d\\ude00"}')
    assert decoded["t"] == "a\ud800b\U0001f600"
    assert codec.clean_text(decoded["t"]) == "a\ufffdb\U0001f600"
    assert '"a\ufffdb' in codec.encode({"t": decoded["t"]})


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"session_id": "a\ud800"}, "session_id"),
        ({"session_id": "s", "request_id": "r", "text": "t", "attachments": [{"path": "\udfff"}]},
         "attachments.0.path"),
        ({"session_id": "s", "request_id": "r\udc00", "text": "t"}, "request_id"),
        ({"sess\ud800ion_id": "s"}, "sess\ufffdion_id"),
    ],
)
def test_lone_surrogates_in_params_are_params_errors(params: dict[str, object], field: str) -> None:
    with pytest.raises(codec.ParamsError) as err:
        codec.convert(params, PromptSubmitParams, cleaned=("text",))
    assert err.value.field == field
    assert "surrogate" in err.value.message


def test_cleaned_params_keep_their_surrogates_for_the_handler() -> None:
    params = {"session_id": "s", "request_id": "r", "text": "a\ud800"}
    assert codec.convert(params, PromptSubmitParams, cleaned=("text",)).text == "a\ud800"
    paired = codec.decode('{"a": [{"b": {"c": "\\ud83d\\ude00"}}]}')  # json.loads joins the pair
    assert codec.surrogate_at(paired) is None, "a pair is a character"
    assert codec.surrogate_at({"a": [{"b": {"c": "x\ud83d"}}]}) == "a.0.b.c"
