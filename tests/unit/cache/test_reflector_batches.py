"""The Reflector writes a watch's changes a batch at a time: those that arrived
between two turns of the event loop, when the stream marks the turns (as the
REST client's decoder does), in one ``apply_watch_changes`` call.

The streams here are real decoders (``decode_watch_stream``) over scripted
chunks; time is a FakeClock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest

from kubereflector import ListOptions, ListResult, Reflector, ReflectorOptions, WatchChange
from kubereflector.client._lines import decode_watch_stream
from kubereflector.testing import FakeClock, settle
from running_task import running
from scripted_lw import RecordingStore, pod

pytestmark = pytest.mark.asyncio

URL = "http://kube.test/api/v1/pods?watch=1"


def line(etype: str, obj: Any) -> bytes:
    return msgspec.json.encode({"type": etype, "object": obj}) + b"\n"


class ChunkSource:
    """A ListerWatcher: one empty list at RV 1, then one watch decoding ``chunks``
    (each read returns the next one; ``before_read`` runs before each read),
    then nothing, without ending."""

    def __init__(
        self, chunks: list[bytes], before_read: Callable[[int], None] | None = None
    ) -> None:
        self.chunks = chunks
        self.before_read = before_read
        self.watched = False
        self.listed = False

    async def list(self, options: ListOptions) -> ListResult:
        if self.listed:  # one list only: a relist would hide what the watch wrote
            await asyncio.Event().wait()
        self.listed = True
        return ListResult([], "1")

    @asynccontextmanager
    async def watch(self, options: ListOptions) -> AsyncIterator[Any]:
        if self.watched:
            await asyncio.Event().wait()
        self.watched = True
        feed = iter(self.chunks)
        reads = 0

        async def read() -> bytes:
            nonlocal reads
            if self.before_read is not None:
                self.before_read(reads)
            reads += 1
            chunk = next(feed, None)
            if chunk is None:
                await asyncio.Event().wait()
            return chunk or b""

        yield decode_watch_stream(read, URL)


class BatchStore(RecordingStore):
    """A RecordingStore that takes batches (and refuses objects named "bad")."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[WatchChange]] = []

    def apply_watch_changes(
        self, changes: list[WatchChange]
    ) -> list[tuple[WatchChange, Exception]]:
        self.batches.append(list(changes))
        failed: list[tuple[WatchChange, Exception]] = []
        methods = {"ADDED": self.add, "MODIFIED": self.update, "DELETED": self.delete}
        for change in changes:
            if change[1]["metadata"]["name"] == "bad":
                failed.append((change, ValueError("bad is refused")))
                continue
            methods[change[0]](change[1])
        return failed


def make(source: Any, store: Any) -> Reflector:
    options = ReflectorOptions(idle_timeout=None, use_watch_list=False, backoff_jitter=0.0)
    return Reflector(source, store, clock=FakeClock(), options=options)


async def until(condition: Callable[[], bool]) -> None:
    """Let the loop run (no time passes) until ``condition`` holds; fail after
    a bounded number of turns."""
    for _ in range(100):
        if condition():
            return
        await settle(10)
    raise AssertionError("the condition never held")


async def test_a_turns_changes_reach_the_store_in_one_call_in_order() -> None:
    data = b"".join(line("ADDED", pod(f"p{i}", str(i + 2))) for i in range(50))
    data += line("MODIFIED", pod("p0", "60", spec={"x": 1})) + line("DELETED", pod("p1", "61"))
    store = BatchStore()
    reflector = make(ChunkSource([data]), store)
    async with running(reflector):
        await until(lambda: reflector.last_sync_resource_version == "61")
    assert len(store.batches) < 52 // 2, "changes go in batches"
    assert all(store.batches)
    changes = [change for batch in store.batches for change in batch]
    assert [(t, o["metadata"]["name"]) for t, o in changes] == [
        *(("ADDED", f"p{i}") for i in range(50)),
        ("MODIFIED", "p0"),
        ("DELETED", "p1"),
    ]
    assert store.get_by_key("default/p0")["spec"] == {"x": 1}
    assert store.get_by_key("default/p1") is None
    assert store.last_store_sync_resource_version() == "61"


