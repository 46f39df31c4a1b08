"""A ListerWatcher whose every answer is scripted by the test, and a recording store.

For the Reflector cases FakeControllerSource cannot stage (a server that
ignores paging, a stream that ends early, an error at an exact point).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from kubereflector import Cache, ListOptions, ListResult, WatchEvent

BLOCK = object()
"""In a watch script: stay open, delivering nothing, until closed."""

ScriptItem = WatchEvent | BaseException | object


def pod(name: str, rv: str, namespace: str = "default", **extra: Any) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv},
        **extra,
    }


def bookmark(rv: str, *, initial_end: bool = False) -> WatchEvent:
    metadata: dict[str, Any] = {"resourceVersion": rv}
    if initial_end:
        metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
    return WatchEvent("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": metadata})


class ScriptedListerWatcher:
    """Answers list calls from ``lists`` and watch calls from ``watches``, in order.

    A list entry is a ListResult or an exception to raise, or an asyncio.Event
    to wait on forever (a list that hangs). A watch entry is an exception to
    raise on opening, or a sequence of WatchEvents, exceptions (raised from the
    stream), asyncio.Events (the stream pauses until the test sets them) and
    BLOCK; the stream ends after its last item. A watch with no script left
    blocks until closed. Every call's options are recorded.
    """

    def __init__(self) -> None:
        self.lists: deque[ListResult | BaseException | asyncio.Event] = deque()
        self.watches: deque[Sequence[ScriptItem] | BaseException] = deque()
        self.list_calls: list[ListOptions] = []
        self.watch_calls: list[ListOptions] = []
        self.open_watches = 0
        self.closed_watches = 0

    def __str__(self) -> str:
        return "scripted pods"

    async def list(self, options: ListOptions) -> ListResult:
        self.list_calls.append(options)
        if not self.lists:
            raise AssertionError(f"unexpected list call {options}")
        answer = self.lists.popleft()
        if isinstance(answer, asyncio.Event):
            await answer.wait()
            raise AssertionError("a hanging list was released")
        if isinstance(answer, BaseException):
            raise answer
        return answer

    @asynccontextmanager
    async def watch(self, options: ListOptions) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        self.watch_calls.append(options)
        script: Sequence[ScriptItem] | BaseException = (
            self.watches.popleft() if self.watches else [BLOCK]
        )
        if isinstance(script, BaseException):
            raise script
        self.open_watches += 1
        try:
            yield self._events(script)
        finally:
            self.open_watches -= 1
            self.closed_watches += 1

    @staticmethod
    async def _events(script: Sequence[ScriptItem]) -> AsyncIterator[WatchEvent]:
        for item in script:
            if item is BLOCK:
                await asyncio.Event().wait()
            elif isinstance(item, asyncio.Event):
                await item.wait()
            elif isinstance(item, BaseException):
                raise item
            elif isinstance(item, WatchEvent):
                yield item
            else:
                raise AssertionError(f"bad script item {item!r}")


class RecordingStore(Cache):
    """A Cache that also records the calls the Reflector made on it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, Any]] = []

    def add(self, obj: Any) -> None:
        self.calls.append(("add", obj))
        super().add(obj)

    def update(self, obj: Any) -> None:
        self.calls.append(("update", obj))
        super().update(obj)

    def delete(self, obj: Any) -> None:
        self.calls.append(("delete", obj))
        super().delete(obj)

    def replace(self, items: list[Any], resource_version: str) -> None:
        self.calls.append(("replace", (list(items), resource_version)))
        super().replace(items, resource_version)

    def resync(self) -> None:
        self.calls.append(("resync", None))

    def names(self) -> list[str]:
        return sorted(self.list_keys())

    def call_kinds(self) -> list[str]:
        return [kind for kind, _ in self.calls]
