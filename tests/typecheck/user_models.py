"""A cache of the user's own type: a transform turns each object into a model,
and parametrising the informer says so. Type-checked by test_typecheck.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from typing_extensions import assert_type

from kubereflector import (
    DeletedFinalStateUnknown,
    Lister,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
)
from kubereflector.testing import FakeControllerSource


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    node: str

    @property
    def metadata(self) -> dict[str, str]:
        """What the key functions read."""
        return {"name": self.name, "namespace": self.namespace}


def to_pod(obj: Any) -> Any:
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj
    meta = obj["metadata"]
    return Pod(meta["name"], meta.get("namespace", ""), obj.get("spec", {}).get("nodeName", ""))


def by_node(pod: Pod) -> list[str]:
    return [pod.node] if pod.node else []


def on_add(pod: Pod) -> None:
    print(pod.node)


def on_delete(obj: Pod | DeletedFinalStateUnknown[Pod]) -> None:
    pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
    print(pod.node if pod is not None else "unknown")


def build() -> SharedIndexInformer[Pod]:
    informer = SharedIndexInformer[Pod](FakeControllerSource(), indexers={"node": by_node})
    informer.set_transform(to_pod)
    informer.add_event_handler(ResourceEventHandlerFuncs(on_add=on_add, on_delete=on_delete))
    assert_type(informer.lister, Lister[Pod])
    assert_type(informer.lister.list(), list[Pod])
    assert_type(informer.indexer.by_index("node", "n1"), list[Pod])
    inferred = SharedIndexInformer(FakeControllerSource(), indexers={"node": by_node})
    assert_type(inferred, SharedIndexInformer[Pod])
    return informer
