"""Informers end to end: kubereflector's SharedIndexInformer, its limit, and the official client.

    .venv/bin/python benchmarks/informers.py [--pods 10000] [--events 20000] [--repeat 3]

Servers, each in its own process, over HTTP:

- the project's ``ApiServerEmulator`` (``_emulator.py``), seeded through its
  data API with ``--pods`` realistic Pods (``_pods.make_pod``: ~5.5 KB of JSON
  each, managedFields included), for the initial sync, the memory and the
  relist;
- the recorded server (``_server.py``, the one ``watch_stream.py`` uses) for
  the watch stream, because the emulator cannot serve a watch at full speed:
  its write path takes ~0.3 ms per update, slower than the clients read, and a
  burst written into it in one step goes out as a single 110 MB HTTP chunk,
  which kube-apiserver never sends (it flushes per event) and on which the
  official client's line splitter turns quadratic (it copies the rest of its
  buffer for every line; the run did not finish in minutes). The recorded
  server sends the same kind of Pods, 8 events per chunk.

Every case runs in a fresh process (imports done before the clock starts);
timed cases are run ``--repeat`` times, interleaved, and the best run is kept
(the slow official client ``--official-repeat`` times). Three contenders read
the same bytes from the same server in the same run:

- **bare**: aiohttp + msgspec, the fastest loop written here (the practical
  limit, not a straw man): one request, typed ``decode_lines`` over ~4 KB
  slices of each chunk (or one ``decode`` of a whole list), a ``dict`` keyed
  ``namespace/name``; the garbage collector is disabled around the work and the
  result frozen (``gc.freeze()``), as an application that owns its process may
  do. For the initial sync the faster of a plain list and a watch-list stream
  counts;
- **kubereflector**: ``SharedIndexInformer`` over ``ResourceListWatch``, as a
  user gets it (watch-list first, RealFIFO, default GC settings), with one
  event handler: a plain ``def`` one (run on a thread) or an ``async def`` one
  (run on the loop);
- **official**: ``kubernetes.informer.SharedInformer`` (kubernetes 37) over
  ``CoreV1Api.list_namespaced_pod``, with one handler.

What is measured:

1. *initial sync* of ``--pods`` Pods: from ``run()``/``start()`` until the
   cache has synced (``wait_for_cache_sync(informer)``; the official client
   fills its cache before calling its first ADDED handler), and until the
   handler has seen every object;
2. *watch throughput*: ``--events`` events of ~5.5 KB from the first to the
   last one seen by the handler;
3. *memory per cached object* after the sync, after ``gc.collect()``:
   tracemalloc (bytes allocated and still held, divided by the object count)
   and the RSS delta (what the OS sees), each in its own process, for plain
   dicts, with ``strip_managed_fields``, for metadata-only informers, and for
   the official client's informer;
4. *relist after a 410* on the synced ``--pods``: the emulator updates one Pod,
   compacts its history and ends every watch; the re-watch gets a 410 and the
   informer relists. Timed until the handler sees the updated Pod (the last
   of the relist); kubereflector first waits its Reflector's backoff (0.8-1.6 s
   the first time, as client-go), which is measured and shown apart. Also the
   CPU time and the RSS peak above the synced state.

Then the garbage collector: the same informer sync with the library's remedy
(``kubereflector._gc.defer_full_collections``: full collections deferred
during a bulk sync) against no remedy, against pausing the collector for the
sync (``gc.disable``), against a raised generation-0 threshold, and with the
application freezing the cache after the sync (``gc.freeze``, an application's
decision). After the sync each case allocates 300,000 small containers (an
application going on with its work), to show what collection work was
deferred rather than saved. For the watch, a longer yield interval of the
decoder (256 KiB, as before this issue) is measured beside the current one.

Printed: markdown tables with absolute figures and ratios, the targets of the
issue and whether they are met, and the machine line. Nothing here is asserted
by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import gc
import json
import os
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import GcRecorder, RssSampler, machine, rss_bytes, versions

HERE = Path(__file__).resolve().parent

STREAM_PODS = 1_000
"""Pods in the namespace the watch bursts update (each event is one of them)."""

WORKLOAD = 300_000
"""Small containers allocated (and kept until the end) after a sync, to surface GC debt."""


class _WireEvent(msgspec.Struct, gc=False):
    type: str
    object: Any


class Ctx:
    def __init__(self, url: str, control: str, recorded: str, pods: int, events: int) -> None:
        self.url = url
        self.control = control
        self.recorded = recorded
        self.pods = pods
        self.events = events


# -- helpers used inside the case processes ------------------------------------------


def _import_everything() -> None:
    """Imports are not what is measured: load every client's modules first."""
    import aiohttp  # noqa: F401
    import kubernetes.client
    import kubernetes.informer
    import kubernetes.watch  # noqa: F401
    import msgspec  # noqa: F401

    import kubereflector
    import kubereflector.client  # noqa: F401


def _post(url: str) -> Any:
    """A blocking POST to the emulator's control server (returns the decoded JSON)."""
    import urllib.request

    with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=600) as r:
        return json.loads(r.read())


