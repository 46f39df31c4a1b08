"""Random add/update/delete/replace sequences on an Indexer versus a plain-dict model.

After every step the store's content equals the model's, and every index, read
through the public API, equals one recomputed from scratch.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubereflector import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    Indexer,
    Indexers,
    get_labels,
    meta_namespace_index_func,
    meta_namespace_key_func,
    new_indexer,
)


def app_index(obj: Any) -> list[str]:
    """Single-valued, or no value when the label is absent."""
    app = get_labels(obj).get("app")
    return [app] if app is not None else []


def tags_index(obj: Any) -> list[str]:
    """Multi-valued (possibly empty, possibly with duplicates)."""
    return list(obj["spec"]["tags"])


INDEXERS: Indexers = {
    NAMESPACE_INDEX: meta_namespace_index_func,
    "app": app_index,
    "tags": tags_index,
}

# Small universes so that keys, namespaces and index values collide often.
names = st.sampled_from(["a", "b", "c", "d", "e"])
namespaces = st.sampled_from([None, "ns1", "ns2"])
apps = st.one_of(st.none(), st.sampled_from(["web", "api", "db"]))
tag_lists = st.lists(st.sampled_from(["x", "y", "z"]), max_size=4)
versions = st.integers(min_value=1, max_value=10**6).map(str)


@st.composite
def objects(draw: st.DrawFn) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": draw(names), "resourceVersion": draw(versions)}
    namespace = draw(namespaces)
    if namespace is not None:
        metadata["namespace"] = namespace
    app = draw(apps)
    if app is not None:
        metadata["labels"] = {"app": app}
    return {"kind": "Pod", "metadata": metadata, "spec": {"tags": draw(tag_lists)}}


operations = st.one_of(
    st.tuples(st.just("add"), objects()),
    st.tuples(st.just("update"), objects()),
    st.tuples(st.just("delete"), objects()),
    st.tuples(st.just("delete_tombstone"), objects()),
    st.tuples(st.just("replace"), st.lists(objects(), max_size=8), versions),
    st.tuples(st.just("update_resource_version"), versions),
)


def apply(store: Indexer, model: dict[str, Any], rv: list[str], op: tuple[Any, ...]) -> None:
    """Apply ``op`` to both the store and the model (and the expected sync RV)."""
    kind = op[0]
    if kind in ("add", "update"):
        obj = op[1]
        getattr(store, kind)(obj)
        model[meta_namespace_key_func(obj)] = obj
    elif kind == "delete":
        store.delete(op[1])
        model.pop(meta_namespace_key_func(op[1]), None)
    elif kind == "delete_tombstone":
        key = meta_namespace_key_func(op[1])
        store.delete(DeletedFinalStateUnknown(key, op[1]))
        model.pop(key, None)
    elif kind == "replace":
        items, version = op[1], op[2]
        store.replace(list(items), version)
        model.clear()
        for obj in items:
            model[meta_namespace_key_func(obj)] = obj
        rv[0] = version
    elif kind == "update_resource_version":
        store.update_resource_version(op[1])
        rv[0] = op[1]
    else:  # pragma: no cover - the strategy only draws the kinds above
        raise AssertionError(kind)


def index_from_scratch(objs: dict[str, Any], name: str) -> dict[str, set[str]]:
    func = INDEXERS[name]
    index: dict[str, set[str]] = {}
    for key, obj in objs.items():
        for value in func(obj):
            index.setdefault(value, set()).add(key)
    return index


def index_via_api(store: Indexer, name: str) -> dict[str, set[str]]:
    index: dict[str, set[str]] = {}
    values = store.list_index_func_values(name)
    assert len(values) == len(set(values))
    for value in values:
        keys = store.index_keys(name, value)
        assert len(keys) == len(set(keys))
        by_index = store.by_index(name, value)
        assert sorted(map(id, by_index)) == sorted(id(store.get_by_key(k)) for k in keys)
        index[value] = set(keys)
    return index


def check(store: Indexer, model: dict[str, Any], rv: str) -> None:
    assert sorted(store.list_keys()) == sorted(model)
    assert sorted(map(id, store.list())) == sorted(map(id, model.values()))
    for key, obj in model.items():
        assert store.get_by_key(key) is obj
        assert store.get(obj) is obj
    assert store.last_store_sync_resource_version() == rv
    for name in INDEXERS:
        expected = index_from_scratch(model, name)
        # Buckets are exact and no empty bucket is kept.
        assert index_via_api(store, name) == expected, name
        # ``index`` returns the union over the probe's values.
        for obj in model.values():
            union = {k for v in INDEXERS[name](obj) for k in expected.get(v, set())}
            assert sorted(map(meta_namespace_key_func, store.index(name, obj))) == sorted(union)


@settings(max_examples=150, deadline=None)
@given(st.lists(operations, max_size=25))
def test_indexer_matches_a_dict_model(ops: list[tuple[Any, ...]]) -> None:
    store = new_indexer(indexers=dict(INDEXERS))
    model: dict[str, Any] = {}
    rv = [""]
    check(store, model, rv[0])
    for op in ops:
        apply(store, model, rv, op)
        check(store, model, rv[0])


@settings(max_examples=60, deadline=None)
@given(st.lists(objects(), max_size=10), st.lists(operations, max_size=15))
def test_add_indexers_late_matches_indexing_from_the_start(
    initial: list[dict[str, Any]], ops: list[tuple[Any, ...]]
) -> None:
    """Indexes added to a populated store behave as if they had been there all along."""
    late = new_indexer(indexers={NAMESPACE_INDEX: meta_namespace_index_func})
    model: dict[str, Any] = {}
    rv = [""]
    for obj in initial:
        apply(late, model, rv, ("add", obj))
    late.add_indexers({"app": app_index, "tags": tags_index})
    check(late, model, rv[0])
    for op in ops:
        apply(late, model, rv, op)
        check(late, model, rv[0])
