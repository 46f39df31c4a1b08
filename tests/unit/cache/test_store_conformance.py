"""One conformance suite for every Store / Indexer implementation.

To run the suite against a new implementation, add one line to ``INDEXER_FACTORIES``
(it builds an Indexer with the given index functions) or, for a Store without
indexes, to ``STORE_FACTORIES``. Every test runs with the objects of both
informer object modes: plain dicts and :class:`~kubereflector.CompactObject` s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import kubereflector
from kubereflector import (
    NAMESPACE_INDEX,
    Cache,
    DeletedFinalStateUnknown,
    ExplicitKey,
    Indexer,
    Indexers,
    IndexFuncError,
    KeyFuncError,
    KeyListerGetter,
    ReflectorStore,
    ResourceVersionUpdater,
    Store,
    ThreadSafeStore,
    UnknownIndexError,
    get_labels,
    get_uid,
    meta_namespace_index_func,
    meta_namespace_key_func,
    new_indexer,
    new_store,
    to_compact,
)

IndexerFactory = Callable[[Indexers], Indexer]
StoreFactory = Callable[[], Store]


def _store_then_add_indexers(indexers: Indexers) -> Indexer:
    store = new_store()
    store.add_indexers(indexers)
    return store


# One line per implementation. Each builds an empty Indexer with the given indexes.
INDEXER_FACTORIES: dict[str, IndexerFactory] = {
    "new_indexer": lambda indexers: new_indexer(indexers=indexers),
    "Cache": lambda indexers: Cache(indexers=indexers),
    "new_store+add_indexers": _store_then_add_indexers,
}

# Every Indexer is a Store; Store-only implementations go here.
STORE_FACTORIES: dict[str, StoreFactory] = {
    "new_store": new_store,
    **{name: (lambda f=f: f({})) for name, f in INDEXER_FACTORIES.items()},
}


@pytest.fixture(params=sorted(STORE_FACTORIES))
def store(request: pytest.FixtureRequest) -> Store:
    return STORE_FACTORIES[request.param]()


@pytest.fixture(params=sorted(INDEXER_FACTORIES))
def make_indexer(request: pytest.FixtureRequest) -> IndexerFactory:
    return INDEXER_FACTORIES[request.param]


# -- objects and index functions -------------------------------------------------

object_mode = "dict"
"""How the suite's objects are built: ``"dict"`` or ``"compact"`` (see the fixture)."""


@pytest.fixture(autouse=True, params=["dict", "compact"])
def each_object_mode(request: pytest.FixtureRequest) -> Iterator[None]:
    global object_mode
    object_mode = request.param
    try:
        yield
    finally:
        object_mode = "dict"


def stored(obj: dict[str, Any]) -> Any:
    """``obj`` as an informer of the current object mode stores it."""
    return to_compact(obj) if object_mode == "compact" else obj


def pod_dict(
    name: str,
    namespace: str | None = "default",
    *,
    app: str | None = None,
    tags: tuple[str, ...] = (),
    rv: str = "1",
    **extra: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "resourceVersion": rv, "uid": f"uid-{name}"}
    if namespace is not None:
        metadata["namespace"] = namespace
    if app is not None:
        metadata["labels"] = {"app": app}
    return {"kind": "Pod", "metadata": metadata, "spec": {"tags": list(tags)}, **extra}


def pod(name: str, namespace: str | None = "default", **kw: Any) -> Any:
    return stored(pod_dict(name, namespace, **kw))


def app_index(obj: Any) -> list[str]:
    """Single-valued (or no value): the ``app`` label."""
    app = get_labels(obj).get("app")
    return [app] if app is not None else []


def tags_index(obj: Any) -> list[str]:
    """Multi-valued: ``spec.tags``."""
    return list(obj["spec"]["tags"])


INDEXERS: Indexers = {
    NAMESPACE_INDEX: meta_namespace_index_func,
    "app": app_index,
    "tags": tags_index,
}


@pytest.fixture
def indexer(make_indexer: IndexerFactory) -> Indexer:
    return make_indexer(dict(INDEXERS))


def index_contents(store: Indexer, name: str) -> dict[str, set[str]]:
    """An index as seen through the public API, checked for self-consistency."""
    contents: dict[str, set[str]] = {}
    for value in store.list_index_func_values(name):
        keys = store.index_keys(name, value)
        assert len(keys) == len(set(keys)), f"duplicate keys in {name}[{value!r}]"
        assert keys, f"empty bucket {name}[{value!r}] was kept"
        objs = store.by_index(name, value)
        assert sorted(map(id, objs)) == sorted(id(store.get_by_key(k)) for k in keys)
        contents[value] = set(keys)
    return contents