async def test_what_a_chunk_brought_is_written_before_the_next_read() -> None:
    store = BatchStore()
    seen: list[list[str]] = []
    source = ChunkSource(
        [line("ADDED", pod("a", "2")), line("ADDED", pod("b", "3"))],
        before_read=lambda _: seen.append(store.names()),
    )
    reflector = make(source, store)
    async with running(reflector):
        await until(lambda: reflector.last_sync_resource_version == "3")
        await until(lambda: len(seen) == 3)
    assert seen == [[], ["default/a"], ["default/a", "default/b"]]


async def test_the_changes_before_an_error_event_are_written_first() -> None:
    status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    data = line("ADDED", pod("a", "2")) + line("ADDED", pod("b", "3")) + line("ERROR", status)
    store = BatchStore()
    errors: list[BaseException] = []
    reflector = Reflector(
        ChunkSource([data]),
        store,
        clock=FakeClock(),
        options=ReflectorOptions(idle_timeout=None, use_watch_list=False),
        on_watch_error=lambda _r, err: errors.append(err),
    )
    async with running(reflector):
        await until(lambda: bool(errors))
    assert store.names() == ["default/a", "default/b"]
    assert store.batches == [[("ADDED", pod("a", "2")), ("ADDED", pod("b", "3"))]]
    assert reflector.last_sync_resource_version == "3"


async def test_a_change_the_store_refuses_is_logged_and_the_others_are_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    data = line("ADDED", pod("a", "2")) + line("ADDED", pod("bad", "3"))
    data += line("ADDED", pod("c", "4"))
    store = BatchStore()
    reflector = make(ChunkSource([data]), store)
    with caplog.at_level(logging.ERROR, logger="kubereflector.reflector"):
        async with running(reflector):
            await until(lambda: reflector.last_sync_resource_version == "4")
    assert store.names() == ["default/a", "default/c"]
    (record,) = [r for r in caplog.records if "could not apply" in r.getMessage()]
    assert "ADDED" in record.getMessage()
    assert "bad is refused" in record.getMessage()
    assert reflector.source in record.getMessage()


async def test_a_store_without_batches_gets_one_call_per_change() -> None:
    data = b"".join(line("ADDED", pod(f"p{i}", str(i + 2))) for i in range(5))
    store = RecordingStore()
    reflector = make(ChunkSource([data]), store)
    async with running(reflector):
        await until(lambda: reflector.last_sync_resource_version == "6")
    assert store.call_kinds() == ["replace", "add", "add", "add", "add", "add"]


async def test_a_stream_without_turn_marks_is_written_one_event_at_a_time() -> None:
    events = [line("ADDED", pod(f"p{i}", str(i + 2))) for i in range(3)]

    class Unmarked(ChunkSource):
        @asynccontextmanager
        async def watch(self, options: ListOptions) -> AsyncIterator[Any]:
            async with super().watch(options) as stream:
                yield (event async for event in stream)  # no with_turn_marks

    store = BatchStore()
    reflector = make(Unmarked([b"".join(events)]), store)
    async with running(reflector):
        await until(lambda: reflector.last_sync_resource_version == "4")
    assert [len(batch) for batch in store.batches] == [1, 1, 1]


async def test_a_store_that_raises_for_a_batch_is_logged_and_the_watch_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Raising(BatchStore):
        def apply_watch_changes(
            self, changes: list[WatchChange]
        ) -> list[tuple[WatchChange, Exception]]:
            if any(o["metadata"]["name"] == "bad" for _, o in changes):
                raise RuntimeError("the whole batch is refused")
            return super().apply_watch_changes(changes)

    store = Raising()
    source = ChunkSource([line("ADDED", pod("bad", "2")), line("ADDED", pod("c", "3"))])
    reflector = make(source, store)
    with caplog.at_level(logging.ERROR, logger="kubereflector.reflector"):
        async with running(reflector):
            await until(lambda: reflector.last_sync_resource_version == "3")
    assert store.names() == ["default/c"]
    (record,) = [r for r in caplog.records if "could not apply" in r.getMessage()]
    assert "the whole batch is refused" in record.getMessage()
    assert reflector.source in record.getMessage()
