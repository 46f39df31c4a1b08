"""The building blocks used alone, as mypy --strict sees them: an indexer, the
queues, a Controller, new_informer. Type-checked by test_typecheck.py, never run."""

from __future__ import annotations

import asyncio

from typing_extensions import assert_type

from kubereflector import (
    FIFO,
    NAMESPACE_INDEX,
    Cache,
    Controller,
    DeletedFinalStateUnknown,
    Delta,
    DeltaFIFO,
    Deltas,
    DeltaType,
    Indexer,
    KubeObject,
    RealFIFO,
    ResourceEventHandlerFuncs,
    Store,
    meta_namespace_index_func,
    new_indexer,
    new_indexer_informer,
    new_informer,
    new_store,
)
from kubereflector.testing import FakeControllerSource


def by_node(pod: KubeObject) -> list[str]:
    node = pod.get("spec", {}).get("nodeName")
    return [node] if node else []


def the_cache() -> None:
    pods = new_indexer(indexers={NAMESPACE_INDEX: meta_namespace_index_func, "node": by_node})
    assert_type(pods, Cache[KubeObject])
    pods.add({"metadata": {"name": "web-1", "namespace": "shop"}})
    assert_type(pods.get_by_key("shop/web-1"), KubeObject | None)
    assert_type(pods.list(), list[KubeObject])
    assert_type(pods.by_index("node", "n1"), list[KubeObject])
    assert_type(pods.index("node", {"spec": {"nodeName": "n1"}}), list[KubeObject])
    assert_type(new_store(), Cache[KubeObject])
    indexer: Indexer = pods
    store: Store = indexer
    assert_type(store.list(), list[KubeObject])


def the_queues() -> None:
    known = new_store()
    fifo = DeltaFIFO(known_objects=known, emit_delta_type_replaced=True)
    assert_type(fifo, DeltaFIFO[KubeObject])

    def process(deltas: Deltas, is_in_initial_list: bool) -> None:
        newest = deltas.newest()
        assert_type(newest, Delta[KubeObject] | None)
        if newest is None:
            return
        obj = newest.object
        assert_type(obj, KubeObject | DeletedFinalStateUnknown[KubeObject])
        if newest.type is DeltaType.DELETED or isinstance(obj, DeletedFinalStateUnknown):
            known.delete(obj)
        else:
            known.update(obj)

    assert_type(fifo.pop_nowait(process), Deltas[KubeObject])
    real = RealFIFO(known_objects=known)
    assert_type(real.pop_nowait(process), Deltas[KubeObject])
    latest: FIFO[KubeObject] = FIFO()
    assert_type(latest.pop_nowait(lambda obj, initial: None), KubeObject)
    controller = Controller(real, FakeControllerSource(), process)
    assert_type(controller, Controller[Deltas[KubeObject]])


async def the_informers() -> None:
    seen: list[str] = []

    def on_add(pod: KubeObject) -> None:
        seen.append(pod["metadata"]["name"])

    handler = ResourceEventHandlerFuncs(on_add=on_add)
    store, controller = new_informer(FakeControllerSource(), handler)
    assert_type(store, Store[KubeObject])
    assert_type(controller, Controller[Deltas[KubeObject]])
    indexer, _ = new_indexer_informer(FakeControllerSource(), handler, {"node": by_node})
    assert_type(indexer, Indexer[KubeObject])
    task = asyncio.create_task(controller.run())
    task.cancel()