def recomputed(store: Indexer, name: str) -> dict[str, set[str]]:
    """The same index built from scratch from the store's content."""
    func = store.get_indexers()[name]
    expected: dict[str, set[str]] = {}
    for key in store.list_keys():
        for value in func(store.get_by_key(key)):
            expected.setdefault(value, set()).add(key)
    return expected


def assert_indexes_exact(store: Indexer) -> None:
    for name in store.get_indexers():
        assert index_contents(store, name) == recomputed(store, name), name


def snapshot(store: Indexer) -> tuple[dict[str, int], dict[str, dict[str, set[str]]], str]:
    """Everything observable: objects (by identity), every index, the sync RV."""
    objects = {key: id(store.get_by_key(key)) for key in store.list_keys()}
    indexes = {name: index_contents(store, name) for name in store.get_indexers()}
    return objects, indexes, store.last_store_sync_resource_version()


def keys_of(objs: list[Any]) -> list[str]:
    return sorted(meta_namespace_key_func(o) for o in objs)


# -- protocols ---------------------------------------------------------------------


def test_store_satisfies_protocols(store: Store) -> None:
    assert isinstance(store, kubereflector.Store)
    assert isinstance(store, ReflectorStore)
    assert isinstance(store, KeyListerGetter)
    assert isinstance(store, ResourceVersionUpdater)


def test_indexer_satisfies_protocol(indexer: Indexer) -> None:
    assert isinstance(indexer, kubereflector.Indexer)
    assert isinstance(indexer, kubereflector.Store)


def test_protocols_reject_incomplete_objects() -> None:
    class OnlyReads:
        def list_keys(self) -> list[str]:
            return []

        def get_by_key(self, key: str) -> Any | None:
            return None

    assert isinstance(OnlyReads(), KeyListerGetter)
    assert not isinstance(OnlyReads(), Store)
    assert not isinstance(OnlyReads(), ReflectorStore)
    assert not isinstance(object(), Indexer)


# -- Store methods -----------------------------------------------------------------


def test_empty_store(store: Store) -> None:
    assert store.list() == []
    assert store.list_keys() == []
    assert store.get_by_key("default/a") is None
    assert store.get(pod("a")) is None
    assert store.last_store_sync_resource_version() == ""


def test_add_and_get(store: Store) -> None:
    a, b, node = pod("a"), pod("b", "other"), pod("node-1", None)
    for item in (a, b, node):
        store.add(item)
    assert sorted(store.list_keys()) == ["default/a", "node-1", "other/b"]
    assert store.get_by_key("default/a") is a
    assert store.get_by_key("other/b") is b
    assert store.get_by_key("node-1") is node
    assert store.get_by_key("b") is None
    # get looks up by the object's key and returns the stored object.
    assert store.get(pod("a", rv="99")) is a
    assert store.get(pod("a", "elsewhere")) is None
    assert sorted(map(id, store.list())) == sorted(map(id, (a, b, node)))


def test_add_existing_key_replaces(store: Store) -> None:
    store.add(pod("a", rv="1"))
    newer = pod("a", rv="2")
    store.add(newer)
    assert store.list_keys() == ["default/a"]
    assert store.get_by_key("default/a") is newer


def test_update(store: Store) -> None:
    store.add(pod("a", rv="1"))
    newer = pod("a", rv="2")
    store.update(newer)
    assert store.get_by_key("default/a") is newer
    assert len(store.list()) == 1
    # Updating an absent object adds it (client-go semantics).
    fresh = pod("fresh")
    store.update(fresh)
    assert store.get_by_key("default/fresh") is fresh


def test_delete(store: Store) -> None:
    a, b = pod("a"), pod("b")
    store.add(a)
    store.add(b)
    store.delete(pod("a", rv="stale"))  # any object with the same key
    assert store.list_keys() == ["default/b"]
    assert store.get_by_key("default/a") is None
    assert store.get(a) is None


def test_delete_absent_key_is_ignored(store: Store) -> None:
    b = pod("b")
    store.add(b)
    store.delete(pod("never-added"))
    store.delete(pod("b", "other-namespace"))
    assert store.list_keys() == ["default/b"]
    assert store.get_by_key("default/b") is b
    store.delete(b)
    store.delete(b)
    assert store.list_keys() == []