async def _apost(url: str) -> Any:
    return await asyncio.to_thread(_post, url)


def _key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}"


def _workload(recorder: GcRecorder) -> dict[str, float]:
    """Allocate WORKLOAD small containers (kept); the GC work that triggers."""
    start = time.perf_counter()
    kept = [[i] for i in range(WORKLOAD)]
    end = time.perf_counter()
    del kept
    stats = recorder.between(start, end)
    return {"after_" + k: v for k, v in stats.items()}


@contextlib.contextmanager
def _gc_tuned() -> Iterator[None]:
    """What an application that owns its process may do: no collector during the
    work, and the result frozen out of every later collection."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


class _Handler:
    """One plain-function event handler: counts, timestamps, and waits for a marker.

    ``wanted``: after that many notifications (adds and updates) ``done`` is set;
    ``first``/``last`` are the times of the first and of that one.
    """

    def __init__(self, wanted: int = 0, marker: tuple[str, str] | None = None) -> None:
        self.adds = 0
        self.seen = 0
        self.wanted = wanted
        self.first = 0.0
        self.last = 0.0
        self.marker = marker
        self.marked_at = 0.0
        self.done = threading.Event()

    def _count(self) -> None:
        self.seen += 1
        if self.seen == 1:
            self.first = time.perf_counter()
        if self.seen == self.wanted:
            self.last = time.perf_counter()
            self.done.set()

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self.adds += 1
        self._count()

    def on_update(self, old: Any, new: Any) -> None:
        self._count()
        if self.marker is not None:
            annotations = new["metadata"].get("annotations") or {}
            if annotations.get(self.marker[0]) == self.marker[1]:
                self.marked_at = time.perf_counter()
                self.done.set()

    def on_delete(self, obj: Any) -> None:
        pass


async def _wait_event(event: threading.Event, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not event.is_set():
        if time.monotonic() > deadline:
            raise TimeoutError("the benchmark case did not finish")
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def _informer(
    ctx: Ctx,
    namespace: str,
    handler: Any,
    *,
    transform: Callable[[Any], Any] | None = None,
    metadata_only: bool = False,
    url: str | None = None,
    object_mode: str = "dict",
) -> Any:
    """A SharedIndexInformer with ``handler``; yields (informer, registration, start)."""
    from kubereflector import SharedIndexInformer
    from kubereflector.client import Client, ClientConfig, ResourceListWatch

    async with Client(ClientConfig(server=url or ctx.url)) as client:
        lw = ResourceListWatch(client, "pods", namespace=namespace, metadata_only=metadata_only)
        await lw.resource_info()  # discovery is not what is measured
        informer = SharedIndexInformer(
            lw,
            expected_kind=None if metadata_only else "Pod",
            object_mode=object_mode,  # type: ignore[arg-type]
        )
        if transform is not None:
            informer.set_transform(transform)
        registration = informer.add_event_handler(handler)
        start = time.perf_counter()
        task = asyncio.create_task(informer.run())
        try:
            yield informer, registration, start
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def _official(ctx: Ctx, namespace: str, url: str | None = None) -> Any:
    from kubernetes import client as k8s
    from kubernetes.informer import SharedInformer

    configuration = k8s.Configuration()
    configuration.host = url or ctx.url
    api = k8s.CoreV1Api(k8s.ApiClient(configuration))
    return SharedInformer(api.list_namespaced_pod, namespace=namespace)


def _set_gc_variant(variant: str) -> None:
    """Swap the Reflector's GC window for a candidate (benchmark only)."""
    import kubereflector.reflector as reflector_module

    if variant == "none":
        reflector_module.defer_full_collections = contextlib.nullcontext  # type: ignore[assignment]
    elif variant == "pause":

        @contextlib.contextmanager
        def pause() -> Iterator[None]:
            was_enabled = gc.isenabled()
            gc.disable()
            try:
                yield
            finally:
                if was_enabled:
                    gc.enable()

        reflector_module.defer_full_collections = pause  # type: ignore[assignment]
    elif variant == "gen0":

        @contextlib.contextmanager
        def raise_gen0() -> Iterator[None]:
            saved = gc.get_threshold()
            gc.set_threshold(saved[0] * 100, *saved[1:])
            try:
                yield
            finally:
                gc.set_threshold(*saved)

        reflector_module.defer_full_collections = raise_gen0  # type: ignore[assignment]
    elif variant not in ("defer", "freeze"):
        raise ValueError(variant)


# -- 1. initial sync ------------------------------------------------------------------


async def sync_bare_list(ctx: Ctx) -> dict[str, Any]:
    import aiohttp
    import msgspec

    decode = msgspec.json.Decoder().decode
    with GcRecorder() as recorder:
        start = time.perf_counter()
        with _gc_tuned():
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"{ctx.url}/api/v1/namespaces/bench/pods") as response,
            ):
                body = await response.read()
            store = {_key(o): o for o in decode(body)["items"]}
            del body
            end = time.perf_counter()
    assert len(store) == ctx.pods, len(store)
    return {"seconds": end - start, **recorder.between(start, end)}


