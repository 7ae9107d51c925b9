"""Reading Matrix events into the door's items (backend/doors/matrix.py): the sender and the
id come from the server's event, a reply's quoted fallback is not part of the prompt, and an
edit of an earlier message is not a new one."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from backend.doors import matrix
from backend.doors.base import File, Message, Reaction, TransportError


def ev(source: dict[str, Any]) -> SimpleNamespace:
    return SimpleNamespace(source=source)


def test_a_text_message_is_a_message_from_its_server_vouched_sender() -> None:
    item = matrix._item("!r", ev({"type": "m.room.message", "sender": "@a:x", "event_id": "$1",
                                  "content": {"msgtype": "m.text", "body": "hi"}}))
    assert item == Message("!r", "$1", "@a:x", "hi")


def test_an_edit_is_not_a_new_prompt() -> None:
    item = matrix._item("!r", ev({"type": "m.room.message", "sender": "@a:x", "event_id": "$2",
                                  "content": {"msgtype": "m.text", "body": "* hi",
                                              "m.relates_to": {"rel_type": "m.replace", "event_id": "$1"}}}))
    assert item is None


def test_a_reply_drops_the_quoted_fallback_and_names_its_target() -> None:
    body = "> <@bot:x> Approval needed\n> rm -rf build\n\n/approve session"
    item = matrix._item("!r", ev({"type": "m.room.message", "sender": "@a:x", "event_id": "$3",
                                  "content": {"msgtype": "m.text", "body": body,
                                              "m.relates_to": {"m.in_reply_to": {"event_id": "$ap"}}}}))
    assert item == Message("!r", "$3", "@a:x", "/approve session", reply_to="$ap")


def test_a_reaction_names_the_message_it_reacts_to() -> None:
    item = matrix._item("!r", ev({"type": "m.reaction", "sender": "@a:x", "event_id": "$4",
                                  "content": {"m.relates_to": {"rel_type": "m.annotation",
                                                               "event_id": "$ap", "key": "👍"}}}))
    assert item == Reaction("!r", "$4", "@a:x", "$ap", "👍")


def test_an_encrypted_message_is_marked_unreadable() -> None:
    item = matrix._item("!r", ev({"type": "m.room.encrypted", "sender": "@a:x", "event_id": "$5",
                                  "content": {"algorithm": "m.megolm.v1.aes-sha2"}}))
    assert isinstance(item, Message)
    assert item.encrypted
    assert item.text == ""


def test_an_image_is_a_file_named_by_its_body_without_a_caption() -> None:
    item = matrix._item("!r", ev({"type": "m.room.message", "sender": "@a:x", "event_id": "$6",
                                  "content": {"msgtype": "m.image", "body": "cat.png",
                                              "url": "mxc://x/abc",
                                              "info": {"mimetype": "image/png", "size": 12}}}))
    assert item == File("!r", "$6", "@a:x", "cat.png", "", "mxc://x/abc", "image/png", 12,
                        "m.image")


def test_a_body_other_than_the_filename_is_the_caption() -> None:
    item = matrix._item("!r", ev({"type": "m.room.message", "sender": "@a:x", "event_id": "$7",
                                  "content": {"msgtype": "m.file", "body": "look at this",
                                              "filename": "dir/../notes.txt",
                                              "url": "mxc://x/n", "info": {"size": True}}}))
    assert isinstance(item, File)
    assert (item.name, item.caption) == ("notes.txt", "look at this"), "the name's last part"
    assert (item.declared_type, item.declared_bytes) == (None, None)


def test_an_encrypted_file_has_no_url_and_a_video_is_a_file_too() -> None:
    secret = matrix._item("!r", ev({"type": "m.room.message", "sender": "@a:x", "event_id": "$8",
                                    "content": {"msgtype": "m.image", "body": "s.png",
                                                "file": {"url": "mxc://x/e"}}}))
    assert isinstance(secret, File)
    assert secret.url is None
    video = matrix._item("!r", ev({"type": "m.room.message", "sender": "@a:x", "event_id": "$9",
                                   "content": {"msgtype": "m.video", "body": "", "url": "mxc://x/v"}}))
    assert isinstance(video, File)
    assert (video.kind, video.name) == ("m.video", "file")


def test_only_mxc_urls_are_downloaded() -> None:
    assert matrix._mxc("mxc://tk.test/AbC") == ("tk.test", "AbC")
    for bad in ("https://tk.test/AbC", "mxc://tk.test/", "mxc:///AbC", "mxc://tk.test/a/b"):
        with pytest.raises(TransportError):
            matrix._mxc(bad)


def test_html_from_the_model_is_escaped_not_passed_on() -> None:
    content = matrix._content("<img src=x onerror=alert(1)> **bold**", notice=False)
    assert "<img" not in content["formatted_body"]
    assert "<strong>bold</strong>" in content["formatted_body"]


def test_plain_text_goes_without_html() -> None:
    assert "formatted_body" not in matrix._content("just words", notice=True)
    assert matrix._content("just words", notice=True)["msgtype"] == "m.notice"