def test_delete_tombstone_deletes_its_key(store: Store) -> None:
    a, b = pod("a"), pod("b")
    store.add(a)
    store.add(b)
    store.delete(DeletedFinalStateUnknown("default/a", a))
    assert store.list_keys() == ["default/b"]
    # A tombstone whose last known state is unknown still deletes its key.
    store.delete(DeletedFinalStateUnknown("default/b", None))
    assert store.list_keys() == []


def test_explicit_key(store: Store) -> None:
    store.add(ExplicitKey("ns/explicit"))
    assert store.list_keys() == ["ns/explicit"]
    assert store.get_by_key("ns/explicit") == "ns/explicit"
    store.delete(ExplicitKey("ns/explicit"))
    assert store.list_keys() == []


def test_key_func_error_propagates_and_changes_nothing(store: Store) -> None:
    a = pod("a")
    store.add(a)
    nameless = {"kind": "Pod", "metadata": {"namespace": "default"}}
    for method in (store.add, store.update, store.delete, store.get):
        with pytest.raises(KeyFuncError):
            method(nameless)
    with pytest.raises(KeyFuncError):
        store.replace([pod("b"), nameless], "5")
    assert store.list_keys() == ["default/a"]
    assert store.get_by_key("default/a") is a
    assert store.last_store_sync_resource_version() == ""


def test_replace_swaps_content(store: Store) -> None:
    for name in ("a", "b", "c"):
        store.add(pod(name, rv="1"))
    b2, d = pod("b", rv="2"), pod("d")
    store.replace([b2, d], "10")
    assert sorted(store.list_keys()) == ["default/b", "default/d"]
    assert store.get_by_key("default/a") is None
    assert store.get_by_key("default/b") is b2
    assert store.get_by_key("default/d") is d
    assert store.last_store_sync_resource_version() == "10"
    store.replace([], "11")
    assert store.list() == []
    assert store.last_store_sync_resource_version() == "11"


def test_replace_later_duplicate_wins(store: Store) -> None:
    first, second = pod("a", rv="1"), pod("a", rv="2")
    store.replace([first, second], "3")
    assert store.list_keys() == ["default/a"]
    assert store.get_by_key("default/a") is second


def test_replace_does_not_keep_a_reference_to_the_list(store: Store) -> None:
    items = [pod("a")]
    store.replace(items, "1")
    items.append(pod("b"))
    items.clear()
    assert store.list_keys() == ["default/a"]


def test_resync_changes_nothing(store: Store) -> None:
    a = pod("a")
    store.add(a)
    store.replace([a], "4")
    store.resync()
    assert store.list_keys() == ["default/a"]
    assert store.get_by_key("default/a") is a
    assert store.last_store_sync_resource_version() == "4"


def test_update_resource_version(store: Store) -> None:
    assert isinstance(store, ResourceVersionUpdater)
    store.add(pod("a"))
    store.update_resource_version("77")
    assert store.last_store_sync_resource_version() == "77"
    assert store.list_keys() == ["default/a"]
    store.replace([], "78")
    assert store.last_store_sync_resource_version() == "78"
    store.update_resource_version("79")
    assert store.last_store_sync_resource_version() == "79"


def test_add_and_update_do_not_touch_the_sync_resource_version(store: Store) -> None:
    store.replace([], "5")
    store.add(pod("a", rv="9"))
    store.update(pod("a", rv="10"))
    store.delete(pod("a"))
    assert store.last_store_sync_resource_version() == "5"


def test_list_is_a_snapshot(store: Store) -> None:
    store.add(pod("a"))
    listed, keys = store.list(), store.list_keys()
    store.add(pod("b"))
    store.delete(pod("a"))
    assert keys_of(listed) == ["default/a"]
    assert keys == ["default/a"]


def test_model_objects(store: Store) -> None:
    @dataclass
    class Meta:
        name: str
        namespace: str | None = None

    @dataclass
    class Model:
        metadata: Meta

    item = Model(Meta("m", "ns"))
    store.add(item)
    assert store.list_keys() == ["ns/m"]
    assert store.get(Model(Meta("m", "ns"))) is item
    store.delete(item)
    assert store.list_keys() == []


