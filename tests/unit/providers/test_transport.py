"""SSE line splitting: the SSE line ends only, across chunk borders, and never a line past the bound."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from backend.errors import ProviderError
from backend.providers.transport import sse_lines


class Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.read = 0  # how many chunks were pulled

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.read += 1
            yield chunk


async def _lines(chunks: list[bytes], limit: int = 1024) -> list[str]:
    response = httpx.Response(200, stream=Chunks(chunks))
    return [line async for line in sse_lines(response, limit)]


async def test_lines_end_at_crlf_lf_or_cr_even_across_chunks() -> None:
    body = [b"data: a\r", b"\ndata: b\n", b"\ndata: c\rdata: d\r\n\r", b"\n", b"tail"]
    assert await _lines(body) == ["data: a", "data: b", "", "data: c", "data: d", "", "tail"]


async def test_other_unicode_line_breaks_stay_inside_the_line() -> None:
    text = 'data: {"t": "a\u2028b\u0085c\x1cd"}\n\n'
    assert await _lines([text.encode()]) == ['data: {"t": "a\u2028b\u0085c\x1cd"}', ""]


async def test_a_multibyte_character_split_across_chunks_is_kept() -> None:
    raw = "data: é漢\U0001f600\n".encode()
    assert await _lines([raw[i:i + 1] for i in range(len(raw))]) == ["data: é漢\U0001f600"]


async def test_a_line_past_the_bound_fails_before_it_is_read_whole() -> None:
    stream = Chunks([b"data: ok\n"] + [b"x" * 100] * 1000 + [b"\n"])
    response = httpx.Response(200, stream=stream)
    seen: list[str] = []

    async def read() -> None:
        async for line in sse_lines(response, limit=1000):
            seen.append(line)

    with pytest.raises(ProviderError) as err:
        await read()
    assert seen == ["data: ok"]
    assert err.value.kind == "server_error"
    assert stream.read < 20, "the rest of the line is never pulled"


async def test_a_line_of_exactly_the_bound_passes() -> None:
    assert await _lines([b"y" * 1000 + b"\r\n"], limit=1000) == ["y" * 1000]


@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\r\n"), max_size=20),
                max_size=10),
       st.sampled_from(["\n", "\r\n", "\r"]), st.integers(min_value=1, max_value=7))
async def test_any_lines_in_any_chunking_come_back(lines: list[str], end: str, size: int) -> None:
    raw = "".join(line + end for line in lines).encode("utf-8", "surrogatepass")
    chunks = [raw[i:i + size] for i in range(0, len(raw), size)]
    got = await _lines(chunks)
    assert got == [line.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
                   for line in lines]
