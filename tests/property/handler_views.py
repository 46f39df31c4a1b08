"""Event handlers for the convergence tests: each mirrors the cache from its
notifications and checks every step as it goes.

An add for a key it already holds, an update whose old object is not the one it
holds, or a delete of a key it does not hold would mean a change lost or
doubled; each is recorded in ``violations``. Thread-safe: plain handlers run on
a worker thread, coroutine ones on the event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from kubereflector import DeletedFinalStateUnknown


def key_of(obj: Any) -> str:
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def rv_of(obj: Any) -> str:
    return str(obj["metadata"]["resourceVersion"])


class View:
    """A plain handler (run on a worker thread) mirroring the cache.

    ``unheld_deletes`` accepts a delete of a key not held: client-go's RealFIFO
    hands on every watched delete, so when a test's source drops an add inside a
    stream (which no real server does), the delete that follows reaches the
    handlers; the DeltaFIFO drops it."""

    def __init__(self, *, unheld_deletes: bool = False) -> None:
        self.unheld_deletes = unheld_deletes
        self.objects: dict[str, str] = {}
        self.violations: list[str] = []
        self._cond = threading.Condition()

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        with self._cond:
            key = key_of(obj)
            if key in self.objects:
                self.violations.append(f"add of {key}, already held")
            self.objects[key] = rv_of(obj)
            self._cond.notify_all()

    def on_update(self, old: Any, new: Any) -> None:
        with self._cond:
            key = key_of(new)
            held = self.objects.get(key)
            if held != rv_of(old):
                self.violations.append(f"update of {key} from {rv_of(old)}, holding {held}")
            self.objects[key] = rv_of(new)
            self._cond.notify_all()

    def on_delete(self, obj: Any) -> None:
        with self._cond:
            key = key_of(obj)
            if self.objects.pop(key, None) is None and not self.unheld_deletes:
                self.violations.append(f"delete of {key}, not held")
            self._cond.notify_all()

    def snapshot(self) -> tuple[dict[str, str], list[str]]:
        """(the objects held by key, with their resourceVersions; the violations)"""
        with self._cond:
            return dict(self.objects), list(self.violations)

    async def until(self, predicate: Callable[[dict[str, str]], bool], timeout: float) -> bool:
        """Whether ``predicate(objects)`` held, checked at each change, within
        ``timeout`` seconds (waited for on a thread: the loop goes on)."""

        def wait() -> bool:
            with self._cond:
                return self._cond.wait_for(lambda: predicate(self.objects), timeout)

        return await asyncio.to_thread(wait)


class AsyncView(View):
    """The same as coroutine methods (run on the event loop), suspending in between."""

    async def on_add(self, obj: Any, is_in_initial_list: bool) -> None:  # type: ignore[override]
        await asyncio.sleep(0)
        super().on_add(obj, is_in_initial_list)

    async def on_update(self, old: Any, new: Any) -> None:  # type: ignore[override]
        super().on_update(old, new)

    async def on_delete(self, obj: Any) -> None:  # type: ignore[override]
        await asyncio.sleep(0)
        super().on_delete(obj)
