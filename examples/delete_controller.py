"""The seeds' second program: a controller that deletes whatever is added, and
reports the keys it saw deleted. It runs on FakeControllerSource, no cluster.

    python examples/delete_controller.py

A Reflector feeds a DeltaFIFO from the source; the Controller pops each key's
Deltas into ``process``, which keeps a downstream store, deletes every object it
sees added (through the source, like a controller calling the API) and reports
each deletion. The DeltaFIFO's ``known_objects`` is the downstream store, so a
delete missed while disconnected still arrives, as a tombstone, after a relist.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from kubereflector import (
    Controller,
    DeletedFinalStateUnknown,
    DeltaFIFO,
    Deltas,
    DeltaType,
    deletion_handling_meta_namespace_key_func,
    new_store,
)
from kubereflector.testing import FakeControllerSource


async def main(names: list[str]) -> list[str]:
    source = FakeControllerSource()  # stands in for the API server
    downstream = new_store(deletion_handling_meta_namespace_key_func)
    fifo = DeltaFIFO(known_objects=downstream)
    deleted: asyncio.Queue[str] = asyncio.Queue()

    def process(deltas: Deltas, is_in_initial_list: bool) -> None:
        newest = deltas.newest()
        assert newest is not None
        obj = newest.object
        # Only a Deleted delta holds a tombstone; the isinstance tells the type checker.
        if newest.type is DeltaType.DELETED or isinstance(obj, DeletedFinalStateUnknown):
            downstream.delete(obj)
            deleted.put_nowait(fifo.key_of(obj))
        else:
            downstream.add(obj)
            source.delete(obj)  # this controller deletes everything it sees

    controller = Controller(fifo, source, process)
    task = asyncio.create_task(controller.run())
    try:
        for name in names:
            pod: dict[str, Any] = {"kind": "Pod", "metadata": {"name": name}}
            source.add(pod)
        seen = [await deleted.get() for _ in names]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return sorted(seen)


if __name__ == "__main__":
    for key in asyncio.run(main(["a-hello", "b-controller", "c-framework"])):
        print(key)
