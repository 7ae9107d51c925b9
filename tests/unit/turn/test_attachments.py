"""What each model gets of a prompt's files: the rendering core and the turn's loader."""

from __future__ import annotations

import asyncio
import base64
import io
import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from backend.compress.compressor import to_entry
from backend.compress.summary import render_transcript
from backend.compress.tokens import entry_chars, message_chars, request_chars
from backend.providers import anthropic, openai
from backend.providers.accounting import measure
from backend.providers.base import ChatRequest, WireFile, WireMessage, WireToolCall
from backend.store.messages import ModelRow
from backend.turn.attachments import (
    ANTHROPIC_LIMITS,
    MAX_FILE_CHARS,
    PDF_PAGE_TOKENS,
    Part,
    Target,
    current_from,
    fenced,
    form,
    key,
    prepare,
    render,
)
from backend.turn.media import anthropic_image_tokens, openai_image_tokens
from backend.turn.preflight import estimate_tokens
from backend.turn.prepared import PartCache, PreparedFiles, part_bytes
from tests.attachment_samples import encoded, pdf, png, sha

ANTHROPIC = Target("anthropic", vision=True)
OPENAI = Target("openai", vision=True)
BLIND = Target("openai", vision=False)
LOCAL = Target("local", vision=False)


def image_file(data: bytes, name: str = "shot.png", mime: str = "image/png") -> WireFile:
    with Image.open(io.BytesIO(data)) as im:
        w, h = im.size
    return WireFile(sha(data), name, mime, "image", len(data), w, h)


def pdf_file(data: bytes, pages: int, name: str = "paper.pdf") -> WireFile:
    return WireFile(sha(data), name, "application/pdf", "pdf", len(data), pages=pages)


def text_file(data: bytes, name: str = "notes.md") -> WireFile:
    return WireFile(sha(data), name, "text/markdown", "text", len(data))


def decoded(b64: str) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(b64)))


# --- images ------------------------------------------------------------------------------


def test_a_huge_png_reaches_anthropic_within_its_limits_and_the_stored_bytes_stay() -> None:
    data = png(6000, 4000)
    before = sha(data)
    f = image_file(data)
    part = prepare(f, form(f, ANTHROPIC), ANTHROPIC, data)
    assert part.image is not None
    assert not part.text
    sent = base64.b64decode(part.image.data)
    assert len(sent) <= ANTHROPIC_LIMITS.max_bytes
    with decoded(part.image.data) as im:
        assert max(im.size) <= 1568
        assert im.size == (1568, 1045)
        assert im.format == "PNG"
        assert part.image.media_type == "image/png"
    assert sha(data) == before  # the stored file is never touched
    assert part.image.tokens == anthropic_image_tokens(1568, 1045)


def test_a_png_still_too_big_after_scaling_goes_as_jpeg() -> None:
    data = png(2000, 1500, noise=True)  # noise: its PNG stays over 3.75 MB at 1568 px
    f = image_file(data)
    part = prepare(f, "image", ANTHROPIC, data)
    assert part.image is not None
    assert part.image.media_type == "image/jpeg"
    assert len(base64.b64decode(part.image.data)) <= ANTHROPIC_LIMITS.max_bytes
    with decoded(part.image.data) as im:
        assert im.format == "JPEG"
        assert max(im.size) <= 1568


def test_an_image_within_limits_goes_as_stored() -> None:
    data = png(800, 600)
    f = image_file(data)
    for target in (ANTHROPIC, OPENAI):
        part = prepare(f, "image", target, data)
        assert part.image is not None
        assert base64.b64decode(part.image.data) == data


@pytest.mark.parametrize(("fmt", "mime"), [("GIF", "image/gif"), ("WEBP", "image/webp")])
def test_gif_and_webp_over_the_edge_become_png(fmt: str, mime: str) -> None:
    data = encoded(3000, 1000, fmt)
    f = image_file(data, "anim." + fmt.lower(), mime)
    part = prepare(f, "image", OPENAI, data)
    assert part.image is not None
    assert part.image.media_type == "image/png"
    with decoded(part.image.data) as im:
        assert im.size == (2048, 683)


def test_a_model_that_cannot_see_gets_a_note_and_no_bytes_are_read() -> None:
    data = png(640, 480)
    f = image_file(data, "diagram.png")
    for target in (BLIND, LOCAL):
        assert form(f, target) == "note"
        part = prepare(f, "note", target, None)
        assert part.unseen
        assert part.image is None
        assert part.text == ("[An image was attached: diagram.png, 640×480; this model "
                             "cannot see images.]")