def test_custom_key_func() -> None:
    def by_uid(obj: Any) -> str:
        uid = get_uid(obj)
        assert uid is not None
        return uid

    for store in (new_store(by_uid), new_indexer(by_uid, INDEXERS), Cache(by_uid)):
        a = pod("a")
        store.add(a)
        assert store.list_keys() == ["uid-a"]
        assert store.get(pod("a", "other-ns")) is a
        assert store.key_func is by_uid
        store.delete(pod("a", "yet-another-ns"))
        assert store.list_keys() == []


def test_len_contains_and_repr_do_not_show_content() -> None:
    store = new_indexer(indexers={"app": app_index})
    store.add(pod("a", password="s3cr3t"))
    assert len(store) == 1
    assert "default/a" in store
    assert "default/b" not in store
    assert "s3cr3t" not in repr(store)
    assert "'app'" in repr(store)


# -- Indexer methods --------------------------------------------------------------


def test_by_index_and_index_keys(indexer: Indexer) -> None:
    a = pod("a", app="web", tags=("x", "y"))
    b = pod("b", app="web", tags=("y",))
    c = pod("c", "kube-system", app="dns")
    node = pod("node", None)
    for item in (a, b, c, node):
        indexer.add(item)
    assert keys_of(indexer.by_index(NAMESPACE_INDEX, "default")) == ["default/a", "default/b"]
    assert keys_of(indexer.by_index(NAMESPACE_INDEX, "")) == ["node"]
    assert sorted(indexer.index_keys("app", "web")) == ["default/a", "default/b"]
    assert indexer.index_keys("app", "dns") == ["kube-system/c"]
    assert indexer.index_keys("app", "nothing") == []
    assert indexer.by_index("app", "nothing") == []
    assert sorted(indexer.index_keys("tags", "y")) == ["default/a", "default/b"]
    assert indexer.index_keys("tags", "x") == ["default/a"]
    assert sorted(indexer.list_index_func_values(NAMESPACE_INDEX)) == ["", "default", "kube-system"]
    assert sorted(indexer.list_index_func_values("app")) == ["dns", "web"]
    assert sorted(indexer.list_index_func_values("tags")) == ["x", "y"]
    assert_indexes_exact(indexer)


def test_by_index_returns_the_stored_objects(indexer: Indexer) -> None:
    a = pod("a", app="web")
    indexer.add(a)
    [found] = indexer.by_index("app", "web")
    assert found is a


def test_index_is_the_union_over_the_objects_values(indexer: Indexer) -> None:
    indexer.add(pod("a", tags=("x",)))
    indexer.add(pod("b", tags=("x", "y")))
    indexer.add(pod("c", tags=("y", "z")))
    indexer.add(pod("d", tags=("w",)))
    indexer.add(pod("e"))
    probe = pod("probe", tags=("x", "z"))  # need not be stored
    assert keys_of(indexer.index("tags", probe)) == ["default/a", "default/b", "default/c"]
    assert keys_of(indexer.index("tags", pod("p", tags=("y",)))) == ["default/b", "default/c"]
    assert indexer.index("tags", pod("p", tags=("none",))) == []
    assert indexer.index("tags", pod("p")) == []
    assert keys_of(indexer.index(NAMESPACE_INDEX, pod("any"))) == [
        "default/a",
        "default/b",
        "default/c",
        "default/d",
        "default/e",
    ]
    # Each object appears once even when it matches several values.
    assert len(indexer.index("tags", pod("p", tags=("x", "y", "z")))) == 3


def test_update_moves_the_key_between_values(indexer: Indexer) -> None:
    indexer.add(pod("a", app="web", tags=("x", "y")))
    indexer.add(pod("b", app="web"))
    indexer.update(pod("a", app="api", tags=("y", "z")))
    assert indexer.index_keys("app", "web") == ["default/b"]
    assert indexer.index_keys("app", "api") == ["default/a"]
    assert indexer.index_keys("tags", "x") == []
    assert sorted(indexer.list_index_func_values("tags")) == ["y", "z"]
    assert_indexes_exact(indexer)
    indexer.update(pod("b", app="api"))
    assert sorted(indexer.list_index_func_values("app")) == ["api"]
    assert_indexes_exact(indexer)


def test_object_indexed_under_no_value(indexer: Indexer) -> None:
    bare = pod("bare")
    indexer.add(bare)
    assert indexer.list_index_func_values("app") == []
    assert indexer.list_index_func_values("tags") == []
    assert indexer.list_index_func_values(NAMESPACE_INDEX) == ["default"]
    assert indexer.get_by_key("default/bare") is bare
    # Gaining, then losing, a value.
    indexer.update(pod("bare", app="web"))
    assert indexer.index_keys("app", "web") == ["default/bare"]
    indexer.update(pod("bare"))
    assert indexer.list_index_func_values("app") == []
    assert_indexes_exact(indexer)


