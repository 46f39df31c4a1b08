"""Concurrent writers and readers on one Indexer.

Every loop is bounded by an iteration count, never by time. Writers own disjoint
key ranges (one namespace each) and keep a model of what they wrote, so the final
content is known exactly; a replacer thread swaps the whole content between rounds
while readers keep reading. Readers check that what they see is self-consistent.
"""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kubereflector import (
    NAMESPACE_INDEX,
    Indexer,
    Indexers,
    get_labels,
    get_namespace,
    meta_namespace_index_func,
    meta_namespace_key_func,
    new_indexer,
)

WRITERS = 4
READERS = 4
ROUNDS = 6
OPS_PER_ROUND = 120
NAMES_PER_WRITER = 16
MAX_READS = 30_000
MIN_READS = 200
APPS = ("web", "api", "db")
TAGS = ("x", "y", "z")
JOIN_TIMEOUT = 25.0  # a deadlock fails the test instead of hanging it


def app_index(obj: Any) -> list[str]:
    app = get_labels(obj).get("app")
    return [app] if app is not None else []


def tags_index(obj: Any) -> list[str]:
    return list(obj["spec"]["tags"])


INDEXERS: Indexers = {
    NAMESPACE_INDEX: meta_namespace_index_func,
    "app": app_index,
    "tags": tags_index,
}


def make_obj(rng: random.Random, namespace: str, name: str, version: int) -> dict[str, Any]:
    labels = {"app": rng.choice(APPS)} if rng.random() < 0.8 else {}
    tags = sorted(rng.sample(TAGS, rng.randint(0, len(TAGS))))
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "resourceVersion": str(version),
            "labels": labels,
        },
        "spec": {"tags": tags},
    }


def expected_index(
    objects: dict[str, Any], func: Callable[[Any], list[str]]
) -> dict[str, set[str]]:
    index: dict[str, set[str]] = {}
    for key, obj in objects.items():
        for value in func(obj):
            index.setdefault(value, set()).add(key)
    return index


def actual_index(store: Indexer, name: str) -> dict[str, set[str]]:
    return {
        value: set(store.index_keys(name, value)) for value in store.list_index_func_values(name)
    }


def assert_content_and_indexes(store: Indexer, expected: dict[str, Any]) -> None:
    assert sorted(store.list_keys()) == sorted(expected)
    for key, obj in expected.items():
        assert store.get_by_key(key) is obj, key
    for name, func in INDEXERS.items():
        assert actual_index(store, name) == expected_index(expected, func), name
        # And recomputed from the store itself, through the public API only.
        stored = {key: store.get_by_key(key) for key in store.list_keys()}
        assert actual_index(store, name) == expected_index(stored, func), name


@pytest.fixture(autouse=True)
def fast_thread_switching() -> Iterator[None]:
    """Switch threads far more often than the default 5 ms, to interleave more."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


class Workers:
    """Runs thread targets, collecting their exceptions instead of losing them."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []
        self.threads: list[threading.Thread] = []
        self.barriers: list[threading.Barrier] = []

    def spawn(self, target: Callable[[], None], name: str) -> None:
        def run() -> None:
            try:
                target()
            except BaseException as err:
                self.errors.append(err)
                for barrier in self.barriers:
                    barrier.abort()

        self.threads.append(threading.Thread(target=run, name=name, daemon=True))

    def run_all(self) -> None:
        for thread in self.threads:
            thread.start()
        for thread in self.threads:
            thread.join(JOIN_TIMEOUT)
        stuck = [t.name for t in self.threads if t.is_alive()]
        assert not stuck, f"threads did not finish: {stuck}"
        if self.errors:
            raise self.errors[0]


def check_read_consistency(store: Indexer, rng: random.Random, i: int) -> int:
    """One read; returns how many objects it saw. Raises on any inconsistency."""
    op = i % 5
    if op == 0:
        key = f"w{rng.randrange(WRITERS)}/o{rng.randrange(NAMES_PER_WRITER)}"
        obj = store.get_by_key(key)
        if obj is not None:
            assert meta_namespace_key_func(obj) == key
        return 0 if obj is None else 1
    if op == 1:
        objs = store.list()
        keys = [meta_namespace_key_func(o) for o in objs]
        assert len(keys) == len(set(keys))
        return len(objs)
    if op == 2:
        namespace = f"w{rng.randrange(WRITERS)}"
        objs = store.by_index(NAMESPACE_INDEX, namespace)
        assert all(get_namespace(o) == namespace for o in objs)
        return len(objs)
    if op == 3:
        app = rng.choice(APPS)
        objs = store.by_index("app", app)
        assert all(get_labels(o).get("app") == app for o in objs)
        return len(objs)
    tag = rng.choice(TAGS)
    objs = store.by_index("tags", tag)
    assert all(tag in o["spec"]["tags"] for o in objs)
    probe = {"spec": {"tags": [tag]}}
    assert all(tag in o["spec"]["tags"] for o in store.index("tags", probe))
    return len(objs)