def test_an_unreadable_image_is_named_not_sent() -> None:
    f = WireFile("0" * 64, "broken.png", "image/png", "image", 10, 10, 10)
    part = prepare(f, "image", OPENAI, b"not a png")
    assert part.image is None
    assert "broken.png" in part.text
    assert "could not be read" in part.text


def test_image_token_estimates() -> None:
    assert openai_image_tokens(1024, 1024) == 765  # OpenAI's own worked example
    assert openai_image_tokens(2048, 4096) == 1105  # 1024x2048 -> 768x1536: 2x3 tiles
    assert anthropic_image_tokens(1000, 1000) == 1334


# --- PDFs and text ----------------------------------------------------------------------


def test_a_pdf_goes_natively_to_anthropic_and_as_text_to_the_others() -> None:
    data = pdf("Quarterly numbers", "Revenue rose (a lot)")
    f = pdf_file(data, 2)
    native = prepare(f, form(f, ANTHROPIC), ANTHROPIC, data)
    assert native.document is not None
    assert base64.b64decode(native.document.data) == data
    assert native.document.tokens == 2 * PDF_PAGE_TOKENS
    assert not native.text
    for target in (OPENAI, BLIND, LOCAL):
        assert form(f, target) == "pdf_text"
        part = prepare(f, "pdf_text", target, data)
        assert part.document is None
        assert part.text == ("[PDF paper.pdf, 2 pages, text extracted:]\n"
                             "Quarterly numbers\n\nRevenue rose (a lot)")


def test_a_long_pdf_goes_as_text_even_to_anthropic() -> None:
    f = WireFile("1" * 64, "book.pdf", "application/pdf", "pdf", 1000, pages=400)
    assert form(f, ANTHROPIC) == "pdf_text"
    heavy = WireFile("2" * 64, "scan.pdf", "application/pdf", "pdf", 20 * 1024 * 1024, pages=3)
    assert form(heavy, ANTHROPIC) == "pdf_text"  # its base64 would crowd the 32 MB request


def test_a_text_file_is_fenced_under_its_name_and_bounded() -> None:
    data = b"# Notes\nuse ```code``` here\n"
    part = prepare(text_file(data), "text", OPENAI, data)
    assert part.text == "File notes.md:\n````\n# Notes\nuse ```code``` here\n````"
    long = fenced("big.md", "x" * (MAX_FILE_CHARS + 50))
    assert "[... cut here: 50 more characters not sent]" in long
    assert long.count("x") == MAX_FILE_CHARS


@given(st.text(alphabet="`ab\n", max_size=60))
def test_a_fence_is_never_closed_by_the_text(text: str) -> None:
    out = fenced("f.txt", text)
    fence = out.split("\n", 2)[1]
    assert set(fence) == {"`"}
    assert fence not in text
    assert out.endswith("\n" + fence)
    assert text in out


# --- messages ---------------------------------------------------------------------------


def test_render_puts_texts_ahead_of_the_words_and_images_beside_them() -> None:
    img, txt = png(100, 50), b"hello"
    files = (image_file(img), text_file(txt))
    m = WireMessage("user", "What is this?", files=files)
    parts = [prepare(f, form(f, OPENAI), OPENAI, d) for f, d in zip(files, (img, txt), strict=True)]
    out = render(m, parts)
    assert out.files == ()
    assert len(out.images) == 1
    assert out.content == "File notes.md:\n```\nhello\n```\n\nWhat is this?"
    assert message_chars(out) == len(out.content) + out.images[0].tokens * 4


def test_current_from_is_after_the_last_final_answer() -> None:
    msgs = [WireMessage("system", "s"), WireMessage("user", "a"), WireMessage("assistant", "b"),
            WireMessage("user", "c"),
            WireMessage("assistant", "", tool_calls=(WireToolCall("1", "t", "{}"),)),
            WireMessage("tool", "r", tool_call_id="1")]
    assert current_from(msgs) == 3
    assert current_from(msgs[:2]) == 0


def _request(*messages: WireMessage) -> ChatRequest:
    msgs = [WireMessage("system", "You help."), *messages]
    return ChatRequest("m", msgs, chars=sum(message_chars(m) for m in msgs))


class Reads:
    """A dict-backed reader that counts its reads."""

    def __init__(self, *files: bytes) -> None:
        self.held = {sha(d): d for d in files}
        self.reads: list[str] = []

    async def __call__(self, sha256: str) -> bytes:
        self.reads.append(sha256)
        if sha256 not in self.held:
            raise FileNotFoundError(sha256)
        return self.held[sha256]


