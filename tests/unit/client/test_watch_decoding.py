"""Decoding watch streams: every chunking, big objects, bad lines, truncation.

The splitter (``kubereflector.client._lines``) is driven with scripted chunks;
the same behaviours are then checked through ``Client.watch`` over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Iterator
from typing import Any, TypeVar

import msgspec
import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fake_http import serve, stream_lines
from kubereflector import (
    CompactObject,
    DecodeError,
    ExpiredError,
    ListOptions,
    ObjectMode,
    WatchEvent,
)
from kubereflector.client import Client, ClientConfig
from kubereflector.client._lines import BATCH_BYTES, YIELD_COST, decode_watch_stream
from kubereflector.errors import failure_status

T = TypeVar("T")
URL = "http://kube.test/api/v1/pods?watch=1"
SECRET = "c3VwZXItc2VjcmV0LXBhc3N3b3Jk"


def event(etype: str, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": etype,
        "object": {"kind": "Pod", "metadata": {"name": name, "resourceVersion": "1"}, **extra},
    }


def encode(events: Iterable[dict[str, Any]]) -> bytes:
    return b"".join(msgspec.json.encode(e) + b"\n" for e in events)


def chunked(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    points = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


MODES = pytest.mark.parametrize("mode", ["dict", "compact"])
"""The splitter's tests run in both object modes (compact objects equal their dicts)."""


async def decode(chunks: Iterable[bytes], mode: ObjectMode = "dict") -> list[WatchEvent]:
    """The stream's events; read with turn marks, the same events come, in order."""
    chunks = list(chunks)
    got = [e async for e in decode_watch_stream(reader(chunks), URL, object_mode=mode)]
    marked = decode_watch_stream(reader(chunks), URL, object_mode=mode).with_turn_marks()
    assert [e async for e in marked if e is not None] == got
    expected_type = CompactObject if mode == "compact" else dict
    assert all(type(e.object) is expected_type for e in got if e.type != "ERROR")
    return got


async def decode_until_error(
    chunks: Iterable[bytes], mode: ObjectMode = "dict"
) -> tuple[list[WatchEvent], DecodeError]:
    """The events before the stream's error, and the error; read with turn
    marks, the same events come before the same error."""
    chunks = list(chunks)
    got, error = await collect_until_error(
        decode_watch_stream(reader(chunks), URL, object_mode=mode)
    )
    marked = decode_watch_stream(reader(chunks), URL, object_mode=mode).with_turn_marks()
    events, same = await collect_until_error(without_marks(marked))
    assert events == got
    assert str(same) == str(error)
    return got, error


async def without_marks(events: AsyncIterator[WatchEvent | None]) -> AsyncIterator[WatchEvent]:
    async for event in events:
        if event is not None:
            yield event


E = TypeVar("E", bound=Exception)


async def collect_until_error(
    events: AsyncIterator[WatchEvent],
    error: type[E] = DecodeError,  # type: ignore[assignment]
) -> tuple[list[WatchEvent], E]:
    """The events before the stream's error (a DecodeError by default), and the error."""
    got: list[WatchEvent] = []

    async def consume() -> None:
        while (event := await anext(events, None)) is not None:
            got.append(event)

    with pytest.raises(error) as info:
        await consume()
    return got, info.value


def reader(chunks: Iterable[bytes]) -> Callable[[], Awaitable[bytes]]:
    feed = iter(chunks)

    async def read() -> bytes:
        return next(feed, b"")

    return read


@contextlib.asynccontextmanager
async def loop_turns() -> AsyncIterator[list[int]]:
    """A one-element list counting the turns of the event loop while inside."""
    turns = [0]
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            turns[0] += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    try:
        yield turns
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


def as_events(events: Iterable[dict[str, Any]]) -> list[WatchEvent]:
    return [WatchEvent(e["type"], e["object"]) for e in events]


# -- the splitter ----------------------------------------------------------------

THREE = [event("ADDED", "a"), event("MODIFIED", "b", spec={"x": "é\n"}), event("DELETED", "c")]


@MODES
@pytest.mark.asyncio
async def test_every_split_point_pair_gives_the_same_events(mode: ObjectMode) -> None:
    data = encode(THREE)
    expected = as_events(THREE)
    for i in range(len(data) + 1):
        for j in range(i, len(data) + 1, 7):
            assert await decode(chunked(data, [i, j]), mode) == expected, (i, j)


@MODES
@pytest.mark.asyncio
async def test_one_byte_chunks(mode: ObjectMode) -> None:
    data = encode(THREE)
    assert await decode((data[i : i + 1] for i in range(len(data))), mode) == as_events(THREE)