async def sync_bare_watchlist(ctx: Ctx) -> dict[str, Any]:
    import aiohttp
    import msgspec

    decode_lines = msgspec.json.Decoder(_WireEvent).decode_lines
    params = {
        "watch": "1",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
    }
    store: dict[str, Any] = {}
    with GcRecorder() as recorder:
        start = time.perf_counter()
        with _gc_tuned():
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"{ctx.url}/api/v1/namespaces/bench/pods", params=params) as response,
            ):
                tail = b""
                synced = False
                while not synced:
                    chunk = await response.content.readany()
                    if not chunk:
                        break
                    data = tail + chunk if tail else chunk
                    end_of_lines = data.rfind(b"\n") + 1
                    tail = data[end_of_lines:]
                    view = memoryview(data)
                    begin = 0
                    while begin < end_of_lines and not synced:
                        stop = data.find(b"\n", begin + 4096, end_of_lines) + 1 or end_of_lines
                        for event in decode_lines(view[begin:stop]):
                            if event.type == "BOOKMARK":
                                synced = True
                                break
                            obj = event.object
                            store[_key(obj)] = obj
                        begin = stop
            end = time.perf_counter()
    assert len(store) == ctx.pods, len(store)
    return {"seconds": end - start, **recorder.between(start, end)}


async def sync_kubereflector(
    ctx: Ctx, variant: str = "defer", object_mode: str = "dict"
) -> dict[str, Any]:
    from kubereflector import wait_for_cache_sync

    _set_gc_variant(variant)
    handler = _Handler()
    with GcRecorder() as recorder:
        async with _informer(ctx, "bench", handler, object_mode=object_mode) as (
            informer,
            registration,
            start,
        ):
            await wait_for_cache_sync(informer)
            end = time.perf_counter()
            await wait_for_cache_sync(registration)
            handled = time.perf_counter()
            assert handler.adds == ctx.pods == len(informer.indexer), handler.adds
            if variant == "freeze":
                gc.freeze()  # the application's decision, after its caches synced
            after = _workload(recorder)
    return {
        "seconds": end - start,
        "handled": handled - start,
        **recorder.between(start, end),
        **after,
        **{"handler_" + k: v for k, v in recorder.between(end, handled).items()},
    }


def sync_official(ctx: Ctx) -> dict[str, Any]:
    informer = _official(ctx, "bench")
    done = threading.Event()
    count = [0]
    synced = [0.0]

    def on_add(obj: Any) -> None:
        # Its handlers are called after the cache has been filled: the first one
        # is when the cache has synced.
        count[0] += 1
        if count[0] == 1:
            synced[0] = time.perf_counter()
        if count[0] == ctx.pods:
            done.set()

    informer.add_event_handler("ADDED", on_add)
    with GcRecorder() as recorder:
        start = time.perf_counter()
        informer.start()
        done.wait(600)
        handled = time.perf_counter()
        end = synced[0]
        after = _workload(recorder)
    assert count[0] == ctx.pods, count[0]
    return {
        "seconds": end - start,
        "handled": handled - start,
        **recorder.between(start, end),
        **after,
        **{"handler_" + k: v for k, v in recorder.between(end, handled).items()},
    }


# -- 2. watch throughput ---------------------------------------------------------------


async def watch_bare(ctx: Ctx) -> dict[str, Any]:
    import aiohttp
    import msgspec

    decode = msgspec.json.Decoder().decode
    decode_lines = msgspec.json.Decoder(_WireEvent).decode_lines
    url = f"{ctx.recorded}/api/v1/namespaces/stream/pods"
    async with aiohttp.ClientSession() as session:
        with _gc_tuned():
            async with session.get(url) as response:
                listed = decode(await response.read())
            store = {_key(o): o for o in listed["items"]}
            rv = listed["metadata"]["resourceVersion"]
            del listed
        params = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true"}
        count = 0
        first = last = 0.0
        gc.disable()
        try:
            async with session.get(url, params=params) as response:
                tail = b""
                while count < ctx.events:
                    chunk = await response.content.readany()
                    if not chunk:
                        break
                    if not first:
                        first = time.perf_counter()
                    data = tail + chunk if tail else chunk
                    end = data.rfind(b"\n") + 1
                    tail = data[end:]
                    view = memoryview(data)
                    start = 0
                    while start < end:  # batches of ~4 KB: decoded objects stay in cache
                        stop = data.find(b"\n", start + 4096, end) + 1 or end
                        for event in decode_lines(view[start:stop]):
                            obj = event.object
                            store[_key(obj)] = obj
                            count += 1
                        start = stop
                last = time.perf_counter()
        finally:
            gc.enable()
    assert count == ctx.events, count
    zero = {"gc_young": 0.0, "gc_full": 0.0, "gc_full_count": 0, "gc_total": 0.0}
    return {"rate": (count - 1) / (last - first), "seconds": last - first, **zero}


class _AsyncHandler(_Handler):
    """The same handler with coroutine methods: it runs on the informer's loop."""

    async def on_add(self, obj: Any, is_in_initial_list: bool) -> None:  # type: ignore[override]
        _Handler.on_add(self, obj, is_in_initial_list)

    async def on_update(self, old: Any, new: Any) -> None:  # type: ignore[override]
        _Handler.on_update(self, old, new)

    async def on_delete(self, obj: Any) -> None:  # type: ignore[override]
        pass