def test_the_loader_prepares_each_file_once_a_turn_and_counts_what_is_sent() -> None:
    big = png(4000, 3000)
    reads = Reads(big)
    files = PreparedFiles(reads)
    req = _request(WireMessage("user", "Look", files=(image_file(big),)))

    async def run() -> None:
        first = await files.render(req, ANTHROPIC)
        again = await files.render(req, ANTHROPIC)
        assert first.request == again.request
        assert len(reads.reads) == 1
        image = first.request.messages[1].images[0]
        assert first.request.chars == (req.chars or 0) + image.tokens * 4
        assert estimate_tokens(first.request) > estimate_tokens(req) + image.tokens - 1
        assert first.unseen == 0
        # A fallback of another kind is its own form (and limits): read and made again.
        other = await files.render(req, OPENAI)
        assert len(reads.reads) == 2
        assert other.request.messages[1].images[0].tokens == openai_image_tokens(2048, 1536)
        blind = await files.render(req, BLIND)
        assert len(reads.reads) == 2
        assert blind.unseen == 1
        assert blind.request.messages[1].images == ()
        assert blind.request.messages[1].content.startswith("[An image was attached: shot.png")

    asyncio.run(run())


def test_a_request_past_the_providers_byte_budget_leaves_the_oldest_images_out() -> None:
    shot = png(1000, 1000, noise=True)  # ~3 MB: 4 MB in base64, sent as it is to Anthropic
    messages: list[WireMessage] = []
    for k in range(8):  # a screenshot in every prompt: all sent again with each request
        messages += [WireMessage("user", f"shot {k}", files=(image_file(shot, f"s{k}.png"),)),
                     WireMessage("assistant", "Seen.")]
    messages.append(WireMessage("user", "and this", files=(image_file(shot, "now.png"),)))
    out = asyncio.run(PreparedFiles(Reads(shot)).render(_request(*messages), ANTHROPIC))
    sent = out.request.messages
    assert sum(len(i.data) for m in sent for i in m.images) <= ANTHROPIC.binary_budget
    with_images = [i for i, m in enumerate(sent) if m.images]
    prompts = [i for i, m in enumerate(sent) if m.role == "user"]
    assert with_images == prompts[-len(with_images):], "the oldest are left out first"
    assert len(with_images) == ANTHROPIC.binary_budget // len(_b64_of(shot))
    assert sent[-1].images, "the latest prompt keeps its image"
    assert "s0.png" in sent[1].content
    assert "left out of this request to save room" in sent[1].content
    assert out.dropped == len(prompts) - len(with_images)
    # Within the budget nothing is left out.
    few = _request(*messages[-3:])
    assert asyncio.run(PreparedFiles(Reads(shot)).render(few, ANTHROPIC)).dropped == 0


