"""The message box's waiting files without Qt: what is taken or refused (type, size, count),
each upload's state, when Send may go and what it names, and the words about attachments."""

from __future__ import annotations

import pytest

from desktop.state.attachments import (
    NO_VISION_MARK,
    NO_VISION_NOTICE,
    Pending,
    caption,
    chip_status,
    current_vision,
    fitted,
    human_size,
    named,
    queued_line,
    shown,
    size_refusal,
    vision_notice,
    vision_of,
    waiting_words,
)
from desktop.state.model_choices import Choice, marked
from shared import protocol as p

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 40
PDF = b"%PDF-1.7\n" + b"x" * 20


def stored(sha: str, size: int, kind: p.AttachmentKind = "image") -> p.StoredFile:
    return p.StoredFile(sha256=sha, mime_type="image/png" if kind == "image" else "text/plain",
                        bytes=size, kind=kind, width=800 if kind == "image" else None,
                        height=600 if kind == "image" else None,
                        thumbnail="t" * 64 if kind == "image" else None)


def test_images_pdfs_and_text_are_taken_by_their_bytes_and_anything_else_refused() -> None:
    pending = Pending()
    image = pending.add("shot.txt", PNG)
    assert not isinstance(image, str)
    assert image.mime_type == "image/png", "the bytes decide"
    pdf = pending.add("/home/me/report.pdf", PDF)
    assert not isinstance(pdf, str)
    assert pdf.name == "report.pdf"
    assert pdf.kind == "pdf"
    notes = pending.add("notes.md", "# café\n".encode())
    assert not isinstance(notes, str)
    assert notes.kind == "text"
    assert pending.add("tool.exe", b"MZ\x90\0\x03") == (
        "Not attached: tool.exe is not a type Turnkey sends (images (PNG, JPEG, GIF, WebP), "
        "PDFs and text files).")
    assert pending.add("empty.txt", b"") == "Not attached: empty.txt is empty."
    assert [f.name for f in pending.files] == ["shot.txt", "report.pdf", "notes.md"]
    assert pending.has_image


def test_the_bounds_of_one_file_of_a_message_and_of_their_count_are_checked_here() -> None:
    assert size_refusal("big.png", p.MAX_ATTACHMENT_BYTES) is None
    assert size_refusal("big.png", p.MAX_ATTACHMENT_BYTES + 1) == (
        "Not attached: big.png is 32.0 MB; a file can be at most 32.0 MB.")
    pending = Pending()
    big = b"a" * (p.MAX_ATTACHMENT_BYTES - 10)
    assert not isinstance(pending.add("a.txt", big), str)
    assert not isinstance(pending.add("b.txt", big), str)
    assert pending.add("c.txt", b"a" * 100) == (
        "Not attached: c.txt. The files of one message can be at most 64.0 MB together.")
    pending = Pending()
    for n in range(p.MAX_ATTACHMENTS):
        assert not isinstance(pending.add(f"{n}.txt", b"x"), str)
    assert pending.add("one-more.txt", b"x") == (
        "Not attached: one-more.txt. A message takes at most 10 files.")