async def watch_kubereflector(
    ctx: Ctx, kind: str = "def", yield_cost: int = 0, object_mode: str = "dict"
) -> dict[str, Any]:
    if yield_cost:  # the decoder's setting before this issue, for comparison
        import kubereflector.client._lines as lines

        lines.YIELD_COST = yield_cost  # type: ignore[misc]
    handler_class = _AsyncHandler if kind == "async" else _Handler
    handler = handler_class(wanted=ctx.events)
    with GcRecorder() as recorder:
        async with _informer(ctx, "stream", handler, url=ctx.recorded, object_mode=object_mode):
            await _wait_event(handler.done)
    seconds = handler.last - handler.first
    gc_stats = recorder.between(handler.first, handler.last)
    return {"rate": (ctx.events - 1) / seconds, "seconds": seconds, **gc_stats}


def watch_official(ctx: Ctx) -> dict[str, Any]:
    informer = _official(ctx, "stream", url=ctx.recorded)
    done = threading.Event()
    seen = [0]
    times = [0.0, 0.0]

    def on_event(obj: Any) -> None:
        seen[0] += 1
        if seen[0] == 1:
            times[0] = time.perf_counter()
        if seen[0] == ctx.events:
            times[1] = time.perf_counter()
            done.set()

    informer.add_event_handler("ADDED", on_event)
    informer.add_event_handler("MODIFIED", on_event)
    with GcRecorder() as recorder:
        informer.start()
        done.wait(600)
    seconds = times[1] - times[0]
    gc_stats = recorder.between(times[0], times[1])
    return {"rate": (ctx.events - 1) / seconds, "seconds": seconds, **gc_stats}


# -- 3. memory per cached object ---------------------------------------------------------


class _Memory:
    """Bytes held: tracemalloc's current total, or the RSS."""

    def __init__(self, method: str) -> None:
        self.method = method
        if method == "tracemalloc":
            tracemalloc.start()

    def now(self) -> int:
        gc.collect()
        if self.method == "tracemalloc":
            return tracemalloc.get_traced_memory()[0]
        return rss_bytes()


async def memory_kubereflector(ctx: Ctx, variant: str, method: str) -> dict[str, Any]:
    from kubereflector import strip_managed_fields, wait_for_cache_sync

    memory = _Memory(method)
    base = memory.now()
    handler = _Handler()
    async with _informer(
        ctx,
        "bench",
        handler,
        transform=strip_managed_fields if variant.endswith("strip") else None,
        metadata_only=variant.startswith("metadata"),
        object_mode="compact" if variant.startswith("compact") else "dict",
    ) as (informer, registration, _start):
        await wait_for_cache_sync(registration)
        held = memory.now() - base
        objects = len(informer.indexer)
    assert objects == ctx.pods, objects
    return {"per_object": held / objects}


async def memory_bare(ctx: Ctx, method: str) -> dict[str, Any]:
    import aiohttp
    import msgspec

    memory = _Memory(method)
    base = memory.now()
    async with aiohttp.ClientSession() as session:
        store = {_key(o): o for o in msgspec.json.decode(await _read(session, ctx))["items"]}
        held = memory.now() - base
    return {"per_object": held / len(store)}


async def _read(session: Any, ctx: Ctx) -> bytes:
    # Returns the body only: an aiohttp response keeps its body while it lives.
    async with session.get(f"{ctx.url}/api/v1/namespaces/bench/pods") as response:
        body: bytes = await response.read()
        return body


def memory_official(ctx: Ctx, method: str) -> dict[str, Any]:
    memory = _Memory(method)
    base = memory.now()
    informer = _official(ctx, "bench")
    done = threading.Event()
    count = [0]

    def on_add(obj: Any) -> None:
        count[0] += 1
        if count[0] == ctx.pods:
            done.set()

    informer.add_event_handler("ADDED", on_add)
    informer.start()
    done.wait(600)
    held = memory.now() - base
    objects = len(informer.cache.list_keys())
    return {"per_object": held / objects}


# -- 4. relist after a 410 -------------------------------------------------------------------


async def relist_kubereflector(
    ctx: Ctx, kind: str = "def", object_mode: str = "dict"
) -> dict[str, Any]:
    from kubereflector import wait_for_cache_sync
    from kubereflector.backoff import Backoff

    waited = [0.0]
    original_wait = Backoff.wait

    async def wait(self: Backoff, at_least: float = 0.0) -> float:
        delay = await original_wait(self, at_least)
        waited[0] += delay
        return delay

    Backoff.wait = wait  # type: ignore[method-assign]
    round_ = str(os.getpid())
    handler_class = _AsyncHandler if kind == "async" else _Handler
    handler = handler_class(marker=("bench/round", round_))
    async with _informer(ctx, "bench", handler, object_mode=object_mode) as (
        informer,
        registration,
        _start,
    ):
        await wait_for_cache_sync(registration)
        gc.collect()
        before = rss_bytes()
        with GcRecorder() as recorder:
            with RssSampler() as sampler:
                cpu = time.process_time()
                start = time.perf_counter()
                await _apost(f"{ctx.control}/expire?round={round_}")
                await _wait_event(handler.done)
                cpu = time.process_time() - cpu
            await _drained(registration)
            after = _workload(recorder)
        stats = informer.stats()
    assert stats.relists == 1, stats
    wall = handler.marked_at - start
    return {
        "wall": wall,
        "backoff": waited[0],
        "seconds": wall - waited[0],
        "cpu": cpu,
        "peak": sampler.peak - before,
        **recorder.between(start, handler.marked_at),
        **after,
    }