def test_concurrent_writers_replacer_and_readers() -> None:
    store = new_indexer(indexers=dict(INDEXERS))
    models: list[dict[str, Any]] = [{} for _ in range(WRITERS)]
    workers = Workers()
    start = threading.Barrier(WRITERS + READERS + 1, timeout=JOIN_TIMEOUT)
    # Writers and the replacer meet at `round_end` (writers quiet, replace runs) and
    # at `round_start` (replace done, writers go on). Readers never wait.
    round_end = threading.Barrier(WRITERS + 1, timeout=JOIN_TIMEOUT)
    round_start = threading.Barrier(WRITERS + 1, timeout=JOIN_TIMEOUT)
    workers.barriers = [start, round_end, round_start]
    writers_done = threading.Event()
    finished_writers: list[int] = []
    seen = [0] * READERS
    last_rv: list[str] = []

    def writer(w: int) -> None:
        rng = random.Random(w)
        model = models[w]
        namespace = f"w{w}"
        version = 0
        start.wait()
        for _ in range(ROUNDS):
            for _ in range(OPS_PER_ROUND):
                version += 1
                name = f"o{rng.randrange(NAMES_PER_WRITER)}"
                key = f"{namespace}/{name}"
                action = rng.random()
                if action < 0.35:
                    obj = make_obj(rng, namespace, name, version)
                    store.add(obj)
                    model[key] = obj
                elif action < 0.7:
                    obj = make_obj(rng, namespace, name, version)
                    store.update(obj)
                    model[key] = obj
                else:
                    store.delete(make_obj(rng, namespace, name, version))
                    model.pop(key, None)
            round_end.wait()
            round_start.wait()
        finished_writers.append(w)
        if len(finished_writers) == WRITERS:
            writers_done.set()

    def replacer() -> None:
        rng = random.Random(1000)
        start.wait()
        for r in range(ROUNDS):
            round_end.wait()
            # The writers are quiet: their models are the store's exact content.
            assert_content_and_indexes(store, {k: v for m in models for k, v in m.items()})
            items: list[Any] = []
            for w, model in enumerate(models):
                new_model: dict[str, Any] = {}
                for j in range(NAMES_PER_WRITER):
                    if rng.random() < 0.5:
                        obj = make_obj(rng, f"w{w}", f"o{j}", 10_000 + r)
                        new_model[f"w{w}/o{j}"] = obj
                        items.append(obj)
                model.clear()
                model.update(new_model)
            rv = f"rv-{r}"
            store.replace(items, rv)
            last_rv.append(rv)
            round_start.wait()

    def reader(n: int) -> None:
        rng = random.Random(2000 + n)
        start.wait()
        for i in range(MAX_READS):
            if i >= MIN_READS and writers_done.is_set():
                break
            seen[n] += check_read_consistency(store, rng, i)

    for w in range(WRITERS):
        workers.spawn(lambda w=w: writer(w), f"writer-{w}")
    for n in range(READERS):
        workers.spawn(lambda n=n: reader(n), f"reader-{n}")
    workers.spawn(replacer, "replacer")
    workers.run_all()

    assert sorted(finished_writers) == list(range(WRITERS))
    assert all(count > 0 for count in seen), "a reader never saw any object"
    expected = {k: v for m in models for k, v in m.items()}
    assert expected, "the writers' final content should not be empty"
    assert_content_and_indexes(store, expected)
    assert store.last_store_sync_resource_version() == f"rv-{ROUNDS - 1}"
    assert last_rv == [f"rv-{r}" for r in range(ROUNDS)]


def test_contended_keys_keep_indexes_exact() -> None:
    """Many threads rewrite the same keys: whichever write lands last, indexes match it."""
    store = new_indexer(indexers=dict(INDEXERS))
    threads = 6
    iterations = 400
    keys = [f"shared/o{j}" for j in range(4)]
    workers = Workers()
    start = threading.Barrier(threads, timeout=JOIN_TIMEOUT)
    workers.barriers = [start]
    last_written: dict[tuple[int, str], Any] = {}

    def hammer(t: int) -> None:
        rng = random.Random(t)
        start.wait()
        for i in range(iterations):
            key = keys[i % len(keys)]
            name = key.split("/")[1]
            obj = make_obj(rng, "shared", name, t * iterations + i)
            if i % 7 == 6:
                store.delete(obj)
                last_written[t, key] = None
            else:
                store.update(obj)
                last_written[t, key] = obj

    for t in range(threads):
        workers.spawn(lambda t=t: hammer(t), f"hammer-{t}")
    workers.run_all()

    stored = {key: store.get_by_key(key) for key in store.list_keys()}
    for key in keys:
        # The final value of each key is some thread's last write to it.
        candidates = [last_written[t, key] for t in range(threads)]
        assert any(stored.get(key) is c for c in candidates), key
    for name, func in INDEXERS.items():
        assert actual_index(store, name) == expected_index(stored, func), name
