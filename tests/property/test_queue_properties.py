"""Property: a consumer fed by a queue ends equal to the source.

A random source changes objects and tells the queue (as a watch does), or changes
them silently (a missed watch event) and later relists (``replace``); periodic
``resync``s and pops are interleaved. The consumer applies each popped delta to
an Indexer that is also the queue's ``known_objects``, as an informer does. Once
the queue is drained (after a final relist if events were missed) the Indexer
must hold exactly the source's objects, and every index must equal one
recomputed from scratch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubereflector import (
    NAMESPACE_INDEX,
    Cache,
    DeltaFIFO,
    Deltas,
    DeltaType,
    QueueEmpty,
    RealFIFO,
    get_labels,
    meta_namespace_index_func,
    meta_namespace_key_func,
    new_indexer,
)

LABEL_INDEX = "labels"


def label_index_func(obj: Any) -> list[str]:
    return [f"{k}={v}" for k, v in get_labels(obj).items()]


INDEXERS = {NAMESPACE_INDEX: meta_namespace_index_func, LABEL_INDEX: label_index_func}

IDENTITIES = [(ns, name) for ns in ("a", "b", "") for name in ("x", "y", "z")]
LABELS = st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["1", "2"]), max_size=2)

# Kinds drawn with weights: missed events are rarer than told ones, so that many
# runs stay in the "every change was told" regime where draining alone must suffice.
KINDS = (
    ["put"] * 4
    + ["remove"] * 2
    + ["silent_put", "silent_remove", "relist", "resync", "checkpoint"]
    + ["pop"] * 3
)
OPS = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.sampled_from(IDENTITIES),
        LABELS,
        st.integers(1, 4),
        st.booleans(),
    ),
    max_size=50,
)
Op = tuple[str, tuple[str, str], dict[str, str], int, bool]

QueueFactory = Callable[[Cache], "DeltaFIFO | RealFIFO"]

FACTORIES: dict[str, QueueFactory] = {
    "delta_fifo_replaced": lambda idx: DeltaFIFO(known_objects=idx, emit_delta_type_replaced=True),
    "delta_fifo_sync": lambda idx: DeltaFIFO(known_objects=idx, emit_delta_type_replaced=False),
    "real_fifo": lambda idx: RealFIFO(known_objects=idx),
}


class Harness:
    def __init__(self, factory: QueueFactory) -> None:
        self.indexer = new_indexer(indexers=dict(INDEXERS))
        self.queue = factory(self.indexer)
        self.source: dict[str, dict[str, Any]] = {}
        self.rv = 0
        self.missed = False
        self.initial_flags: list[bool] = []

    # -- the consumer, as an informer applies deltas ---------------------------

    def process(self, deltas: Deltas, is_in_initial_list: bool) -> None:
        assert deltas, "a queue never hands an empty Deltas"
        self.initial_flags.append(is_in_initial_list)
        for delta in deltas:
            if delta.type is DeltaType.DELETED:
                self.indexer.delete(delta.object)
            elif self.indexer.get(delta.object) is not None:
                self.indexer.update(delta.object)
            else:
                self.indexer.add(delta.object)

    def pop(self, n: int, batch: bool) -> None:
        for _ in range(n):
            if not len(self.queue):
                return
            if batch and isinstance(self.queue, RealFIFO):
                self.queue.pop_batch_nowait(self.process, max_items=n)
            else:
                self.queue.pop_nowait(self.process)

    def drain(self) -> None:
        while len(self.queue):
            self.queue.pop_nowait(self.process)
        with pytest.raises(QueueEmpty):
            self.queue.pop_nowait(self.process)

    # -- the source -------------------------------------------------------------

    def new_object(self, ident: tuple[str, str], labels: dict[str, str]) -> dict[str, Any]:
        self.rv += 1
        ns, name = ident
        meta: dict[str, Any] = {"name": name, "resourceVersion": str(self.rv), "labels": labels}
        if ns:
            meta["namespace"] = ns
        return {"kind": "Thing", "metadata": meta}

    def apply(self, op: Op) -> None:
        kind, ident, labels, n, batch = op
        if kind in ("put", "silent_put"):
            new = self.new_object(ident, labels)
            key = meta_namespace_key_func(new)
            existed = key in self.source
            self.source[key] = new
            if kind == "silent_put":
                self.missed = True
            elif existed:
                self.queue.update(new)
            else:
                self.queue.add(new)
        elif kind in ("remove", "silent_remove"):
            ns, name = ident
            key = f"{ns}/{name}" if ns else name
            if key not in self.source:
                return
            old = self.source.pop(key)
            if kind == "silent_remove":
                self.missed = True
            else:
                self.queue.delete(old)
        elif kind == "relist":
            self.relist()
        elif kind == "resync":
            self.queue.resync()
        elif kind == "checkpoint":
            self.checkpoint()
        else:
            self.pop(n, batch)

    def checkpoint(self) -> None:
        """Drain and compare, relisting first only if an event was missed."""
        if self.missed:
            self.relist()
        self.drain()
        self.check_consumer()

    def relist(self) -> None:
        self.queue.replace(list(self.source.values()), str(self.rv))
        self.missed = False

    # -- checks -----------------------------------------------------------------

    def check_consumer(self) -> None:
        consumer = {key: self.indexer.get_by_key(key) for key in self.indexer.list_keys()}
        assert consumer == self.source
        objs = self.indexer.list()
        for name, func in INDEXERS.items():
            expected: dict[str, set[str]] = {}
            for obj in objs:
                for value in func(obj):
                    expected.setdefault(value, set()).add(meta_namespace_key_func(obj))
            actual = {
                value: set(self.indexer.index_keys(name, value))
                for value in self.indexer.list_index_func_values(name)
            }
            assert actual == expected, name

    def check_initial_flags(self) -> None:
        # True for the initial list only, then False for good.
        first_false = (
            self.initial_flags.index(False)
            if False in self.initial_flags
            else len(self.initial_flags)
        )
        assert not any(self.initial_flags[first_false:])


@pytest.mark.parametrize("factory_name", sorted(FACTORIES))
@settings(max_examples=120, deadline=None)
@given(ops=OPS)
def test_drained_consumer_equals_the_source(factory_name: str, ops: list[Op]) -> None:
    h = Harness(FACTORIES[factory_name])
    for op in ops:
        h.apply(op)
    h.checkpoint()
    h.relist()
    h.drain()
    h.check_consumer()
    assert h.queue.has_synced()
    h.check_initial_flags()
    # A resync after everything settled changes nothing in the consumer.
    h.queue.resync()
    h.drain()
    h.check_consumer()