async def _drained(registration: Any) -> None:
    """Wait until the handler has taken every notification, and its consumer idles."""
    for _ in range(600_000):
        if not registration.pending:
            break
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.01)


def relist_official(ctx: Ctx) -> dict[str, Any]:
    informer = _official(ctx, "bench")
    round_ = str(os.getpid())
    synced = threading.Event()
    done = threading.Event()
    adds = [0]
    marked = [0.0]

    def on_add(obj: Any) -> None:
        adds[0] += 1
        if adds[0] == ctx.pods:
            synced.set()

    def on_modified(obj: Any) -> None:
        annotations = obj.metadata.annotations or {}
        if annotations.get("bench/round") == round_:
            marked[0] = time.perf_counter()
            done.set()

    informer.add_event_handler("ADDED", on_add)
    informer.add_event_handler("MODIFIED", on_modified)
    informer.start()
    synced.wait(600)
    time.sleep(0.5)  # let the watch open after the list
    gc.collect()
    before = rss_bytes()
    with GcRecorder() as recorder:
        with RssSampler() as sampler:
            cpu = time.process_time()
            start = time.perf_counter()
            _post(f"{ctx.control}/expire?round={round_}")
            done.wait(600)
            cpu = time.process_time() - cpu
        after = _workload(recorder)
    wall = marked[0] - start
    peak = sampler.peak - before
    return {
        "wall": wall,
        "backoff": 0.0,
        "seconds": wall,
        "cpu": cpu,
        "peak": peak,
        **recorder.between(start, marked[0]),
        **after,
    }


async def relist_bare(ctx: Ctx) -> dict[str, Any]:
    """The limit: list everything again into a fresh dict that replaces the old one."""
    import aiohttp
    import msgspec

    decode = msgspec.json.Decoder().decode
    async with aiohttp.ClientSession() as session:

        async def list_all() -> dict[str, Any]:
            async with session.get(f"{ctx.url}/api/v1/namespaces/bench/pods") as response:
                body = await response.read()
            return {_key(o): o for o in decode(body)["items"]}

        with _gc_tuned():
            store = await list_all()
        gc.collect()
        before = rss_bytes()
        with GcRecorder() as recorder:
            with RssSampler() as sampler:
                cpu = time.process_time()
                start = time.perf_counter()
                with _gc_tuned():
                    store = await list_all()
                end = time.perf_counter()
                cpu = time.process_time() - cpu
            after = _workload(recorder)
    assert len(store) == ctx.pods
    wall = end - start
    peak = sampler.peak - before
    return {
        "wall": wall,
        "backoff": 0.0,
        "seconds": wall,
        "cpu": cpu,
        "peak": peak,
        **recorder.between(start, end),
        **after,
    }


# -- the cases ----------------------------------------------------------------------------------

CASES: dict[str, Callable[[Ctx], Any]] = {
    "sync-bare-list": sync_bare_list,
    "sync-bare-watchlist": sync_bare_watchlist,
    "sync-kubereflector": sync_kubereflector,
    "sync-official": sync_official,
    "gc-none": lambda ctx: sync_kubereflector(ctx, "none"),
    "gc-pause": lambda ctx: sync_kubereflector(ctx, "pause"),
    "gc-freeze": lambda ctx: sync_kubereflector(ctx, "freeze"),
    "gc-gen0": lambda ctx: sync_kubereflector(ctx, "gen0"),
    "watch-bare": watch_bare,
    "watch-kubereflector": watch_kubereflector,
    "watch-kubereflector-async": lambda ctx: watch_kubereflector(ctx, "async"),
    "watch-kubereflector-async-yield256k": lambda ctx: watch_kubereflector(
        ctx, "async", 256 * 1024
    ),
    "watch-official": watch_official,
    "relist-bare": relist_bare,
    "relist-kubereflector": relist_kubereflector,
    "relist-kubereflector-async": lambda ctx: relist_kubereflector(ctx, "async"),
    "relist-kubereflector-compact": lambda ctx: relist_kubereflector(ctx, "def", "compact"),
    "relist-kubereflector-compact-async": lambda ctx: relist_kubereflector(ctx, "async", "compact"),
    "sync-kubereflector-compact": lambda ctx: sync_kubereflector(ctx, "defer", "compact"),
    "watch-kubereflector-compact": lambda ctx: watch_kubereflector(ctx, "def", 0, "compact"),
    "watch-kubereflector-compact-async": lambda ctx: watch_kubereflector(
        ctx, "async", 0, "compact"
    ),
    "relist-official": relist_official,
}
for _method in ("tracemalloc", "rss"):
    CASES[f"memory-bare-{_method}"] = lambda ctx, m=_method: memory_bare(ctx, m)
    CASES[f"memory-official-{_method}"] = lambda ctx, m=_method: memory_official(ctx, m)
    for _variant in ("dicts", "strip", "metadata", "metadata-strip", "compact", "compact-strip"):
        CASES[f"memory-{_variant}-{_method}"] = lambda ctx, v=_variant, m=_method: (
            memory_kubereflector(ctx, v, m)
        )