def test_send_waits_for_uploads_and_names_each_uploaded_file() -> None:
    pending = Pending()
    assert pending.blocked("") == "", "nothing to send"
    assert pending.blocked("hi") is None
    a = pending.add("a.png", PNG)
    b = pending.add("b.txt", b"hello")
    assert not isinstance(a, str)
    assert not isinstance(b, str)
    assert pending.blocked("") is None, "files alone can go"
    assert pending.uploading
    assert chip_status(a) == "Uploading… 0%"
    pending.progress(a.key, len(PNG) // 2)
    assert chip_status(a) == "Uploading… 50%"
    pending.waiting = "queue"
    assert waiting_words(pending) == "Sends when 2 uploads finish…"
    pending.done(a.key, stored("a" * 64, len(PNG)))
    assert waiting_words(pending) == "Sends when the upload finishes…"
    pending.done(b.key, stored("b" * 64, 5, "text"))
    assert not pending.uploading
    assert waiting_words(pending) is None
    assert chip_status(b) == "5 bytes"
    taken = pending.take()
    assert pending.files == []
    assert pending.waiting is None
    assert named(taken) == [p.Attachment(sha256="a" * 64, name="a.png"),
                            p.Attachment(sha256="b" * 64, name="b.txt")]
    first = shown(taken)[0]
    assert (first.sha256, first.name, first.width, first.thumbnail) == ("a" * 64, "a.png", 800, "t" * 64)
    pending.add("c.txt", b"c")
    pending.put_back(taken)
    assert [f.name for f in pending.files] == ["a.png", "b.txt", "c.txt"], "not sent: back first"


def test_a_refused_upload_says_why_on_its_chip_and_holds_send_until_removed() -> None:
    pending = Pending()
    f = pending.add("fake.png", PNG)
    assert not isinstance(f, str)
    pending.waiting = "queue"
    pending.failed(f.key, "the file is not a PNG image Pillow can decode")
    assert chip_status(f) == "the file is not a PNG image Pillow can decode"
    assert pending.waiting is None, "the person decides what to do"
    assert pending.blocked("look") == "A file was refused: remove it (×) to send the rest."
    pending.remove(f.key)
    assert pending.blocked("look") is None


@pytest.mark.parametrize(("n", "words"), [
    (1, "1 byte"), (900, "900 bytes"), (14 * 1024, "14 KB"), (int(3.25 * 1024 * 1024), "3.2 MB")])
def test_sizes_in_words(n: int, words: str) -> None:
    assert human_size(n) == words


def test_a_prompts_files_in_one_line_and_images_fitted_without_enlarging() -> None:
    def att(kind: p.AttachmentKind, width: int | None = None, height: int | None = None,
            pages: int | None = None) -> p.MessageAttachment:
        return p.MessageAttachment(sha256="a" * 64, name="x", mime_type="x/x", bytes=2048,
                                   kind=kind, width=width, height=height, pages=pages)
    assert caption(att("image", width=1920, height=1080)) == "1920×1080 · 2 KB"
    assert caption(att("pdf", pages=1)) == "PDF, 1 page · 2 KB"
    assert caption(att("pdf", pages=12)) == "PDF, 12 pages · 2 KB"
    assert caption(att("text")) == "Text · 2 KB"
    assert fitted(1920, 1080, 180) == (180, 101)
    assert fitted(40, 30, 180) == (40, 30)
    assert fitted(None, None, 180) == (180, 180)


def test_models_that_cannot_see_are_marked_only_while_an_image_waits() -> None:
    providers = [
        p.ProviderChoice(name="main", model="gpt-4o", kind="openai", default=True, vision=True),
        p.ProviderChoice(name="local", model="llama3", kind="openai", vision=False),
    ]
    assert current_vision("", providers) is True, "the default provider"
    assert current_vision("local", providers) is False
    assert current_vision("gone", providers) is None, "a provider not listed: unknown"
    assert vision_of(object()) is None, "a backend that does not say: unknown"
    assert marked(Choice("local", "llama3"), providers, images=True) == "local · llama3" + NO_VISION_MARK
    assert marked(Choice("local", "llama3"), providers, images=False) == "local · llama3"
    assert marked(Choice("main", "gpt-4o"), providers, images=True) == "main · gpt-4o"
    assert marked(Choice("gone", "m"), providers, images=True) == "gone · m", "unknown: no mark"
    assert vision_notice(True, False) == NO_VISION_NOTICE
    assert vision_notice(True, None) is None
    assert vision_notice(False, False) is None


def test_a_queued_message_names_its_files_and_files_alone_are_not_blank() -> None:
    def f(name: str) -> p.MessageAttachment:
        return p.MessageAttachment(sha256="0" * 64, name=name, mime_type="text/plain", bytes=3,
                                   kind="text")

    assert queued_line("Fix it\nplease", None) == "Fix it"
    assert queued_line("Fix it", [f("a.log")]) == "Fix it · 1 file: a.log"
    assert queued_line("", [f("a.png"), f("b.png")]) == "2 files: a.png, b.png"
    assert queued_line("", [f(n) for n in "abcd"]) == "4 files: a, b, c, …"
