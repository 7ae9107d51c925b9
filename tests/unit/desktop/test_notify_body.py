"""A notification's body is the model's words as often as ours: on a server that reads markup
(the capability "body-markup"), a link or an image in them is shown as text."""

from __future__ import annotations

from desktop.qt.notify import plain_body


def test_markup_in_the_words_is_shown_not_followed_on_a_markup_server() -> None:
    words = 'Which? <a href="https://evil.example">here</a> <img src="file:///etc/passwd"> & more'
    assert plain_body(words, markup=True) == (
        'Which? &lt;a href="https://evil.example"&gt;here&lt;/a&gt; '
        '&lt;img src="file:///etc/passwd"&gt; &amp; more')


def test_a_server_without_markup_gets_the_words_as_they_are() -> None:
    assert plain_body("rm -rf <dir> && echo", markup=False) == "rm -rf <dir> && echo"