def test_empty_buckets_are_dropped(indexer: Indexer) -> None:
    indexer.add(pod("a", "ns1", app="web", tags=("x",)))
    indexer.add(pod("b", "ns1", app="web", tags=("x",)))
    indexer.delete(pod("a", "ns1"))
    assert indexer.list_index_func_values("app") == ["web"]
    indexer.delete(pod("b", "ns1"))
    for name in (NAMESPACE_INDEX, "app", "tags"):
        assert indexer.list_index_func_values(name) == [], name
    indexer.add(pod("c", "ns2", app="api", tags=("y",)))
    indexer.update(pod("c", "ns2", app="db", tags=("z",)))
    assert indexer.list_index_func_values("app") == ["db"]
    assert indexer.list_index_func_values("tags") == ["z"]


def test_replace_rebuilds_indexes_and_drops_buckets(indexer: Indexer) -> None:
    indexer.add(pod("a", "ns1", app="web", tags=("x",)))
    indexer.add(pod("b", "ns2", app="api", tags=("y",)))
    indexer.replace([pod("b", "ns2", app="db", tags=("z",)), pod("c", "ns3")], "2")
    assert sorted(indexer.list_index_func_values(NAMESPACE_INDEX)) == ["ns2", "ns3"]
    assert indexer.list_index_func_values("app") == ["db"]
    assert indexer.list_index_func_values("tags") == ["z"]
    assert indexer.by_index("app", "web") == []
    assert_indexes_exact(indexer)
    indexer.replace([], "3")
    for name in (NAMESPACE_INDEX, "app", "tags"):
        assert indexer.list_index_func_values(name) == [], name


def test_duplicate_values_from_an_index_func(make_indexer: IndexerFactory) -> None:
    indexer = make_indexer({"tags": tags_index})
    indexer.add(pod("a", tags=("x", "x")))
    assert indexer.index_keys("tags", "x") == ["default/a"]
    assert len(indexer.by_index("tags", "x")) == 1
    indexer.update(pod("a", tags=("x",)))
    assert indexer.index_keys("tags", "x") == ["default/a"]
    indexer.delete(pod("a"))
    assert indexer.list_index_func_values("tags") == []


def test_delete_tombstone_updates_indexes(indexer: Indexer) -> None:
    a = pod("a", app="web", tags=("x",))
    indexer.add(a)
    # The tombstone's object may be stale; the stored object's values are removed.
    indexer.delete(DeletedFinalStateUnknown("default/a", pod("a", app="other")))
    for name in (NAMESPACE_INDEX, "app", "tags"):
        assert indexer.list_index_func_values(name) == [], name


def test_get_indexers(make_indexer: IndexerFactory) -> None:
    given = dict(INDEXERS)
    indexer = make_indexer(given)
    assert indexer.get_indexers() == INDEXERS
    # Neither the caller's dict nor the returned one is shared with the store.
    given["late"] = app_index
    returned = indexer.get_indexers()
    returned["other"] = app_index
    del returned["app"]
    assert indexer.get_indexers() == INDEXERS


def test_add_indexers_indexes_existing_items(make_indexer: IndexerFactory) -> None:
    indexer = make_indexer({NAMESPACE_INDEX: meta_namespace_index_func})
    indexer.add(pod("a", app="web", tags=("x", "y")))
    indexer.add(pod("b", app="api", tags=("y",)))
    indexer.add_indexers({"app": app_index, "tags": tags_index})
    assert indexer.get_indexers() == INDEXERS
    assert indexer.index_keys("app", "web") == ["default/a"]
    assert sorted(indexer.index_keys("tags", "y")) == ["default/a", "default/b"]
    assert_indexes_exact(indexer)
    # And the new indexes are maintained from then on.
    indexer.update(pod("a", app="api"))
    indexer.add(pod("c", app="web"))
    assert sorted(indexer.index_keys("app", "api")) == ["default/a", "default/b"]
    assert indexer.index_keys("tags", "x") == []
    assert_indexes_exact(indexer)


