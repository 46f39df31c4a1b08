"""Lister and NamespaceLister over a cache: selectors, namespaces, indexes."""

from __future__ import annotations

from typing import Any

import pytest

from kubereflector import (
    NAMESPACE_INDEX,
    Lister,
    NamespaceLister,
    UnknownIndexError,
    meta_namespace_index_func,
    new_indexer,
    new_store,
)
from kubereflector.selectors import LabelSelector


def obj(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    return {"metadata": meta}


def names(objects: list[Any]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objects)


@pytest.fixture
def lister() -> Lister:
    indexer = new_indexer(
        indexers={
            NAMESPACE_INDEX: meta_namespace_index_func,
            "app": lambda o: [o["metadata"].get("labels", {}).get("app", "")],
        }
    )
    for item in (
        obj("web-1", "prod", app="web", tier="front"),
        obj("web-2", "dev", app="web"),
        obj("db-1", "prod", app="db", tier="back"),
        obj("node-a", app="node"),
        obj("node-b"),
    ):
        indexer.add(item)
    return Lister(indexer)


def test_list_everything_or_by_selector(lister: Lister) -> None:
    assert len(lister.list()) == 5
    assert len(lister.list("")) == 5
    assert names(lister.list("app=web")) == ["web-1", "web-2"]
    assert names(lister.list("app in (web,db),tier")) == ["db-1", "web-1"]
    assert names(lister.list("!app")) == ["node-b"]
    assert names(lister.list("app!=web")) == ["db-1", "node-a", "node-b"]


def test_a_parsed_selector_is_accepted(lister: Lister) -> None:
    assert names(lister.list(LabelSelector.parse("tier=back"))) == ["db-1"]
    assert len(lister.list(LabelSelector.everything())) == 5


def test_a_malformed_selector_names_the_offending_part(lister: Lister) -> None:
    with pytest.raises(ValueError, match=r"a in \(x"):
        lister.list("a in (x")
    with pytest.raises(ValueError, match="bad key!"):
        lister.namespaced("prod").list("ok=1,bad key!=x")


def test_a_selector_of_the_wrong_type_is_refused(lister: Lister) -> None:
    with pytest.raises(TypeError, match="dict"):
        lister.list({"app": "web"})  # type: ignore[arg-type]


def test_get_cluster_scoped_and_namespaced(lister: Lister) -> None:
    assert lister.get("node-a") == obj("node-a", app="node")
    assert lister.get("web-1") is None  # namespaced: not a cluster-scoped key
    assert lister.namespaced("prod").get("web-1") == obj("web-1", "prod", app="web", tier="front")
    assert lister.namespaced("dev").get("web-1") is None
    assert lister.namespaced("").get("node-b") == obj("node-b")


def test_namespaced_list(lister: Lister) -> None:
    prod = lister.namespaced("prod")
    assert isinstance(prod, NamespaceLister)
    assert prod.namespace == "prod"
    assert names(prod.list()) == ["db-1", "web-1"]
    assert names(prod.list("app=web")) == ["web-1"]
    assert lister.namespaced("nowhere").list() == []
    assert len(lister.namespaced("").list()) == 5  # "" is every namespace


def test_namespaced_list_uses_the_namespace_index() -> None:
    # An index that lies shows where the answer comes from.
    indexer = new_indexer(indexers={NAMESPACE_INDEX: lambda o: ["elsewhere"]})
    indexer.add(obj("a", "prod"))
    lister = Lister(indexer)
    assert lister.namespaced("prod").list() == []
    assert names(lister.namespaced("elsewhere").list()) == ["a"]


def test_namespaced_list_scans_without_the_index() -> None:
    store = new_store()
    for item in (obj("a", "prod", app="x"), obj("b", "dev"), obj("c", "prod")):
        store.add(item)
    lister = Lister(store)
    assert names(lister.namespaced("prod").list()) == ["a", "c"]
    assert names(lister.namespaced("prod").list("app=x")) == ["a"]


def test_by_index_with_a_selector(lister: Lister) -> None:
    assert names(lister.by_index("app", "web")) == ["web-1", "web-2"]
    assert names(lister.by_index("app", "web", "tier=front")) == ["web-1"]
    with pytest.raises(UnknownIndexError, match="nope"):
        lister.by_index("nope", "x")


def test_objects_with_metadata_attributes() -> None:
    class Meta:
        def __init__(self, name: str, namespace: str, labels: dict[str, str]) -> None:
            self.name = name
            self.namespace = namespace
            self.labels = labels

    class Model:
        def __init__(self, name: str, namespace: str, labels: dict[str, str]) -> None:
            self.metadata = Meta(name, namespace, labels)

    store = new_store()
    store.add(Model("a", "prod", {"app": "web"}))
    store.add(Model("b", "prod", {}))
    lister = Lister(store)
    assert [m.metadata.name for m in lister.namespaced("prod").list("app=web")] == ["a"]
