"""The measured cases of ``informers.py``: each a function of a ``Ctx``, in ``CASES``.

The driver runs each case in a fresh process (``informers.py --case NAME``),
which calls ``run_case``: it imports every client first (imports are not what
is measured), runs the case, and returns its figures as a dict of numbers
(``rate``, ``seconds`` or ``per_object`` decides which run is the median).
The module docstring of ``informers.py`` says what each contender is and what
is measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import ssl
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any, Final

import msgspec
from _measure import GcRecorder, RssSampler, rss_bytes

WORKLOAD = 300_000
"""Small containers allocated (and kept until the end) after a sync, to surface GC debt."""


class _WireEvent(msgspec.Struct, gc=False):
    type: str
    object: Any


class Ctx:
    """Where a case process sends its requests (passed on its command line).

    ``url``/``namespace``: the server of the sync, memory and relist cases (the
    emulator's ``bench``, the scale server's, or a real cluster's namespace
    when ``kubeconfig`` is set); ``recorded``: the server of the watch cases;
    ``control``: the emulator's control server (relists).
    """

    def __init__(
        self,
        url: str,
        control: str,
        recorded: str,
        pods: int,
        events: int,
        namespace: str = "bench",
        kubeconfig: str | None = None,
    ) -> None:
        self.url = url
        self.control = control
        self.recorded = recorded
        self.pods = pods
        self.events = events
        self.namespace = namespace
        self.kubeconfig = kubeconfig

    def pods_url(self) -> str:
        return f"{self.url}/api/v1/namespaces/{self.namespace}/pods"

    async def session(self) -> Any:
        """An aiohttp session for the bare loops (TLS and token for a real cluster)."""
        import aiohttp

        if self.kubeconfig is None:
            return aiohttp.ClientSession()
        from kubereflector.client import load_config

        config = load_config(self.kubeconfig)
        context = ssl.create_default_context()
        if config.ca_data:
            context.load_verify_locations(cadata=config.ca_data.decode())
        auth = await config.auth.authorize()
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context), headers=dict(auth.headers)
        )


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
    protocol: str = "watch-list",
) -> Any:
    """A SharedIndexInformer with ``handler``; yields (informer, registration, start).

    ``protocol``: ``"watch-list"`` (the informer's default) or ``"list"`` (a
    list at resourceVersion "0", then a watch: ``use_watch_list=False``).
    """
    from kubereflector import ReflectorOptions, SharedIndexInformer
    from kubereflector.client import Client, ClientConfig, ResourceListWatch

    if ctx.kubeconfig is not None and url is None:
        from kubereflector.client import load_config

        config = load_config(ctx.kubeconfig)
    else:
        config = ClientConfig(server=url or ctx.url)
    async with Client(config) as client:
        lw: Any = ResourceListWatch(
            client, "pods", namespace=namespace, metadata_only=metadata_only
        )
        await lw.resource_info()  # discovery is not what is measured
        informer = SharedIndexInformer(
            lw,
            expected_kind=None if metadata_only else "Pod",
            object_mode=object_mode,  # type: ignore[arg-type]
            reflector_options=ReflectorOptions(use_watch_list=protocol != "list"),
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

    if ctx.kubeconfig is not None and url is None:
        from kubernetes import config as k8s_config

        configuration = k8s.Configuration()
        k8s_config.load_kube_config(ctx.kubeconfig, client_configuration=configuration)
    else:
        configuration = k8s.Configuration()
        configuration.host = url or ctx.url
    api = k8s.CoreV1Api(k8s.ApiClient(configuration))
    return SharedInformer(api.list_namespaced_pod, namespace=namespace)


def _set_gc_variant(variant: str) -> None:
    """Swap the GC window of the informer's bulk syncs (the Reflector's, the
    listener's and the controller's: each imported ``defer_full_collections``) for a
    candidate (benchmark only)."""
    import kubereflector.cache._listener as listener_module
    import kubereflector.cache.controller as controller_module
    import kubereflector.cache.reflector as reflector_module

    def window(enter: Callable[[], Any], leave: Callable[[Any], None]) -> Any:
        @contextlib.contextmanager
        def candidate(*, sync: bool = False) -> Iterator[None]:
            saved = enter()
            try:
                yield
            finally:
                leave(saved)

        return candidate

    if variant == "none":
        replacement = window(lambda: None, lambda _: None)
    elif variant == "pause":

        def disable() -> bool:
            was_enabled = gc.isenabled()
            gc.disable()
            return was_enabled

        replacement = window(disable, lambda was_enabled: gc.enable() if was_enabled else None)
    elif variant == "gen0":

        def raise_gen0() -> tuple[int, ...]:
            saved = gc.get_threshold()
            gc.set_threshold(saved[0] * 100, *saved[1:])
            return saved

        replacement = window(raise_gen0, lambda saved: gc.set_threshold(*saved))
    elif variant in ("defer", "freeze"):
        return
    else:
        raise ValueError(variant)
    for module in (reflector_module, listener_module, controller_module):
        module.defer_full_collections = replacement  # type: ignore[attr-defined]


# -- 1. initial sync ------------------------------------------------------------------


async def sync_bare_list(ctx: Ctx) -> dict[str, Any]:
    import msgspec

    decode = msgspec.json.Decoder().decode
    with GcRecorder() as recorder:
        start = time.perf_counter()
        with _gc_tuned():
            async with (
                await ctx.session() as session,
                session.get(ctx.pods_url(), params={"resourceVersion": "0"}) as response,
            ):
                body = await response.read()
            store = {_key(o): o for o in decode(body)["items"]}
            del body
            end = time.perf_counter()
    assert len(store) == ctx.pods, len(store)
    return {"seconds": end - start, **recorder.between(start, end)}


async def sync_raw(ctx: Ctx, protocol: str, watch_list: bool) -> dict[str, Any]:
    """The server's share of a sync: the list at "0" (or the watch-list stream until its
    ``initial-events-end`` bookmark) read to the last byte, nothing decoded, in JSON or
    protobuf (``Accept: application/vnd.kubernetes.protobuf``, which kube-apiserver
    encodes for built-in kinds)."""
    accept = "application/vnd.kubernetes.protobuf" if protocol == "protobuf" else "application/json"
    params = {"resourceVersion": "0"}
    if watch_list:
        params = {
            "watch": "1",
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
            "allowWatchBookmarks": "true",
        }
    mark = b"k8s.io/initial-events-end"
    size = 0
    start = time.perf_counter()
    async with (
        await ctx.session() as session,
        session.get(ctx.pods_url(), params=params, headers={"Accept": accept}) as response,
    ):
        if response.status != 200:
            raise SystemExit(f"{ctx.pods_url()}: {response.status} {await response.text()}")
        tail = b""
        async for chunk in response.content.iter_any():
            size += len(chunk)
            if watch_list:
                if mark in tail + chunk:
                    break
                tail = chunk[-len(mark) :]
        end = time.perf_counter()
    return {"seconds": end - start, "bytes": size}


async def sync_bare_watchlist(ctx: Ctx) -> dict[str, Any]:
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
                await ctx.session() as session,
                session.get(ctx.pods_url(), params=params) as response,
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
    ctx: Ctx, variant: str = "defer", object_mode: str = "dict", protocol: str = "watch-list"
) -> dict[str, Any]:
    from kubereflector import wait_for_cache_sync

    _set_gc_variant(variant)
    handler = _Handler()
    with GcRecorder() as recorder:
        async with _informer(
            ctx, ctx.namespace, handler, object_mode=object_mode, protocol=protocol
        ) as (informer, registration, start):
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
    informer = _official(ctx, ctx.namespace)
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
        ctx.namespace,
        handler,
        transform=strip_managed_fields if variant.endswith("strip") else None,
        metadata_only=variant.startswith("metadata"),
        object_mode=(
            "compact-protobuf"
            if variant == "compact-protobuf"
            else "compact"
            if variant.startswith("compact")
            else "dict"
        ),
        # (protobuf comes with a list; the others keep the informer's default)
        protocol="list" if variant == "compact-protobuf" else "watch-list",
    ) as (informer, registration, _start):
        await wait_for_cache_sync(registration)
        held = memory.now() - base
        objects = len(informer.indexer)
    assert objects == ctx.pods, objects
    return {"per_object": held / objects}


async def memory_bare(ctx: Ctx, method: str) -> dict[str, Any]:
    import msgspec

    memory = _Memory(method)
    base = memory.now()
    async with await ctx.session() as session:
        store = {_key(o): o for o in msgspec.json.decode(await _read(session, ctx))["items"]}
        held = memory.now() - base
    return {"per_object": held / len(store)}


async def _read(session: Any, ctx: Ctx) -> bytes:
    # Returns the body only: an aiohttp response keeps its body while it lives.
    async with session.get(ctx.pods_url(), params={"resourceVersion": "0"}) as response:
        body: bytes = await response.read()
        return body


def memory_official(ctx: Ctx, method: str) -> dict[str, Any]:
    memory = _Memory(method)
    base = memory.now()
    informer = _official(ctx, ctx.namespace)
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
    informer = _official(ctx, ctx.namespace)
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


# -- 5. scale ----------------------------------------------------------------------------------


async def scale_kubereflector(ctx: Ctx, object_mode: str) -> dict[str, Any]:
    """An informer's initial sync (watch-list) of ``ctx.pods`` Pods: time, and the
    process's RSS before, at its peak during the sync, and once synced (after
    ``gc.collect()``)."""
    from kubereflector import wait_for_cache_sync

    handler = _Handler()
    gc.collect()
    base = rss_bytes()
    with RssSampler() as sampler:
        async with _informer(ctx, ctx.namespace, handler, object_mode=object_mode) as (
            informer,
            registration,
            start,
        ):
            await wait_for_cache_sync(registration)
            end = time.perf_counter()
            assert len(informer.indexer) == ctx.pods, len(informer.indexer)
            peak = max(sampler.peak, rss_bytes())
            gc.collect()
            steady = rss_bytes()
    return {
        "seconds": end - start,
        "base": base,
        "peak": peak,
        "steady": steady,
        "peak_over_steady": peak / steady,
        "growth_peak_over_steady": (peak - base) / max(steady - base, 1),
    }


# -- the cases ----------------------------------------------------------------------------------

CASES: dict[str, Callable[[Ctx], Any]] = {
    "sync-bare-list": sync_bare_list,
    "sync-bare-watchlist": sync_bare_watchlist,
    "sync-kubereflector": sync_kubereflector,
    "sync-official": sync_official,
    "sync-raw-list-json": lambda ctx: sync_raw(ctx, "json", watch_list=False),
    "sync-raw-list-protobuf": lambda ctx: sync_raw(ctx, "protobuf", watch_list=False),
    "sync-raw-watchlist-json": lambda ctx: sync_raw(ctx, "json", watch_list=True),
    "sync-raw-watchlist-protobuf": lambda ctx: sync_raw(ctx, "protobuf", watch_list=True),
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
    "sync-kubereflector-list": lambda ctx: sync_kubereflector(ctx, "defer", "dict", "list"),
    "sync-kubereflector-compact-list": lambda ctx: sync_kubereflector(
        ctx, "defer", "compact", "list"
    ),
    "sync-kubereflector-compact-protobuf": lambda ctx: sync_kubereflector(
        ctx, "defer", "compact-protobuf", "list"
    ),
    "scale-dict": lambda ctx: scale_kubereflector(ctx, "dict"),
    "scale-compact": lambda ctx: scale_kubereflector(ctx, "compact"),
}
for _method in ("tracemalloc", "rss"):
    CASES[f"memory-bare-{_method}"] = lambda ctx, m=_method: memory_bare(ctx, m)
    CASES[f"memory-official-{_method}"] = lambda ctx, m=_method: memory_official(ctx, m)
    for _variant in (
        "dicts",
        "strip",
        "metadata",
        "metadata-strip",
        "compact",
        "compact-strip",
        "compact-protobuf",
    ):
        CASES[f"memory-{_variant}-{_method}"] = lambda ctx, v=_variant, m=_method: (
            memory_kubereflector(ctx, v, m)
        )


GC_CASES: Final = ["gc-none", "gc-pause", "gc-freeze", "gc-gen0"]
"""Round one's garbage collector variants of the initial sync (``--gc``)."""


def run_case(case: str, ctx: Ctx) -> dict[str, Any]:
    """Run ``case`` against ``ctx`` in this process, imports first; return its figures."""
    _import_everything()
    func = CASES[case]
    result = func(ctx)
    if asyncio.iscoroutine(result):
        result = asyncio.run(result)
    return dict(result)
