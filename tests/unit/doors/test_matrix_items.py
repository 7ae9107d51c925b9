"""Reading Matrix events into the door's items (backend/doors/matrix.py): the sender and the
id come from the server's event, a reply's quoted fallback is not part of the prompt, and an
edit of an earlier message is not a new one."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from backend.doors import matrix
from backend.doors.base import Message, Reaction


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


def test_images_and_files_are_not_prompts() -> None:
    assert matrix._item("!r", ev({"type": "m.room.message", "sender": "@a:x", "event_id": "$6",
                                  "content": {"msgtype": "m.image", "body": "cat.png"}})) is None


def test_html_from_the_model_is_escaped_not_passed_on() -> None:
    content = matrix._content("<img src=x onerror=alert(1)> **bold**", notice=False)
    assert "<img" not in content["formatted_body"]
    assert "<strong>bold</strong>" in content["formatted_body"]


def test_plain_text_goes_without_html() -> None:
    assert "formatted_body" not in matrix._content("just words", notice=True)
    assert matrix._content("just words", notice=True)["msgtype"] == "m.notice"