def test_add_indexers_name_clash_adds_nothing(indexer: Indexer) -> None:
    indexer.add(pod("a", app="web"))
    before = snapshot(indexer)

    def other(obj: Any) -> list[str]:
        return ["other"]

    with pytest.raises(ValueError, match="'app'") as info:
        indexer.add_indexers({"brand-new": other, "app": other})
    assert not isinstance(info.value, IndexFuncError)
    assert indexer.get_indexers() == INDEXERS
    assert snapshot(indexer) == before
    with pytest.raises(UnknownIndexError):
        indexer.list_index_func_values("brand-new")


def test_add_indexers_with_no_items(make_indexer: IndexerFactory) -> None:
    indexer = make_indexer({})
    indexer.add_indexers({"app": app_index})
    indexer.add_indexers({})
    indexer.add(pod("a", app="web"))
    assert indexer.index_keys("app", "web") == ["default/a"]


def test_meta_namespace_index_func() -> None:
    assert NAMESPACE_INDEX == "namespace"
    assert meta_namespace_index_func(pod("a", "team")) == ["team"]
    assert meta_namespace_index_func(pod("node", None)) == [""]


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda s: s.index("missing", pod("a")), id="index"),
        pytest.param(lambda s: s.index_keys("missing", "v"), id="index_keys"),
        pytest.param(lambda s: s.list_index_func_values("missing"), id="list_index_func_values"),
        pytest.param(lambda s: s.by_index("missing", "v"), id="by_index"),
    ],
)
def test_unknown_index(indexer: Indexer, call: Callable[[Indexer], object]) -> None:
    indexer.add(pod("a"))
    with pytest.raises(UnknownIndexError, match="'missing'") as info:
        call(indexer)
    assert isinstance(info.value, LookupError)
    assert "does not exist" in str(info.value)


# -- an index function that raises ------------------------------------------------


class Boom(RuntimeError):
    pass


def exploding_index(obj: Any) -> list[str]:
    if get_labels(obj).get("explode"):
        raise Boom("cannot index this")
    return [get_labels(obj).get("app", "")]


@pytest.fixture
def fragile(make_indexer: IndexerFactory) -> Indexer:
    indexer = make_indexer({**INDEXERS, "fragile": exploding_index})
    indexer.add(pod("a", app="web", tags=("x",)))
    indexer.add(pod("b", "other", app="api"))
    indexer.replace([*indexer.list(), pod("c", "other", tags=("y",))], "7")
    return indexer


def explosive(name: str, namespace: str = "default", **kw: Any) -> Any:
    obj = pod_dict(name, namespace, **kw)
    obj["metadata"]["labels"] = {"explode": "yes", "app": "boom"}
    return stored(obj)


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(lambda s: s.add(explosive("new", tags=("z",))), id="add-new"),
        pytest.param(lambda s: s.add(explosive("a", tags=("z",))), id="add-existing"),
        pytest.param(lambda s: s.update(explosive("a", tags=("z",))), id="update"),
        pytest.param(lambda s: s.update(explosive("b", "other")), id="update-other"),
        pytest.param(lambda s: s.replace([pod("a", app="web"), explosive("d")], "8"), id="replace"),
    ],
)
def test_index_func_error_leaves_store_unchanged(
    fragile: Indexer, write: Callable[[Indexer], None]
) -> None:
    before = snapshot(fragile)
    with pytest.raises(IndexFuncError, match="'fragile'") as info:
        write(fragile)
    assert isinstance(info.value.__cause__, Boom)
    assert "cannot index this" in str(info.value)
    assert snapshot(fragile) == before
    assert_indexes_exact(fragile)
    # The store still works afterwards.
    fragile.delete(pod("a"))
    assert sorted(fragile.list_keys()) == ["other/b", "other/c"]
    assert_indexes_exact(fragile)


def test_index_func_error_names_the_key(fragile: Indexer) -> None:
    with pytest.raises(IndexFuncError, match="'default/new'"):
        fragile.add(explosive("new"))


def test_index_func_error_in_index_query(fragile: Indexer) -> None:
    with pytest.raises(IndexFuncError, match="'fragile'"):
        fragile.index("fragile", explosive("probe"))


def test_index_func_error_in_add_indexers_adds_nothing(make_indexer: IndexerFactory) -> None:
    indexer = make_indexer(dict(INDEXERS))
    indexer.add(pod("a", app="web"))
    indexer.add(explosive("b"))
    before = snapshot(indexer)
    with pytest.raises(IndexFuncError, match="'fragile'"):
        indexer.add_indexers({"fine": app_index, "fragile": exploding_index})
    assert indexer.get_indexers() == INDEXERS
    assert snapshot(indexer) == before
    with pytest.raises(UnknownIndexError):
        indexer.index_keys("fine", "web")