@pytest.mark.asyncio
async def test_events_are_watch_event_tuples() -> None:
    (first, *_) = await decode([encode(THREE)])
    assert type(first) is WatchEvent
    etype, obj = first
    assert (etype, obj) == (first.type, first.object) == ("ADDED", THREE[0]["object"])


def run_without_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Drive a coroutine that only ever awaits ``asyncio.sleep(0)`` (cheaper than a loop)."""
    try:
        while True:
            coro.send(None)
    except StopIteration as stop:
        result: T = stop.value
        return result


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@MODES
# 50 examples per object mode: as many as one mode had before.
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    objects=st.lists(st.dictionaries(st.text(max_size=8), json_values), min_size=1, max_size=8),
    cuts=st.lists(st.integers(0, 5000), max_size=12),
)
def test_any_chunking_of_any_events(
    mode: ObjectMode, objects: list[dict[str, Any]], cuts: list[int]
) -> None:
    events = [{"type": "ADDED", "object": o} for o in objects]
    data = encode(events)
    got = run_without_loop(decode(chunked(data, [c % (len(data) + 1) for c in cuts]), mode))
    assert got == as_events(events)


@MODES
@pytest.mark.asyncio
async def test_a_large_object_split_across_many_chunks(mode: ObjectMode) -> None:
    big = event("ADDED", "big", data={"blob": "x" * 1_500_000, "n": list(range(1000))})
    small = event("MODIFIED", "small")
    data = encode([small, big, small])
    cuts = range(3, len(data), 1499)  # about a thousand chunks
    got = await decode(chunked(data, cuts), mode)
    assert got == as_events([small, big, small])
    assert len(got[1].object["data"]["blob"]) == 1_500_000


@MODES
@pytest.mark.asyncio
async def test_large_object_in_one_chunk_with_neighbours(mode: ObjectMode) -> None:
    big = event("ADDED", "big", data={"blob": "y" * (3 * BATCH_BYTES)})
    events = [event("ADDED", f"p{i}") for i in range(50)] + [big, event("DELETED", "z")]
    assert await decode([encode(events)], mode) == as_events(events)


@pytest.mark.asyncio
async def test_many_small_events_in_one_chunk_do_not_hold_the_loop() -> None:
    events = [event("ADDED", f"pod-{i}") for i in range(20_000)]
    data = encode(events)
    assert len(data) > 4 * YIELD_COST
    async with loop_turns() as turns:
        start = turns[0]
        got = await decode([data])  # the consumer itself never awaits anything
        during = turns[0] - start
    assert got == as_events(events)
    assert during >= len(data) // YIELD_COST


@pytest.mark.asyncio
async def test_a_turn_mark_comes_before_each_turn_of_the_loop_and_each_read() -> None:
    events = [event("ADDED", f"pod-{i}") for i in range(5_000)]
    data = encode(events)
    reads = 0

    def read_counted(chunks: list[bytes]) -> Callable[[], Awaitable[bytes]]:
        read = reader(chunks)

        async def counted() -> bytes:
            nonlocal reads
            reads += 1
            return await read()

        return counted

    got: list[WatchEvent] = []
    marks: list[int] = []  # the reads made before each mark
    previous: tuple[int, int] | None = None  # (ticks, reads) at the last event
    half = len(data) // 2
    stream = decode_watch_stream(read_counted([data[:half], data[half:]]), URL)
    async with loop_turns() as turns:
        async for item in stream.with_turn_marks():
            if item is None:
                marks.append(reads)
                previous = None
                continue
            if previous is not None:  # no turn of the loop and no read between two events
                assert (turns[0], reads) == previous
            previous = (turns[0], reads)
            got.append(item)
    assert got == as_events(events)
    assert len(marks) >= len(data) // YIELD_COST
    assert marks.count(1) > 1  # marks within the first chunk too, not only before reads


@pytest.mark.asyncio
async def test_a_stream_is_iterated_once_with_or_without_marks() -> None:
    stream = decode_watch_stream(reader([encode(THREE)]), URL)
    assert await anext(stream) == as_events(THREE)[0]
    with pytest.raises(RuntimeError, match="with or without turn marks"):
        stream.with_turn_marks()
    assert [e async for e in stream] == as_events(THREE)[1:]


@MODES
@pytest.mark.asyncio
async def test_blank_lines_and_crlf_are_tolerated(mode: ObjectMode) -> None:
    a, b = (msgspec.json.encode(e) for e in THREE[:2])
    data = b"\n" + a + b"\r\n\r\n  \n" + b + b"\n\n"
    assert await decode([data], mode) == as_events(THREE[:2])
    assert await decode(chunked(data, range(0, len(data), 3)), mode) == as_events(THREE[:2])


@MODES
@pytest.mark.asyncio
async def test_a_last_line_without_newline_is_delivered_when_complete(mode: ObjectMode) -> None:
    data = encode(THREE)[:-1]
    assert await decode(chunked(data, [10]), mode) == as_events(THREE)


@MODES
@pytest.mark.asyncio
async def test_error_event_keeps_its_status_intact(mode: ObjectMode) -> None:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": "too old resource version: 1 (5)",
        "reason": "Expired",
        "code": 410,
        "details": {"causes": [{"reason": "x", "message": "y"}], "retryAfterSeconds": 3},
    }
    (got,) = await decode([encode([{"type": "ERROR", "object": status}])], mode)
    assert got == WatchEvent("ERROR", status)
    assert type(got.object) is dict


@MODES
@pytest.mark.parametrize(
    ("line", "detail"),
    [
        (b'{"type": "ADDED", "object": {"secret": "' + SECRET.encode() + b'"', "malformed"),
        (b'{"object": {"data": "' + SECRET.encode() + b'"}}', "missing required field `type`"),
        (b'{"type": 1, "object": {}}', "Expected `str`, got `int`"),
        (b'["' + SECRET.encode() + b'"]', "Expected `object`, got `array`"),
        (b"<html>" + SECRET.encode() + b"</html>", "malformed"),
    ],
)
@pytest.mark.asyncio
async def test_a_bad_line_raises_after_the_good_ones(
    line: bytes, detail: str, mode: ObjectMode
) -> None:
    good = encode(THREE[:2])
    data = good + line + b"\n" + encode(THREE[2:])
    for chunks in ([data], chunked(data, range(0, len(data), 5))):
        got, err = await decode_until_error(chunks, mode)
        assert got == as_events(THREE[:2])
        text = str(err)
        assert detail in text
        assert f"byte {len(good)}" in text
        assert f"({len(line) + 1} bytes)" in text
        assert URL in text
        assert SECRET not in text
        assert err.url == URL


@MODES
@pytest.mark.asyncio
async def test_a_bad_line_deep_in_a_big_chunk_is_located(mode: ObjectMode) -> None:
    events = [event("ADDED", f"p{i}") for i in range(2000)]
    good = encode(events)
    data = good + b"{nope}\n"
    got, err = await decode_until_error([data], mode)
    assert got == as_events(events)
    assert f"byte {len(good)} " in str(err)


@MODES
@pytest.mark.parametrize("cut", [1, 10, 40])
@pytest.mark.asyncio
async def test_a_stream_ending_inside_a_line_is_truncated(cut: int, mode: ObjectMode) -> None:
    good = encode(THREE[:2])
    partial = msgspec.json.encode(event("ADDED", "c", data={"token": SECRET}))[:cut]
    got, err = await decode_until_error(
        chunked(good + partial, [len(good) - 3, len(good) + 1]), mode
    )
    assert got == as_events(THREE[:2])
    assert "truncated" in str(err)
    assert f"at byte {len(good)}" in str(err)
    assert SECRET not in str(err)


@pytest.mark.parametrize(
    ("obj", "what"),
    [
        ({"kind": "Pod", "metadata": {"name": "p"}}, "a 'Pod'"),
        ({"metadata": {"name": "p"}}, "an object"),
        ("EOF", "a str"),
        (None, "a NoneType"),
    ],
)
@MODES
@pytest.mark.asyncio
async def test_an_error_event_without_a_status_raises_after_the_good_ones(
    obj: Any, what: str, mode: ObjectMode
) -> None:
    data = encode([*THREE[:2], {"type": "ERROR", "object": obj}, THREE[2]])
    for chunks in ([data], chunked(data, range(0, len(data), 7))):
        got, err = await decode_until_error(chunks, mode)
        assert got == as_events(THREE[:2])
        assert str(err) == (
            f"0 DecodeError: a watch ERROR event carried {what} instead of a Status ({URL})"
        )


@MODES
@pytest.mark.parametrize(
    "status",
    [
        {"kind": "Status", "code": 500, "message": f"echo {SECRET}"},
        # Shaped so that it decodes as a compact object too (no field a compact
        # object has no place for).
        {"kind": "Status", "apiVersion": "v1", "metadata": {"selfLink": SECRET}},
    ],
)
@pytest.mark.asyncio
async def test_an_error_events_status_passes_through_the_hook(
    status: dict[str, Any], mode: ObjectMode
) -> None:
    data = encode([THREE[0], {"type": "ERROR", "object": status}])

    def hide(found: Any) -> Any:
        text = msgspec.json.encode(found).replace(SECRET.encode(), b"<redacted>")
        return msgspec.json.decode(text)

    for chunks in ([data], chunked(data, [5, 50])):
        stream = decode_watch_stream(reader(chunks), URL, redact=hide, object_mode=mode)
        got = [e async for e in stream]
        assert got == [as_events(THREE)[0], WatchEvent("ERROR", hide(status))]
        assert SECRET not in repr(got[1].object)
        assert type(got[1].object) is dict


@MODES
@pytest.mark.parametrize("split", [False, True])
@pytest.mark.asyncio
async def test_a_line_that_is_a_status_raises_its_error(split: bool, mode: ObjectMode) -> None:
    # A server that answers the watch request with a bare Status and status 200.
    status = failure_status(410, "Expired", "too old resource version")
    data = encode([THREE[0]]) + msgspec.json.encode(status) + b"\n"
    chunks = chunked(data, range(0, len(data), 9)) if split else [data]
    stream = decode_watch_stream(reader(chunks), URL, object_mode=mode)
    got, err = await collect_until_error(stream, ExpiredError)
    assert got == as_events(THREE[:1])
    assert str(err) == f"410 Expired: too old resource version ({URL})"


@MODES
@pytest.mark.asyncio
async def test_a_deeply_nested_line_is_a_decode_error(mode: ObjectMode) -> None:
    deep = b'{"type": "ADDED", "object": {"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}\n"
    data = encode(THREE[:1]) + deep + encode(THREE[1:])
    for chunks in ([data], chunked(data, [len(data) // 2])):
        got, err = await decode_until_error(chunks, mode)
        assert got == as_events(THREE[:1])
        assert "malformed watch event" in str(err)
        assert "recursion" in str(err)


# -- the line limit ----------------------------------------------------------------

LIMIT = 8 * BATCH_BYTES


async def decode_limited(
    chunks: Iterable[bytes], mode: ObjectMode = "dict"
) -> tuple[list[WatchEvent], DecodeError, int]:
    """Decode with ``max_line=LIMIT``: the events, the error, how many reads were made."""
    feed = iter(chunks)
    reads = 0

    async def read() -> bytes:
        nonlocal reads
        reads += 1
        return next(feed, b"")

    stream = decode_watch_stream(read, URL, max_line=LIMIT, object_mode=mode)
    got, err = await collect_until_error(stream)
    return got, err, reads


def sized_line(size: int) -> bytes:
    """A valid event line of exactly ``size`` bytes, newline included."""
    head = msgspec.json.encode(event("ADDED", "big", data=""))
    pad = size - len(head) - 1
    return msgspec.json.encode(event("ADDED", "big", data="x" * pad)) + b"\n"


@MODES
@pytest.mark.asyncio
async def test_a_line_at_the_limit_is_decoded(mode: ObjectMode) -> None:
    data = encode(THREE[:1]) + sized_line(LIMIT) + encode(THREE[1:])
    for cuts in ([], [10], range(0, len(data), 1000)):
        stream = decode_watch_stream(
            reader(chunked(data, cuts)), URL, max_line=LIMIT, object_mode=mode
        )
        got = [e async for e in stream]
        assert len(got) == 4
        assert len(got[1].object["data"]) > LIMIT - 200


@pytest.mark.parametrize(
    "cuts",
    [
        [],  # in one chunk, longer than a batch
        [30],  # the rest of a chunk, after a newline
        "every 1000 bytes",  # gathered across chunks
    ],
)
@MODES
@pytest.mark.asyncio
async def test_a_line_over_the_limit_breaks_the_stream(cuts: Any, mode: ObjectMode) -> None:
    head = encode(THREE[:1])
    data = head + sized_line(LIMIT + 1) + encode(THREE[1:])
    if cuts == "every 1000 bytes":
        cuts = range(0, len(data), 1000)
    got, err, _ = await decode_limited(chunked(data, cuts), mode)
    assert got == as_events(THREE[:1])
    assert str(err) == (
        f"0 DecodeError: watch event at byte {len(head)} of the stream is longer than the "
        f"limit of {LIMIT} bytes: treating the stream as broken ({URL})"
    )


@MODES
@pytest.mark.asyncio
async def test_an_endless_line_stops_being_read_at_the_limit(mode: ObjectMode) -> None:
    def endless() -> Iterator[bytes]:
        while True:
            yield b"x" * 1000

    got, err, reads = await decode_limited(endless(), mode)
    assert got == []
    assert "longer than the limit" in str(err)
    assert reads == LIMIT // 1000 + 1  # memory bounded: nothing read past the limit


# -- through Client.watch ---------------------------------------------------------


async def watch_all(
    handler: Any, options: ListOptions | None = None
) -> tuple[list[WatchEvent], BaseException | None]:
    async with serve() as server, Client(ClientConfig(server=server.url)) as client:
        server.route("GET", "/api/v1/pods", handler)
        got: list[WatchEvent] = []
        try:
            async with client.watch("/api/v1/pods", options or ListOptions()) as events:
                while (e := await anext(events, None)) is not None:
                    got.append(e)
        except Exception as err:
            return got, err
        return got, None


@pytest.mark.asyncio
async def test_http_watch_delivers_events_across_writes() -> None:
    data = encode(THREE)

    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream_lines(request, data[:5], data[5:60], data[60:])

    got, err = await watch_all(handler)
    assert err is None
    assert got == as_events(THREE)


@pytest.mark.asyncio
async def test_http_watch_with_a_malformed_line_raises_decode_error() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream_lines(request, encode(THREE[:1]), b'{"type": "ADDED", "obj\n')

    got, err = await watch_all(handler)
    assert got == as_events(THREE[:1])
    assert isinstance(err, DecodeError)
    assert "/api/v1/pods?watch=1" in str(err)


@pytest.mark.asyncio
async def test_http_watch_ending_mid_line_is_truncated() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream_lines(request, encode(THREE[:1]), b'{"type": "ADDED", "object": {')

    got, err = await watch_all(handler)
    assert got == as_events(THREE[:1])
    assert isinstance(err, DecodeError)
    assert "truncated" in str(err)


@pytest.mark.asyncio
async def test_http_watch_cut_by_the_connection_is_truncated() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)
        await response.write(encode(THREE[:1]) + b'{"type": "ADDED", "ob')
        assert request.transport is not None
        request.transport.close()  # no terminating chunk: the body is cut short
        return response

    got, err = await watch_all(handler)
    assert got == as_events(THREE[:1])
    assert isinstance(err, DecodeError)
    assert "truncated" in str(err)


@pytest.mark.asyncio
async def test_http_watch_of_a_non_json_body_raises_decode_error() -> None:
    async def handler(_request: web.Request) -> web.StreamResponse:
        return web.Response(text="<html>welcome to the proxy</html>\n", content_type="text/html")

    got, err = await watch_all(handler)
    assert got == []
    assert isinstance(err, DecodeError)


@pytest.mark.asyncio
async def test_http_watch_can_be_left_early_and_the_client_reused() -> None:
    release = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(encode(THREE))
        await release.wait()  # never ends on its own
        return response

    async with serve() as server, Client(ClientConfig(server=server.url)) as client:
        server.route("GET", "/api/v1/pods", handler)
        server.json("GET", "/api/v1/namespaces", {"items": []})
        async with client.watch("/api/v1/pods", ListOptions()) as events:
            first = await asyncio.wait_for(anext(aiter(events)), 5)
            assert first == as_events(THREE)[0]
        assert await client.get("/api/v1/namespaces") == {"items": []}
        release.set()


@pytest.mark.asyncio
@MODES
async def test_a_keep_filter_drops_changes_as_they_are_decoded(mode: ObjectMode) -> None:
    """A shard's filter: added, modified and deleted objects it refuses never become
    events, in any chunking; bookmarks and errors always pass; the order holds."""
    events = [event(t, f"p{i}") for i, t in enumerate(["ADDED", "MODIFIED", "DELETED"] * 20)]
    events.insert(7, {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"name": ""}}})
    data = encode(events)

    def keep(obj: Any) -> bool:
        return int(obj["metadata"]["name"][1:]) % 3 != 1

    wanted = [
        (e["type"], e["object"]["metadata"]["name"])
        for e in events
        if e["type"] == "BOOKMARK" or keep(e["object"])
    ]
    for cuts in ([], [len(data) // 3, len(data) // 2], range(7, len(data), 97)):
        chunks = chunked(data, cuts)
        got = [
            (e.type, e.object["metadata"]["name"])
            async for e in decode_watch_stream(reader(chunks), URL, object_mode=mode, keep=keep)
        ]
        assert got == wanted
        marked = decode_watch_stream(reader(chunks), URL, object_mode=mode, keep=keep)
        assert [
            (e.type, e.object["metadata"]["name"])
            async for e in marked.with_turn_marks()
            if e is not None
        ] == wanted
    status = failure_status(410, "Expired", "too old")
    error = encode([event("ADDED", "p1"), {"type": "ERROR", "object": status}])
    got_error = [e async for e in decode_watch_stream(reader([error]), URL, keep=lambda o: False)]
    assert [e.type for e in got_error] == ["ERROR"]
