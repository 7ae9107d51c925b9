"""Normalizing submitted input: what is queued is what the backend understood."""

import pytest

from backend.authority.payload import MAX_TEXT_BYTES, TITLE_CHARS, Payload, normalize
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


SHA = "ab" * 32


def test_attachments_are_part_of_the_payload_and_its_digest() -> None:
    plain = normalize(submit("hi"))
    assert plain.to_json() == '{"text": "hi"}', "a plain prompt keeps its exact old bytes"
    one = normalize(submit("hi", attachments=[Attachment(sha256=SHA, name="a.png")]))
    renamed = normalize(submit("hi", attachments=[Attachment(sha256=SHA, name="b.png")]))
    assert one.attachments == ((SHA, "a.png"),)
    assert len({plain.digest, one.digest, renamed.digest}) == 3
    assert Payload.from_json(one.to_json()) == one


def test_files_alone_need_no_text_and_title_the_session() -> None:
    alone = normalize(submit("  ", attachments=[Attachment(sha256=SHA, name="  chart  q3.png")]))
    assert alone.title() == "chart q3.png"
    with pytest.raises(InvalidParams) as err:
        normalize(submit("  "))
    assert err.value.field == "text"


@pytest.mark.parametrize(("names", "field"), [
    (["a/b.png"], "attachments.0.name"),
    (["ok.png", "nul\0.png"], "attachments.1.name"),
    (["   "], "attachments.0.name"),
    ([f"{i}.png" for i in range(11)], "attachments"),
])
def test_attachment_bounds(names: list[str], field: str) -> None:
    with pytest.raises(InvalidParams) as err:
        normalize(submit("hi", attachments=[Attachment(sha256=SHA, name=n) for n in names]))
    assert err.value.field == field


@pytest.mark.parametrize(("text", "title"), [
    ("Fix the build", "Fix the build"),
    ("\n  \n   Fix   the\tbuild  \nthen the docs", "Fix the build"),  # first non-empty line
    ("Fix the flaky restore test in the desktop app before the release goes out",
     "Fix the flaky restore test in the desktop app before the…"),  # at a word boundary
    ("word " * 30, "word " * 11 + "word…"),  # 59 characters of words, then the ellipsis
    ("x" * 100, "x" * (TITLE_CHARS - 1) + "…"),  # one long word: cut inside it
    # No dangling comma before the ellipsis.
    ("Refactor the store layer and the queue, " + "z" * 40, "Refactor the store layer and the queue…"),
])
def test_a_title_is_the_first_line_cut_at_a_word(text: str, title: str) -> None:
    made = Payload(text=text).title()
    assert made == title
    assert len(made) <= TITLE_CHARS