# -- ThreadSafeStore directly (explicit keys) ---------------------------------------


def first_letter(obj: Any) -> list[str]:
    return [obj["v"][:1]] if obj["v"] else []


def test_thread_safe_store_basics() -> None:
    store = ThreadSafeStore({"first": first_letter})
    one, two = {"v": "apple"}, {"v": "avocado"}
    store.add("k1", one)
    store.add("k2", two)
    assert sorted(store.list_keys()) == ["k1", "k2"]
    assert store.get("k1") is one
    assert store.get("nope") is None
    assert sorted(map(id, store.list())) == sorted(map(id, (one, two)))
    assert len(store) == 2
    assert "k1" in store
    assert sorted(store.index_keys("first", "a")) == ["k1", "k2"]
    store.update("k2", {"v": "banana"})
    assert store.index_keys("first", "a") == ["k1"]
    assert [o["v"] for o in store.by_index("first", "b")] == ["banana"]
    assert [o["v"] for o in store.index("first", {"v": "bx"})] == ["banana"]
    store.delete("k1")
    store.delete("k1")  # absent: ignored
    assert store.list_keys() == ["k2"]
    assert store.list_index_func_values("first") == ["b"]


def test_thread_safe_store_replace() -> None:
    store = ThreadSafeStore({"first": first_letter})
    store.add("k1", {"v": "apple"})
    source = {"k2": {"v": "cherry"}, "k3": {"v": ""}}
    store.replace(source)
    source["k4"] = {"v": "date"}  # the store took a copy
    assert sorted(store.list_keys()) == ["k2", "k3"]
    assert store.list_index_func_values("first") == ["c"]
    assert store.get("k1") is None


def test_thread_safe_store_indexers() -> None:
    store = ThreadSafeStore()
    store.add("k1", {"v": "apple"})
    assert store.get_indexers() == {}
    store.add_indexers({"first": first_letter})
    assert store.index_keys("first", "a") == ["k1"]
    with pytest.raises(ValueError, match="'first'"):
        store.add_indexers({"first": first_letter})
    with pytest.raises(UnknownIndexError, match="'second'"):
        store.by_index("second", "a")


def test_thread_safe_store_index_func_error() -> None:
    store = ThreadSafeStore({"first": first_letter})
    store.add("k1", {"v": "apple"})
    with pytest.raises(IndexFuncError, match="'k2'"):
        store.add("k2", {"no-v": 1})
    with pytest.raises(IndexFuncError):
        store.update("k1", {"no-v": 1})
    with pytest.raises(IndexFuncError):
        store.replace({"k3": {"no-v": 1}})
    assert store.list_keys() == ["k1"]
    assert store.get("k1") == {"v": "apple"}
    assert store.list_index_func_values("first") == ["a"]


# -- swap (Cache.swap, ThreadSafeStore.swap) ------------------------------------------


def test_swap_stores_the_object_and_returns_the_one_it_replaced(store: Store) -> None:
    assert isinstance(store, Cache)
    first, second = pod("a", rv="1"), pod("a", rv="2")
    assert store.swap(first) is None
    assert store.get_by_key("default/a") is first
    assert store.swap(second) is first
    assert store.get_by_key("default/a") is second
    assert store.list_keys() == ["default/a"]
    assert store.last_store_sync_resource_version() == ""


def test_swap_moves_index_entries_exactly_as_update_does(make_indexer: IndexerFactory) -> None:
    swapped, updated = make_indexer(dict(INDEXERS)), make_indexer(dict(INDEXERS))
    assert isinstance(swapped, Cache)
    writes = [
        pod("a", app="web", tags=("x", "y")),
        pod("b", "other", app="web"),
        pod("a", app="api", tags=("y", "z")),
        pod("b", "other"),
        pod("a", app="api", tags=("y", "z"), rv="2"),
    ]
    for obj in writes:
        swapped.swap(obj)
        updated.update(obj)
        assert snapshot(swapped) == snapshot(updated)
        assert_indexes_exact(swapped)
    assert swapped.index_keys("app", "web") == []
    assert swapped.index_keys("app", "api") == ["default/a"]


