"""A Manager's EventRecorders and its check for silent watches (private to the runtime:
the parts of the Manager that stand apart from its lifecycle)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._aio.timeout import within
from ..client.events import EventRecorder
from ..clock import Clock

if TYPE_CHECKING:
    from ..cache.shared_informer import SharedIndexInformer
    from ..client.rest import Client

__all__ = ["Recorders", "watches_alive"]

logger = logging.getLogger("kubereflector.runtime")


class Recorders:
    """One EventRecorder per name, made before or after the manager's loop exists; bound
    to that loop once it does; flushed when the manager stops. Thread-safe."""

    def __init__(self, client: Client, clock: Clock) -> None:
        self._client = client
        self._clock = clock
        self._lock = threading.Lock()
        self._recorders: dict[str, EventRecorder] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self, name: str) -> EventRecorder:
        """The recorder reporting as ``name`` (``ValueError`` for an empty name)."""
        if not isinstance(name, str) or not name:
            raise ValueError("an event recorder needs a name (its reportingController)")
        with self._lock:
            recorder = self._recorders.get(name)
            if recorder is None:
                recorder = EventRecorder._bound_later(self._client, name, clock=self._clock)
                self._recorders[name] = recorder
                if self._loop is not None:
                    recorder._bind(self._loop)
        return recorder

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Send from ``loop``: the recorders made so far and those made later."""
        with self._lock:
            self._loop = loop
            recorders = list(self._recorders.values())
        for recorder in recorders:
            recorder._bind(loop)

    async def flush(self, timeout: float) -> None:
        """Send what waits, within ``timeout`` seconds of the clock per recorder."""
        with self._lock:
            recorders = list(self._recorders.values())
        for recorder in recorders:
            await self._flush(recorder, timeout)

    async def _flush(self, recorder: EventRecorder, timeout: float) -> None:
        try:
            await within(self._clock, timeout, recorder.flush())
        except TimeoutError:
            logger.warning("events of %s not sent within the shutdown timeout", recorder)
        except Exception as err:  # a closed loop, a broken client: nothing to wait for
            logger.debug("could not flush %s: %s", recorder, err)


def watches_alive(
    informers: Callable[[], Mapping[str, SharedIndexInformer[Any]]], threshold: float
) -> Callable[[], bool]:
    """A ``/readyz`` check: whether every informer heard from the API server within
    ``threshold`` seconds (one that has not is logged, by name)."""

    def check() -> bool:
        for name, informer in informers().items():
            silence = informer.stats().watch_silence
            if silence is not None and silence > threshold:
                logger.warning(
                    "readyz: the informer of %s has not heard from the API server for %.0fs",
                    name,
                    silence,
                )
                return False
        return True

    return check