def run_case(case: str, ctx: Ctx) -> dict[str, Any]:
    _import_everything()
    func = CASES[case]
    result = func(ctx)
    if asyncio.iscoroutine(result):
        result = asyncio.run(result)
    return dict(result)


# -- the driver ----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Runner:
    def __init__(self, args: argparse.Namespace, ctx: Ctx) -> None:
        self.args = args
        self.ctx = ctx
        self.results: dict[str, dict[str, Any]] = {}

    def run(self, case: str) -> dict[str, Any]:
        ctx = self.ctx
        command = [
            sys.executable,
            __file__,
            "--case",
            case,
            "--url",
            ctx.url,
            "--control",
            ctx.control,
            "--recorded",
            ctx.recorded,
            "--pods",
            str(ctx.pods),
            "--events",
            str(ctx.events),
        ]
        out = subprocess.run(command, check=True, capture_output=True, text=True, timeout=900)
        result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        return result

    def median_of(self, cases: list[str], repeat: int) -> None:
        """Run each case ``repeat`` times, interleaved, keeping each one's median run
        (the run whose deciding figure is the median; every run is printed)."""
        runs: dict[str, list[dict[str, Any]]] = {case: [] for case in cases}
        for _ in range(repeat):
            for case in cases:
                runs[case].append(self.run(case))
        for case in cases:
            ordered = sorted(runs[case], key=lambda res: res[_decider(res)])
            self.results[case] = median = ordered[(len(ordered) - 1) // 2]
            decider = _decider(median)
            every = ", ".join(f"{res[decider]:.4g}" for res in runs[case])
            shown = {k: round(v, 4) for k, v in median.items()}
            print(f"  {case}: {decider} [{every}] -> median {shown}", file=sys.stderr, flush=True)


def _decider(result: dict[str, Any]) -> str:
    """The figure of a case's result that orders its runs."""
    for name in ("rate", "seconds", "per_object"):
        if name in result:
            return name
    raise KeyError(f"no rate, seconds or per_object in {sorted(result)}")


@contextlib.contextmanager
def _server(script: str, *args: str) -> Iterator[None]:
    """Run a benchmark server in its own process until the block ends."""
    process = subprocess.Popen(
        [sys.executable, str(HERE / script), *args], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "ready":
            raise SystemExit(f"{script} did not start")
        yield
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--official-repeat", type=int, default=2)
    parser.add_argument(
        "--only",
        metavar="CASE,...",
        help="run only these cases (comma-separated; see CASES) and print their best runs",
    )
    parser.add_argument("--case", choices=sorted(CASES), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--control", help=argparse.SUPPRESS)
    parser.add_argument("--recorded", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        ctx = Ctx(args.url, args.control, args.recorded, args.pods, args.events)
        print(json.dumps(run_case(args.case, ctx)), flush=True)
        os._exit(0)  # the official informer's thread blocks in a read: do not join it

    port, control_port, recorded_port = _free_port(), _free_port(), _free_port()
    print(
        f"starting the emulator with {args.pods:,} Pods and the recorded server with "
        f"{args.events:,} events...",
        file=sys.stderr,
        flush=True,
    )
    emulator = _server(
        "_emulator.py",
        *("--port", str(port), "--control-port", str(control_port), "--pods", str(args.pods)),
    )
    recorded = _server(
        "_server.py",
        *("--port", str(recorded_port), "--pods", str(STREAM_PODS), "--events", str(args.events)),
    )
    with emulator, recorded:
        ctx = Ctx(
            f"http://127.0.0.1:{port}",
            f"http://127.0.0.1:{control_port}",
            f"http://127.0.0.1:{recorded_port}",
            args.pods,
            args.events,
        )
        runner = Runner(args, ctx)
        n, slow = args.repeat, args.official_repeat
        if args.only:
            runner.median_of(_only(args.only), n)
            return
        runner.median_of(
            [
                "sync-bare-list",
                "sync-bare-watchlist",
                "sync-kubereflector",
                "gc-none",
                "gc-pause",
                "gc-freeze",
                "gc-gen0",
            ],
            n,
        )
        runner.median_of(["sync-official"], slow)
        runner.median_of(
            [
                "watch-bare",
                "watch-kubereflector",
                "watch-kubereflector-async",
                "watch-kubereflector-async-yield256k",
            ],
            n,
        )
        runner.median_of(["watch-official"], slow)
        runner.median_of([c for c in CASES if c.startswith("memory-")], 1)
        runner.median_of(["relist-bare", "relist-kubereflector"], n)
        runner.median_of(["relist-official"], 1)
    print_tables(runner.results, args)


# -- the tables ------------------------------------------------------------------------------------


def _only(names: str) -> list[str]:
    cases = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in cases if name not in CASES]
    if unknown or not cases:
        raise SystemExit(f"--only: unknown case(s) {unknown}; choose from {sorted(CASES)}")
    return cases


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: list[str], rows: list[list[str]]) -> None:
    print(_row(header))
    print("|" + "---|" * len(header))
    for row in rows:
        print(_row(row))
    print()


def print_tables(r: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    pods, events = args.pods, args.events
    today = datetime.date.today().isoformat()
    print(f"\n{today}; {machine()}; {versions()}.")
    print(
        f"Best of {args.repeat} runs ({args.official_repeat} for the official client), "
        "each case in a fresh process; the ApiServerEmulator in its own process over "
        "HTTP; Pods of ~5.5 KB of JSON with managedFields.\n"
    )

    bare_list, bare_wl = r["sync-bare-list"], r["sync-bare-watchlist"]
    bare_sync = min(bare_list, bare_wl, key=lambda x: x["seconds"])
    bare_form = "list" if bare_sync is bare_list else "watch-list"
    s = [bare_sync["seconds"], r["sync-kubereflector"]["seconds"], r["sync-official"]["seconds"]]
    w_bare, w_official = r["watch-bare"]["rate"], r["watch-official"]["rate"]
    w_async, w_def = r["watch-kubereflector-async"]["rate"], r["watch-kubereflector"]["rate"]
    mem = {k: r[f"memory-{k}-tracemalloc"]["per_object"] for k in ("bare", "dicts", "official")}
    relist = {k: r[f"relist-{k}"]["seconds"] for k in ("bare", "kubereflector", "official")}

    def ratios(bare: float, ours: float, official: float, faster: bool) -> list[str]:
        if faster:  # times: lower is better
            return [f"{bare / ours:.2f}", f"{official / ours:.1f}x faster"]
        return [f"{ours / bare:.2f}", f"{ours / official:.1f}x"]

    _table(
        [
            "measure",
            "bare aiohttp+msgspec",
            "kubereflector",
            "official client",
            "kubereflector / bare",
            "kubereflector vs official",
        ],
        [
            [
                f"initial sync, {pods:,} pods (s until has_synced)",
                f"{s[0]:.2f} ({bare_form}, GC off)",
                f"{s[1]:.2f}",
                f"{s[2]:.2f}",
                *ratios(s[0], s[1], s[2], faster=True),
            ],
            [
                f"watch, {events:,} events of ~5.5 KB, one `async def` handler (events/s)",
                f"{w_bare:,.0f}",
                f"{w_async:,.0f}",
                f"{w_official:,.0f}",
                *ratios(w_bare, w_async, w_official, faster=False),
            ],
            [
                f"watch, {events:,} events, one plain `def` handler (events/s)",
                f"{w_bare:,.0f}",
                f"{w_def:,.0f}",
                f"{w_official:,.0f}",
                *ratios(w_bare, w_def, w_official, faster=False),
            ],
            [
                "memory per cached pod, tracemalloc (KB)",
                f"{mem['bare'] / 1000:.1f}",
                f"{mem['dicts'] / 1000:.1f}",
                f"{mem['official'] / 1000:.1f}",
                f"{mem['dicts'] / mem['bare']:.2f}",
                f"{mem['dicts'] / mem['official']:.2f} of it",
            ],
            [
                f"relist after a 410, {pods:,} pods (s, backoff excluded)",
                f"{relist['bare']:.2f}",
                f"{relist['kubereflector']:.2f}",
                f"{relist['official']:.2f}",
                *ratios(relist["bare"], relist["kubereflector"], relist["official"], faster=True),
            ],
        ],
    )

    print("Initial sync in detail (GC: time in collections until has_synced):\n")
    rows = []
    for name, res in (
        ("bare, one list, GC off + freeze", bare_list),
        ("bare, watch-list stream, GC off + freeze", bare_wl),
        ("kubereflector SharedIndexInformer (watch-list)", r["sync-kubereflector"]),
        ("official SharedInformer (one list)", r["sync-official"]),
    ):
        handled = res.get("handled")
        rows.append(
            [
                name,
                f"{res['seconds']:.2f}",
                "" if handled is None else f"{handled:.2f}",
                f"{res['gc_young']:.3f}",
                f"{res['gc_full']:.3f} ({res['gc_full_count']})",
            ]
        )
    _table(
        ["contender", "has_synced (s)", "handler saw all (s)", "GC young (s)", "GC full (s, n)"],
        rows,
    )

    print(f"Watch throughput in detail ({events:,} MODIFIED events, GC during them):\n")
    rows = []
    for name, key in (
        ("bare (GC off)", "watch-bare"),
        ("kubereflector, `async def` handler", "watch-kubereflector-async"),
        (
            "kubereflector, `async def` handler, decoder yielding every 256 KiB (before)",
            "watch-kubereflector-async-yield256k",
        ),
        ("kubereflector, plain `def` handler (runs on a thread)", "watch-kubereflector"),
        ("official SharedInformer", "watch-official"),
    ):
        res = r[key]
        rows.append(
            [
                name,
                f"{res['rate']:,.0f}",
                f"{res['rate'] / w_bare:.2f}",
                f"{res['gc_young']:.3f}",
                f"{res['gc_full']:.3f} ({res['gc_full_count']})",
            ]
        )
    _table(["contender", "events/s", "/ bare", "GC young (s)", "GC full (s, n)"], rows)

    print("Memory per cached object after the sync, after gc.collect() (KB):\n")
    rows = []
    for name, key in (
        ("bare dict of decoded dicts", "bare"),
        ("kubereflector, plain dicts", "dicts"),
        ("kubereflector, strip_managed_fields", "strip"),
        ("kubereflector, metadata-only", "metadata"),
        ("kubereflector, metadata-only + strip_managed_fields", "metadata-strip"),
        ("official SharedInformer (models)", "official"),
    ):
        traced = r[f"memory-{key}-tracemalloc"]["per_object"]
        rss = r[f"memory-{key}-rss"]["per_object"]
        rows.append(
            [name, f"{traced / 1000:.1f}", f"{rss / 1000:.1f}", f"{traced / mem['official']:.2f}"]
        )
    _table(["cache", "tracemalloc", "RSS delta", "vs official (tracemalloc)"], rows)

    print(f"Relist after a 410 on {pods:,} synced pods:\n")
    rows = []
    for name, key in (
        ("bare: list again into a new dict", "bare"),
        ("kubereflector", "kubereflector"),
        ("official", "official"),
    ):
        res = r[f"relist-{key}"]
        rows.append(
            [
                name,
                f"{res['wall']:.2f}",
                f"{res['backoff']:.2f}",
                f"{res['seconds']:.2f}",
                f"{res['cpu']:.2f}",
                f"{res['peak'] / 1e6:.0f}",
            ]
        )
    _table(
        [
            "contender",
            "caught up (s)",
            "of it backoff (s)",
            "relist (s)",
            "CPU (s)",
            "RSS peak above synced (MB)",
        ],
        rows,
    )

    print(
        f"The garbage collector in kubereflector's initial sync of {pods:,} pods, then while "
        f"the application allocates {WORKLOAD:,} containers (what was deferred, not saved):\n"
    )
    rows = []
    for name, key in (
        ("default (no remedy)", "gc-none"),
        ("**full collections deferred during the sync (shipped)**", "sync-kubereflector"),
        ("gc.disable() during the sync", "gc-pause"),
        ("gen-0 threshold x100 during the sync", "gc-gen0"),
        ("shipped + the application's gc.freeze() after the sync", "gc-freeze"),
    ):
        res = r[key]
        rows.append(
            [
                name,
                f"{res['seconds']:.2f}",
                f"{res['gc_total']:.3f}",
                str(res["gc_full_count"]),
                f"{res['after_gc_total']:.3f}",
                f"{res['gc_total'] + res['after_gc_total']:.3f}",
            ]
        )
    _table(
        [
            "GC handling",
            "has_synced (s)",
            "GC in sync (s)",
            "full collections in sync",
            "GC after (s)",
            "GC in sync + after (s)",
        ],
        rows,
    )

    strip = r["memory-strip-tracemalloc"]["per_object"]
    strip_rss = r["memory-strip-rss"]["per_object"]
    targets = [
        ("initial sync >= 0.75 of the bare loop", s[0] / s[1] >= 0.75, f"{s[0] / s[1]:.2f}"),
        (
            "watch events/s >= 0.75 of the bare loop, `async def` handler",
            w_async / w_bare >= 0.75,
            f"{w_async / w_bare:.2f}",
        ),
        (
            "watch events/s >= 0.75 of the bare loop, plain `def` handler",
            w_def / w_bare >= 0.75,
            f"{w_def / w_bare:.2f}",
        ),
        ("initial sync >= 8x faster than official", s[2] / s[1] >= 8, f"{s[2] / s[1]:.1f}x"),
        (
            "watch events/s >= 6x official, `async def` handler",
            w_async / w_official >= 6,
            f"{w_async / w_official:.1f}x",
        ),
        (
            "watch events/s >= 6x official, plain `def` handler",
            w_def / w_official >= 6,
            f"{w_def / w_official:.1f}x",
        ),
        (
            "memory per pod <= 0.5 of official",
            mem["dicts"] <= mem["official"] / 2,
            f"{mem['dicts'] / mem['official']:.2f}",
        ),
        (
            "memory per pod <= 20 KB with strip_managed_fields (tracemalloc / RSS)",
            strip <= 20_000,
            f"{strip / 1000:.1f} / {strip_rss / 1000:.1f} KB",
        ),
    ]
    print("Targets (this machine, this run):\n")
    _table(
        ["target", "measured", "met"],
        [[name, shown, "yes" if ok else "**no**"] for name, ok, shown in targets],
    )


if __name__ == "__main__":
    main()