@pytest.mark.parametrize("name", ["a", "new"])
def test_swap_index_func_error_leaves_store_unchanged(fragile: Indexer, name: str) -> None:
    assert isinstance(fragile, Cache)
    before = snapshot(fragile)
    with pytest.raises(IndexFuncError, match=f"'default/{name}'") as info:
        fragile.swap(explosive(name, tags=("z",)))
    assert isinstance(info.value.__cause__, Boom)
    assert snapshot(fragile) == before
    assert_indexes_exact(fragile)


def test_swap_key_func_error_changes_nothing(store: Store) -> None:
    assert isinstance(store, Cache)
    a = pod("a")
    store.add(a)
    with pytest.raises(KeyFuncError):
        store.swap({"kind": "Pod", "metadata": {"namespace": "default"}})
    assert store.list_keys() == ["default/a"]
    assert store.get_by_key("default/a") is a


@pytest.mark.parametrize("indexers", [{}, {"first": first_letter}], ids=["plain", "indexed"])
def test_thread_safe_store_swap(indexers: Indexers) -> None:
    store = ThreadSafeStore(indexers)
    apple, banana = {"v": "apple"}, {"v": "banana"}
    assert store.swap("k1", apple) is None
    assert store.swap("k1", banana) is apple
    assert store.get("k1") is banana
    assert store.list_keys() == ["k1"]
    if indexers:
        assert store.list_index_func_values("first") == ["b"]
        assert store.index_keys("first", "b") == ["k1"]


def test_thread_safe_store_swap_index_func_error() -> None:
    store = ThreadSafeStore({"first": first_letter})
    apple = {"v": "apple"}
    store.add("k1", apple)
    with pytest.raises(IndexFuncError, match="'k1'"):
        store.swap("k1", {"no-v": 1})
    with pytest.raises(IndexFuncError, match="'k2'"):
        store.swap("k2", {"no-v": 1})
    assert store.list_keys() == ["k1"]
    assert store.get("k1") is apple
    assert store.index_keys("first", "a") == ["k1"]


# -- swap_all (Cache.swap_all, ThreadSafeStore.swap_all) -----------------------------------


def test_swap_all_replaces_and_tells_what_it_replaced(make_indexer: IndexerFactory) -> None:
    swapped, replaced = make_indexer(dict(INDEXERS)), make_indexer(dict(INDEXERS))
    assert isinstance(swapped, Cache)
    a1, b1, c1 = pod("a", app="web"), pod("b", app="web"), pod("c", tags=("x",))
    for store in (swapped, replaced):
        for obj in (a1, b1, c1):
            store.add(obj)
    a2, d1, d2 = pod("a", app="api", rv="2"), pod("d", rv="1"), pod("d", rv="2")
    new = [d1, a2, d2]
    changed, removed = swapped.swap_all(new, "7")
    replaced.replace(new, "7")
    # One entry per key, at its first place, with its last object.
    assert changed == [(d2, None), (a2, a1)]
    assert sorted(removed, key=lambda kv: kv[0]) == [("default/b", b1), ("default/c", c1)]
    assert snapshot(swapped) == snapshot(replaced)
    assert swapped.last_store_sync_resource_version() == "7"
    assert_indexes_exact(swapped)


def test_swap_all_index_func_error_leaves_store_unchanged(fragile: Indexer) -> None:
    assert isinstance(fragile, Cache)
    before = snapshot(fragile)
    with pytest.raises(IndexFuncError, match="'default/new'"):
        fragile.swap_all([pod("a"), explosive("new", tags=("z",))], "9")
    assert snapshot(fragile) == before


def test_swap_all_key_func_error_changes_nothing(store: Store) -> None:
    assert isinstance(store, Cache)
    a = pod("a")
    store.add(a)
    with pytest.raises(KeyFuncError):
        store.swap_all([pod("b"), {"kind": "Pod", "metadata": {"namespace": "default"}}], "2")
    assert store.list_keys() == ["default/a"]
    assert store.get_by_key("default/a") is a


def test_thread_safe_store_swap_all_takes_the_dict_over_and_returns_the_old_one() -> None:
    store = ThreadSafeStore({"first": first_letter})
    apple = {"v": "apple"}
    store.add("k1", apple)
    items = {"k2": {"v": "banana"}}
    previous = store.swap_all(items)
    assert previous == {"k1": apple}
    assert previous["k1"] is apple
    assert store.list_keys() == ["k2"]
    assert store.index_keys("first", "b") == ["k2"]
    assert store.index_keys("first", "a") == []
