"""Fuzzing the watch line decoder: whatever the bytes and however they are cut,
it yields WatchEvents or raises one of the library's API errors (a DecodeError,
or a Status' own error), never anything else, and never more events than the
bytes hold objects."""

from __future__ import annotations

import itertools
import json
from collections.abc import Coroutine
from typing import Any, TypeVar

from fuzzing import FUZZ, json_values
from hypothesis import given
from hypothesis import strategies as st

from kubereflector import ApiError, WatchEvent
from kubereflector.client._lines import BATCH_BYTES, decode_watch_stream

T = TypeVar("T")
URL = "http://fuzz.test/api/v1/pods?watch=1"


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Drive a coroutine that only ever awaits ``asyncio.sleep(0)``."""
    try:
        while True:
            coro.send(None)
    except StopIteration as stop:
        result: T = stop.value
        return result


async def decode(data: bytes, cuts: list[int], max_line: int) -> list[WatchEvent]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    chunks = iter([data[a:b] for a, b in itertools.pairwise(points) if b > a])

    async def read() -> bytes:
        return next(chunks, b"")

    return [event async for event in decode_watch_stream(read, URL, max_line=max_line)]


def outcome(data: bytes, cuts: list[int], max_line: int) -> list[WatchEvent] | ApiError:
    try:
        return run(decode(data, cuts, max_line))
    except ApiError as err:  # DecodeError, TruncatedStreamError, or a Status' error
        return err


def check(data: bytes, cuts: list[int], max_line: int) -> None:
    result = outcome(data, cuts, max_line)
    if isinstance(result, ApiError):
        assert result.url == URL
        return
    assert all(type(e) is WatchEvent and type(e.type) is str for e in result)
    # Every event is an object (several may share a line, as client-go's streaming
    # decoder also accepts): never more events than the bytes could hold.
    assert len(result) <= data.count(b"{")


lines = st.one_of(
    st.binary(max_size=64),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.builds(
        lambda t, o: json.dumps({"type": t, "object": o}).encode(),
        st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]) | json_values,
        json_values,
    ),
    st.integers(1, 3000).map(lambda n: b'{"type":"ADDED","object":' + b"[" * n + b"]" * n + b"}"),
)


@FUZZ
@given(data=st.binary(max_size=2048), cuts=st.lists(st.integers(0, 4096), max_size=8))
def test_arbitrary_bytes(data: bytes, cuts: list[int]) -> None:
    check(data, cuts, BATCH_BYTES)


@FUZZ
@given(
    parts=st.lists(lines, max_size=12),
    endings=st.lists(st.sampled_from([b"\n", b"\r\n", b"", b"\n\n"]), max_size=12),
    cuts=st.lists(st.integers(0, 20_000), max_size=8),
    max_line=st.sampled_from([BATCH_BYTES, 2 * BATCH_BYTES, 64 * 1024 * 1024]),
)
def test_arbitrary_lines(
    parts: list[bytes], endings: list[bytes], cuts: list[int], max_line: int
) -> None:
    data = b"".join(p + (endings[i] if i < len(endings) else b"\n") for i, p in enumerate(parts))
    check(data, cuts, max_line)