def _b64_of(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def test_turns_share_prepared_parts_within_a_budget() -> None:
    big, other = png(4000, 3000), png(3000, 2000)
    reads = Reads(big, other)
    shared = PartCache()
    req = _request(WireMessage("user", "Look", files=(image_file(big),)))

    async def run() -> None:
        first = await PreparedFiles(reads, shared).render(req, ANTHROPIC)
        # The next turn of the session sends the image again: scaled once, read once.
        later = await PreparedFiles(reads, shared).render(req, ANTHROPIC)
        assert later.request == first.request
        assert reads.reads == [sha(big)]
        # Past its budget, the cache lets the least recently used part go.
        shared.budget = shared.held + 10
        two = _request(WireMessage("user", "And", files=(image_file(other, "b.png"),)))
        await PreparedFiles(reads, shared).render(two, ANTHROPIC)
        assert shared.held <= shared.budget
        await PreparedFiles(reads, shared).render(req, ANTHROPIC)
        assert reads.reads == [sha(big), sha(other), sha(big)]
        assert part_bytes(shared.get(key(image_file(big), ANTHROPIC)) or Part()) > 0

    asyncio.run(run())


def test_one_file_under_two_names_is_named_as_each() -> None:
    data = b"same bytes"
    req = _request(WireMessage("user", "", files=(text_file(data, "a.txt"),
                                                  text_file(data, "b.txt"))))
    shared = PartCache()
    out = asyncio.run(PreparedFiles(Reads(data), shared).render(req, OPENAI))
    content = out.request.messages[1].content
    assert "File a.txt:" in content
    assert "File b.txt:" in content


def test_a_file_gone_from_the_store_is_named() -> None:
    reads = Reads()
    data = b"text"
    req = _request(WireMessage("user", "", files=(text_file(data),)))
    out = asyncio.run(PreparedFiles(reads).render(req, OPENAI))
    assert out.request.messages[1].content == (
        "[A file was attached: notes.md; it is no longer available.]")


def test_old_prompts_images_are_left_out_first_and_the_latest_kept() -> None:
    old, new = png(300, 200), png(120, 80)
    doc = pdf("old report")
    req = _request(
        WireMessage("user", "first", files=(image_file(old, "old.png"), pdf_file(doc, 1))),
        WireMessage("assistant", "seen"),
        WireMessage("user", "second", files=(image_file(new, "new.png"),)))
    out = asyncio.run(PreparedFiles(Reads(old, new, doc)).render(req, ANTHROPIC, drop_old=True))
    first, last = out.request.messages[1], out.request.messages[3]
    assert out.dropped == 2
    assert first.images == ()
    assert first.documents == ()
    assert "[An image was attached here: old.png, 300×200; left out of this request" in first.content
    assert "[A PDF was attached here: paper.pdf, 1 page; left out" in first.content
    assert len(last.images) == 1
    assert request_chars(out.request) < request_chars(
        asyncio.run(PreparedFiles(Reads(old, new, doc)).render(req, ANTHROPIC)).request)


# --- on the wire ----------------------------------------------------------------------------


def _rendered(target: Target) -> ChatRequest:
    img, doc = png(64, 32), pdf("page one")
    req = _request(WireMessage("user", "Read these", files=(image_file(img), pdf_file(doc, 1))))
    return asyncio.run(PreparedFiles(Reads(img, doc)).render(req, target)).request


def test_anthropic_gets_document_and_image_blocks_before_the_text() -> None:
    body = anthropic.request_body(_rendered(ANTHROPIC))
    blocks = body["messages"][0]["content"]
    assert [b["type"] for b in blocks] == ["document", "image", "text"]
    assert blocks[0]["source"]["media_type"] == "application/pdf"
    assert blocks[0]["title"] == "paper.pdf"
    assert blocks[1]["source"] == {"type": "base64", "media_type": "image/png",
                                   "data": blocks[1]["source"]["data"]}
    assert blocks[2] == {"type": "text", "text": "Read these"}


def test_openai_gets_text_then_image_url_parts_and_the_pdf_as_text() -> None:
    req = _rendered(OPENAI)
    wire = openai._wire_message(req.messages[1])
    parts = wire["content"]
    assert [p["type"] for p in parts] == ["text", "image_url"]
    assert parts[0]["text"].startswith("[PDF paper.pdf, 1 page, text extracted:]\npage one")
    assert parts[0]["text"].endswith("Read these")
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")


def test_a_prompt_without_images_stays_plain_text_for_openai() -> None:
    assert openai._wire_message(WireMessage("user", "hi")) == {"role": "user", "content": "hi"}


# --- compression ------------------------------------------------------------------------------


def test_the_summarizer_reads_of_a_prompts_files_by_name() -> None:
    meta = json.dumps({"attachments": [
        {"sha256": "a" * 64, "name": "chart.png", "mime_type": "image/png", "bytes": 900,
         "kind": "image", "width": 800, "height": 600},
        {"sha256": "b" * 64, "name": "paper.pdf", "mime_type": "application/pdf",
         "bytes": 5000, "kind": "pdf", "pages": 3}]})
    row = ModelRow(id=7, role="user", content="Compare these", api_content=None, note_kind=None,
                   tool_calls=None, api_tool_calls=None, call_id=None, tool_name=None,
                   status=None, meta=meta)
    entry = to_entry(row)
    assert entry is not None
    assert entry.files == ("[image chart.png, 800×600]", "[file paper.pdf]")
    assert entry_chars(entry) == len("Compare these") + 4 * (1_600 + 3 * 1_500)
    assert "[user]\n[image chart.png, 800×600]\n[file paper.pdf]\nCompare these" in (
        render_transcript([entry]))
    tool_row = msgspec.structs.replace(row, role="tool", meta=json.dumps(
        {"attachments": [{"path": "/x.png", "mime_type": "image/png", "bytes": 3}]}))
    plain = to_entry(tool_row)
    assert plain is not None
    assert plain.files == ()


def test_an_estimated_usage_counts_images_by_the_providers_estimate() -> None:
    img = png(1024, 1024)
    req = _request(WireMessage("user", "x" * 400, files=(image_file(img),)))
    sent = asyncio.run(PreparedFiles(Reads(img)).render(req, OPENAI)).request
    usage = measure(None, sent, "")
    assert usage.estimated
    assert usage.input_tokens == (len("You help.") + len("x" * 400)) // 4 + 765
