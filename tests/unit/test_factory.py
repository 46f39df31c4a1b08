"""SharedInformerFactory and its background loop thread, without a network.

``FakeClient`` stands in for the HTTP Client: the real ``Discovery`` reads its
aggregated discovery documents, and ``ResourceListWatch`` lists and watches one
``FakeControllerSource`` per resource through it. Like the real Client it
refuses to be used from a second event loop, so a factory that ran anything on
the wrong loop fails here.

SharedInformerFactory tests are coroutines (the factory runs on the test's loop);
SyncSharedInformerFactory tests are plain functions with no event loop at all, as
a sync user's program is. Plain handlers record through a threading.Condition and
the tests wait on it with a timeout; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
from typing_extensions import NotRequired, TypedDict

from discovery_doc import Resource, aggregated_discovery
from kubereflector import (
    ApiError,
    FactoryShutdownError,
    ForbiddenError,
    ListOptions,
    ReflectorOptions,
    ResourceEventHandlerDetailedFuncs,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    SharedInformerFactory,
    SyncSharedInformerFactory,
)
from kubereflector._aio.loop_thread import LoopThread
from kubereflector.client import Discovery, ResourceInfo, UnknownResourceError
from kubereflector.models import ApiResource, Deployment, Pod, register
from kubereflector.models.meta_v1 import ObjectMeta
from kubereflector.testing import FakeControllerSource

WAIT = 10.0
"""Upper bound (seconds) on any wait; never reached when things work."""

CORE_AND_APPS = [
    Resource("", "v1", "pods", "Pod", True, ["po"]),
    Resource("", "v1", "configmaps", "ConfigMap", True, ["cm"]),
    Resource("", "v1", "nodes", "Node", False, ["no"]),
    Resource("apps", "v1", "deployments", "Deployment", True, ["deploy"]),
]
GADGETS = Resource("example.com", "v1", "gadgets", "Gadget", False, ["gd"])


class FakeClient:
    """What SharedInformerFactory and ResourceListWatch use of a Client, in memory."""

    server = "https://fake.invalid"

    def __init__(self) -> None:
        self.resources: list[Resource] = list(CORE_AND_APPS)
        self.sources: dict[tuple[str, str], FakeControllerSource] = {}
        self.calls: list[tuple[str, str, ListOptions]] = []
        """(verb, path, options as received) of every list and watch."""
        self.discovery_fetches = 0
        self.fail_discovery: BaseException | None = None
        self.closed = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self._discovery: Discovery | None = None
        self._lock = threading.Lock()

    @property
    def discovery(self) -> Discovery:
        if self._discovery is None:
            self._discovery = Discovery(self)  # type: ignore[arg-type]
        return self._discovery

    def source(self, resource: str, group: str = "") -> FakeControllerSource:
        with self._lock:
            return self.sources.setdefault((group, resource), FakeControllerSource())

    def _use(self) -> None:
        loop = asyncio.get_running_loop()
        if self.loop is None:
            self.loop = loop
        elif self.loop is not loop:
            raise RuntimeError("FakeClient used from a second event loop")
        if self.closed:
            raise RuntimeError("FakeClient used after close()")

    async def request(self, method: str, path: str, **_kwargs: Any) -> Any:
        self._use()
        if self.fail_discovery is not None:
            raise self.fail_discovery
        if (method, path) == ("GET", "/api"):
            self.discovery_fetches += 1
            return aggregated_discovery(self.resources, core=True)
        if (method, path) == ("GET", "/apis"):
            return aggregated_discovery(self.resources, core=False)
        raise AssertionError(f"unexpected request {method} {path}")

    def _route(self, verb: str, path: str, options: ListOptions) -> tuple[Any, ListOptions]:
        self._use()
        with self._lock:
            self.calls.append((verb, path, options))
        parts = path.strip("/").split("/")
        group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
        resource = rest[2] if rest[0] == "namespaces" else rest[0]
        # FakeControllerSource refuses selectors: they were recorded above.
        plain = dataclasses.replace(options, label_selector="", field_selector="")
        return self.source(resource, group), plain

    async def list(self, path: str, options: ListOptions, *, metadata_only: bool = False) -> Any:
        source, plain = self._route("list", path, options)
        return await source.list(plain)

    def watch(self, path: str, options: ListOptions, *, metadata_only: bool = False) -> Any:
        source, plain = self._route("watch", path, options)
        return source.watch(plain)

    async def close(self) -> None:
        self.closed = True

    def calls_for(self, resource: str) -> list[tuple[str, str, ListOptions]]:
        with self._lock:
            return [c for c in self.calls if c[1].endswith("/" + resource)]


def pod(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
    }


def deployment(name: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "apiVersion": "apps/v1",
        "metadata": {"name": name, "namespace": namespace},
    }


def configmap(name: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace},
    }


def names(objects: list[Any]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objects)


def on_any_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Recorder:
    """A plain-function handler recording (event, name) and where it ran."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.events: list[tuple[str, str]] = []
        self.on_loop: set[bool] = set()
        self.threads: set[int] = set()
        self.gate = gate
        self._cond = threading.Condition()

    def _record(self, event: str, obj: Any) -> None:
        if self.gate is not None and not self.gate.wait(WAIT):
            raise AssertionError("the gate never opened")
        with self._cond:
            self.events.append((event, obj["metadata"]["name"]))
            self.on_loop.add(on_any_loop())
            self.threads.add(threading.get_ident())
            self._cond.notify_all()

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self._record("add", obj)

    def on_update(self, old: Any, new: Any) -> None:
        self._record("update", new)

    def on_delete(self, obj: Any) -> None:
        self._record("delete", obj)

    def wait_until(self, predicate: Callable[[list[tuple[str, str]]], bool]) -> list[Any]:
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self.events), WAIT):
                raise AssertionError(f"condition never met; events: {self.events}")
            return list(self.events)


def factory_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "kubereflector-factory" and t.is_alive()]


# -- sharing and resolution (SharedInformerFactory) -------------------------------------------


@pytest.mark.asyncio
async def test_one_informer_per_resource_whatever_its_name() -> None:
    client = FakeClient()
    async with SharedInformerFactory(client) as factory:  # type: ignore[arg-type]
        assert factory.loop is asyncio.get_running_loop()
        pods = factory.informer_for("pods")
        assert isinstance(pods, SharedIndexInformer)
        for name in ("po", "Pod", "pod", "v1/pods"):
            assert factory.informer_for(name) is pods
        deployments = factory.informer_for("deployments.apps")
        assert deployments is not pods
        assert factory.informer_for("deploy") is deployments
        assert factory.informer_for("apps/v1/deployments") is deployments
        info = await client.discovery.resolve("deployments")
        assert factory.informer_for(info) is deployments
        assert factory.lister_for("po") is pods.lister
        assert set(factory.informers()) == {"pods", "deployments.apps"}
    assert client.discovery_fetches == 1


@pytest.mark.asyncio
async def test_a_name_missing_from_discovery_asks_for_resolve() -> None:
    client = FakeClient()
    async with SharedInformerFactory(client) as factory:  # type: ignore[arg-type]
        with pytest.raises(UnknownResourceError, match=r"await factory\.resolve\('gadgets'\)"):
            factory.informer_for("gadgets")
        client.resources.append(GADGETS)  # a CRD created since discovery was loaded
        info = await factory.resolve("gadgets")
        assert (info.group, info.resource, info.namespaced) == ("example.com", "gadgets", False)
        gadgets = factory.informer_for(info)
        assert factory.informer_for("gd") is gadgets
        assert factory.informer_for("gadgets.example.com") is gadgets
        with pytest.raises(UnknownResourceError, match="did you mean"):
            await factory.resolve("gadget-typo")


@pytest.mark.asyncio
async def test_informer_for_before_entering_needs_resolve() -> None:
    client = FakeClient()
    client.source("pods").add(pod("a"))
    factory = SharedInformerFactory(client)  # type: ignore[arg-type]
    with pytest.raises(UnknownResourceError, match="async with"):
        factory.informer_for("pods")
    assert factory.loop is None
    pods = factory.informer_for(await factory.resolve("po"))
    assert factory.loop is asyncio.get_running_loop()
    assert factory.informer_for("pods") is pods
    factory.start()
    assert await factory.wait_for_cache_sync(timeout=WAIT) == {"pods": True}
    assert names(factory.lister_for("pods").list()) == ["a"]
    await factory.shutdown()
    assert pods.is_stopped()


@pytest.mark.asyncio
async def test_a_failing_discovery_fails_the_entry_and_shuts_down() -> None:
    client = FakeClient()
    client.fail_discovery = ApiError(503, "ServiceUnavailable", "not now")
    factory = SharedInformerFactory(client)  # type: ignore[arg-type]
    with pytest.raises(ApiError, match="not now"):
        async with factory:
            pytest.fail("entered")
    assert factory.is_shut_down()
    with pytest.raises(FactoryShutdownError):
        factory.start()


@pytest.mark.asyncio
async def test_unknown_custom_resync_name_fails_early() -> None:
    factory = SharedInformerFactory(FakeClient(), custom_resync={"nosuchthing": 5})  # type: ignore[arg-type]
    with pytest.raises(UnknownResourceError, match="nosuchthing"):
        await factory.__aenter__()


# -- running (SharedInformerFactory) ----------------------------------------------------------


@pytest.mark.asyncio
async def test_start_sync_handlers_and_listers() -> None:
    client = FakeClient()
    for name in ("a", "b"):
        client.source("pods").add(pod(name))
    client.source("pods").add(pod("x", namespace="other"))
    client.source("deployments", "apps").add(deployment("web"))
    seen: list[tuple[str, str]] = []

    async def on_add(obj: Any) -> None:
        seen.append((obj["kind"], obj["metadata"]["name"]))

    async with SharedInformerFactory(client) as factory:  # type: ignore[arg-type]
        pods = factory.informer_for("pods")
        registration = pods.add_event_handler(ResourceEventHandlerFuncs(on_add=on_add))
        factory.informer_for("deployments.apps")
        factory.start()
        synced = await factory.wait_for_cache_sync(timeout=WAIT, handlers=[registration])
        assert synced == {"pods": True, "deployments.apps": True}
        assert sorted(seen) == [("Pod", "a"), ("Pod", "b"), ("Pod", "x")]
        assert names(factory.lister_for("pods").namespaced("default").list()) == ["a", "b"]
        assert factory.lister_for("pods").namespaced("other").get("x") is not None
        assert names(factory.lister_for("deploy").list()) == ["web"]
        # changes flow on
        done = asyncio.Event()

        async def on_delete(_obj: Any) -> None:
            done.set()

        pods.add_event_handler(ResourceEventHandlerFuncs(on_delete=on_delete))
        client.source("pods").delete(pod("a"))
        await asyncio.wait_for(done.wait(), WAIT)
        assert names(factory.lister_for("pods").namespaced("default").list()) == ["b"]
    assert pods.is_stopped()
    assert client.source("pods").open_watches == 0
    assert not client.closed  # the caller's Client: never closed by the factory


@pytest.mark.asyncio
async def test_start_is_idempotent_and_starts_later_informers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = FakeClient()
    client.source("pods").add(pod("a"))
    client.source("configmaps").add(configmap("c"))
    async with SharedInformerFactory(client) as factory:  # type: ignore[arg-type]
        pods = factory.informer_for("pods")
        factory.start()
        factory.start()
        assert await factory.wait_for_cache_sync(timeout=WAIT) == {"pods": True}
        configmaps = factory.informer_for("cm")
        # not started yet: left out of the wait
        assert await factory.wait_for_cache_sync(timeout=WAIT) == {"pods": True}
        assert not configmaps.has_started()
        factory.start()
        factory.start()
        assert await factory.wait_for_cache_sync(timeout=WAIT) == {
            "pods": True,
            "configmaps": True,
        }
        assert configmaps.has_started()
        assert pods.has_started()
        # each informer runs once: one watch-list each
        assert [verb for verb, _, _ in client.calls_for("pods")] == ["watch"]
        assert [verb for verb, _, _ in client.calls_for("configmaps")] == ["watch"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.asyncio
async def test_namespace_tweak_transform_and_resync_reach_every_informer() -> None:
    client = FakeClient()
    client.source("pods").add(pod("a", namespace="team"))
    client.source("deployments", "apps").add(deployment("web", namespace="team"))

    def tweak(options: ListOptions) -> ListOptions:
        return dataclasses.replace(options, label_selector="app=web")

    def mark(obj: Any) -> Any:
        meta = {**obj["metadata"], "annotations": {"seen-by": "factory"}}
        return {**obj, "metadata": meta}

    factory = SharedInformerFactory(
        client,  # type: ignore[arg-type]
        namespace="team",
        default_resync=60,
        custom_resync={"po": 30},
        tweak_list_options=tweak,
        transform=mark,
    )
    async with factory:
        pods = factory.informer_for("pods")
        deployments = factory.informer_for("deployments.apps")
        pod_reg = pods.add_event_handler(ResourceEventHandlerFuncs())
        deploy_reg = deployments.add_event_handler(ResourceEventHandlerFuncs())
        assert (pod_reg.resync_period, deploy_reg.resync_period) == (30.0, 60.0)
        factory.start()
        assert all((await factory.wait_for_cache_sync(timeout=WAIT)).values())
        for informer in (pods, deployments):
            (obj,) = informer.indexer.list()
            assert obj["metadata"]["annotations"] == {"seen-by": "factory"}
    assert client.calls
    for _verb, path, options in client.calls:
        assert "/namespaces/team/" in path
        assert options.label_selector == "app=web"


@pytest.mark.asyncio
async def test_reflector_options_a_default_and_per_resource() -> None:
    client = FakeClient()
    for name in ("a", "b", "c"):
        client.source("pods").add(pod(name))
    client.source("deployments", "apps").add(deployment("web"))
    default = ReflectorOptions(idle_timeout=30)
    paged = dataclasses.replace(default, use_watch_list=False, page_size=2)
    factory = SharedInformerFactory(
        client,  # type: ignore[arg-type]
        reflector_options=default,
        custom_reflector_options={"po": paged},  # any name of the resource
    )
    async with factory:
        pods = factory.informer_for("pods")
        deployments = factory.informer_for("deployments.apps")
        assert pods.reflector_options is paged
        assert deployments.reflector_options is default
        factory.start()
        assert all((await factory.wait_for_cache_sync(timeout=WAIT)).values())
    # and they reached the Reflectors: pods listed in pages of 2, deployments streamed
    pod_calls = [(verb, o.limit, o.send_initial_events) for verb, _, o in client.calls_for("pods")]
    assert pod_calls[:3] == [("list", 2, None), ("list", 2, None), ("watch", None, None)]
    ((verb, _, options), *_) = client.calls_for("deployments")
    assert (verb, options.send_initial_events) == ("watch", True)


@pytest.mark.asyncio
async def test_reflector_options_are_checked_and_their_names_resolved_early() -> None:
    with pytest.raises(TypeError, match="reflector_options must be ReflectorOptions"):
        SharedInformerFactory(FakeClient(), reflector_options=30)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"custom_reflector_options\['pods'\] must be"):
        SharedInformerFactory(FakeClient(), custom_reflector_options={"pods": {}})  # type: ignore[arg-type,dict-item]
    with pytest.raises(TypeError, match="keys are resource names"):
        SharedInformerFactory(FakeClient(), custom_reflector_options={"": ReflectorOptions()})  # type: ignore[arg-type]
    factory = SharedInformerFactory(
        FakeClient(),  # type: ignore[arg-type]
        custom_reflector_options={"nosuchthing": ReflectorOptions()},
    )
    with pytest.raises(UnknownResourceError, match="nosuchthing"):
        await factory.__aenter__()


@pytest.mark.asyncio
async def test_a_cache_that_cannot_sync_times_out_and_shutdown_ends_waits() -> None:
    client = FakeClient()
    client.source("pods").add(pod("a"))
    forbidden = ForbiddenError("pods is forbidden")
    client.source("pods").fail_next_watch(forbidden, times=1000)
    client.source("pods").fail_next_list(forbidden, times=1000)
    async with SharedInformerFactory(client) as factory:  # type: ignore[arg-type]
        factory.informer_for("pods")
        factory.start()
        assert await factory.wait_for_cache_sync(timeout=0.05) == {"pods": False}
        waiting = asyncio.ensure_future(factory.wait_for_cache_sync())  # no timeout
        await asyncio.sleep(0)
        assert not waiting.done()
    assert await asyncio.wait_for(waiting, WAIT) == {"pods": False}


@pytest.mark.asyncio
async def test_an_empty_resource_syncs_without_a_timeout() -> None:
    client = FakeClient()
    async with SharedInformerFactory(client) as factory:  # type: ignore[arg-type]
        factory.informer_for("pods")
        factory.start()
        # Waiting before the informer's first step: it cannot have synced already.
        synced = await asyncio.wait_for(factory.wait_for_cache_sync(), 1.0)
        assert synced == {"pods": True}


@pytest.mark.asyncio
async def test_handlers_to_wait_for() -> None:
    client = FakeClient()
    client.source("pods").add(pod("a"))
    gate = threading.Event()
    slow = Recorder(gate=gate)
    async with SharedInformerFactory(client) as factory:  # type: ignore[arg-type]
        pods = factory.informer_for("pods")
        registration = pods.add_event_handler(slow)
        factory.start()
        assert await factory.wait_for_cache_sync(timeout=WAIT) == {"pods": True}
        stuck = await factory.wait_for_cache_sync(timeout=0.05, handlers=[registration])
        assert stuck == {"pods": False}
        gate.set()
        done = await factory.wait_for_cache_sync(timeout=WAIT, handlers=[registration])
        assert done == {"pods": True}
        assert slow.events == [("add", "a")]
        foreign = SharedIndexInformer(FakeControllerSource())
        with pytest.raises(ValueError, match="not a registration of this factory"):
            await factory.wait_for_cache_sync(handlers=[foreign.add_event_handler(Recorder())])
        with pytest.raises(TypeError):
            await factory.wait_for_cache_sync(handlers=[pods])  # type: ignore[list-item]


@pytest.mark.asyncio
async def test_after_shutdown() -> None:
    client = FakeClient()
    client.source("pods").add(pod("a"))
    factory = SharedInformerFactory(client)  # type: ignore[arg-type]
    async with factory:
        pods = factory.informer_for("pods")
        factory.start()
        await factory.wait_for_cache_sync(timeout=WAIT)
    assert factory.is_shut_down()
    await factory.shutdown()  # idempotent
    assert pods.is_stopped()
    assert factory.informer_for("po") is pods  # existing informers stay readable
    with pytest.raises(FactoryShutdownError):
        factory.informer_for("configmaps")
    with pytest.raises(FactoryShutdownError):
        factory.start()
    with pytest.raises(FactoryShutdownError):
        await factory.resolve("pods")
    assert await factory.wait_for_cache_sync() == {"pods": True}


@pytest.mark.asyncio
async def test_concurrent_shutdowns_wait_for_the_same_one() -> None:
    factory = SharedInformerFactory(FakeClient())  # type: ignore[arg-type]
    await factory.__aenter__()
    factory.informer_for("pods")
    factory.start()
    await asyncio.gather(
        factory.shutdown(), factory.shutdown(), factory.__aexit__(None, None, None)
    )
    assert factory.is_shut_down()


@pytest.mark.asyncio
async def test_the_async_factory_is_bound_to_one_loop() -> None:
    factory = SharedInformerFactory(FakeClient())  # type: ignore[arg-type]
    async with factory:
        other_loop_entered: list[BaseException] = []

        def enter_on_another_loop() -> None:
            async def enter() -> None:
                await factory.__aenter__()

            try:
                asyncio.run(enter())
            except RuntimeError as err:
                other_loop_entered.append(err)

        thread = threading.Thread(target=enter_on_another_loop)
        thread.start()
        thread.join(WAIT)
        assert [str(e) for e in other_loop_entered] == [
            "this SharedInformerFactory runs on another event loop"
        ]


def test_the_async_factory_refuses_plain_threads_and_names_the_sync_one() -> None:
    factory = SharedInformerFactory(FakeClient())  # type: ignore[arg-type]
    with (
        pytest.raises(
            TypeError, match=r"'async with SharedInformerFactory.*use SyncSharedInformerFactory"
        ),
        factory,  # type: ignore[attr-defined]
    ):
        pytest.fail("entered")
    with pytest.raises(RuntimeError, match="SyncSharedInformerFactory"):
        factory.start()  # no event loop runs here
    assert factory.loop is None
    assert factory_threads() == []


@pytest.mark.asyncio
async def test_the_sync_factory_refuses_async_with_and_names_the_async_one() -> None:
    factory = SyncSharedInformerFactory(FakeClient())  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"'with SyncSharedInformerFactory.*use SharedInformerFactory"
    ):
        async with factory:  # type: ignore[attr-defined]
            pytest.fail("entered")
    assert factory_threads() == []


def test_the_sync_factory_hands_out_a_sync_client_on_its_loop() -> None:
    factory = SyncSharedInformerFactory(FakeClient())  # type: ignore[arg-type]
    client = factory.sync_client()  # starts the loop thread
    assert client.loop is factory.loop
    assert client.client is factory.client
    assert client.run(asyncio.sleep(0, result="ran")) == "ran"  # on the factory's loop
    client.close()  # closes nothing of the factory's
    other = factory.sync_client()
    assert other.run(asyncio.sleep(0, result="still")) == "still"
    factory.shutdown()
    with pytest.raises(RuntimeError, match="not running"):
        other.run(asyncio.sleep(0))
    with pytest.raises(FactoryShutdownError):
        factory.sync_client()


@pytest.mark.parametrize("factory_class", [SharedInformerFactory, SyncSharedInformerFactory])
def test_arguments_are_checked(factory_class: type[SharedInformerFactory]) -> None:
    with pytest.raises(
        TypeError, match=f"{factory_class.__name__} needs a Client or a ClientConfig"
    ):
        factory_class("https://example.invalid")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="default_resync"):
        factory_class(FakeClient(), default_resync=-1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="custom_resync"):
        factory_class(FakeClient(), custom_resync={"pods": -1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"invalid namespace '\.\./kube-system'"):
        factory_class(FakeClient(), namespace="../kube-system")  # type: ignore[arg-type]
    factory = factory_class(FakeClient())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"a name, a ResourceInfo or a model class .*, not int"):
        factory.informer_for(42)  # type: ignore[call-overload]


def test_a_tweak_must_return_list_options() -> None:
    from kubereflector.factory import _TweakedListerWatcher

    lw = _TweakedListerWatcher(FakeControllerSource(), lambda _o: {"limit": 5})  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="must return ListOptions"):
        lw.watch(ListOptions())


# -- SyncSharedInformerFactory (no event loop in the calling threads) --------------------------


def test_sync_facade_from_plain_threads() -> None:
    client = FakeClient()
    source = client.source("pods")
    for name in ("a", "b", "c"):
        source.add(pod(name))
    factory = SyncSharedInformerFactory(client)  # type: ignore[arg-type]
    # Many threads ask at once, by different names: one informer.
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        informers = list(pool.map(factory.informer_for, ["pods", "po", "Pod", "v1/pods"] * 4))
    assert len(factory_threads()) == 1  # resolving the names started the loop thread
    pods = informers[0]
    assert all(i is pods for i in informers)
    assert client.discovery_fetches == 1
    first, second = Recorder(), Recorder()
    reg1 = pods.add_event_handler(first)
    reg2 = pods.add_event_handler(second)
    starter = threading.Thread(target=factory.start)  # start from another thread
    starter.start()
    starter.join(WAIT)
    synced = factory.wait_for_cache_sync(timeout=WAIT, handlers=[reg1, reg2])
    assert synced == {"pods": True}
    # changes, in order, to both handlers, off the event loop
    source.modify(pod("a", v="1"))
    source.delete(pod("b"))
    source.add(pod("d"))
    expected = [
        ("add", "a"),
        ("add", "b"),
        ("add", "c"),
        ("update", "a"),
        ("delete", "b"),
        ("add", "d"),
    ]
    for recorder in (first, second):
        assert recorder.wait_until(lambda events: len(events) >= 6) == expected
        assert recorder.on_loop == {False}
        assert len(recorder.threads) == 1
        assert threading.get_ident() not in recorder.threads
    assert first.threads != second.threads

    # reads from any thread, while the loop thread runs the informer
    def read(_: int) -> list[str]:
        return names(factory.lister_for("po").namespaced("default").list())

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert list(pool.map(read, range(8))) == [["a", "c", "d"]] * 8
    assert client.loop is factory.loop  # every request ran on the factory's own loop
    assert len(factory_threads()) == 1

    factory.shutdown()
    assert factory_threads() == []
    assert factory.loop is not None
    assert factory.loop.is_closed()
    assert pods.is_stopped()
    assert source.open_watches == 0
    factory.shutdown()  # idempotent
    assert names(factory.lister_for("pods").list()) == ["a", "c", "d"]  # still readable


def test_the_sync_factory_takes_reflector_options_too() -> None:
    client = FakeClient()
    for name in ("a", "b", "c"):
        client.source("pods").add(pod(name))
    paged = ReflectorOptions(use_watch_list=False, page_size=2)
    with SyncSharedInformerFactory(
        client,  # type: ignore[arg-type]
        custom_reflector_options={"pods": paged},
    ) as factory:
        pods = factory.informer_for("po")
        assert pods.reflector_options is paged
        assert factory.informer_for("deploy").reflector_options == ReflectorOptions()
        factory.start()
        assert factory.wait_for_cache_sync(timeout=WAIT)["pods"]
    limits = [o.limit for verb, _, o in client.calls_for("pods") if verb == "list"]
    assert limits == [2, 2]


def test_sync_with_block_and_a_second_informer_started_later() -> None:
    client = FakeClient()
    client.source("pods").add(pod("a"))
    client.source("deployments", "apps").add(deployment("web"))
    with SyncSharedInformerFactory(client) as factory:  # type: ignore[arg-type]
        assert len(factory_threads()) == 1
        factory.informer_for("pods")
        assert repr(factory) == "<SyncSharedInformerFactory new informers=[pods]>"
        factory.start()
        assert repr(factory) == "<SyncSharedInformerFactory started informers=[pods]>"
        assert factory.wait_for_cache_sync(timeout=WAIT) == {"pods": True}
        factory.informer_for("deploy")
        factory.start()
        assert factory.wait_for_cache_sync(timeout=WAIT) == {
            "pods": True,
            "deployments.apps": True,
        }
        assert names(factory.lister_for("deployments").list()) == ["web"]
    assert factory.is_shut_down()
    assert (
        repr(factory) == "<SyncSharedInformerFactory shut down informers=[pods, deployments.apps]>"
    )
    assert factory_threads() == []


def test_a_coroutine_handler_of_the_sync_factory_runs_on_its_loop() -> None:
    client = FakeClient()
    client.source("pods").add(pod("a"))
    client.source("configmaps").add(configmap("c"))
    outcomes: list[Any] = []
    done = threading.Event()
    with SyncSharedInformerFactory(client) as factory:  # type: ignore[arg-type]

        async def on_add(obj: Any, is_in_initial_list: bool) -> None:
            outcomes.append(asyncio.get_running_loop() is factory.loop)
            # Blocking calls would deadlock here: refused, with a pointer.
            with pytest.raises(RuntimeError, match="own loop thread"):
                factory.wait_for_cache_sync()
            with pytest.raises(RuntimeError, match="own loop thread"):
                factory.shutdown()
            with pytest.raises(UnknownResourceError, match="resolve"):
                factory.informer_for("nosuch")
            outcomes.append("refused")
            # Non-blocking ones work: a resolved name, and start().
            factory.informer_for("cm")
            factory.start()
            done.set()

        factory.informer_for("pods").add_event_handler(
            ResourceEventHandlerDetailedFuncs(on_add=on_add)
        )
        factory.start()
        assert done.wait(WAIT)
        assert factory.wait_for_cache_sync(timeout=WAIT) == {"pods": True, "configmaps": True}
    assert outcomes == [True, "refused"]


@pytest.mark.asyncio
async def test_the_sync_factory_runs_on_its_own_thread_where_a_loop_runs() -> None:
    """As in a notebook: an event loop runs in the caller's thread, the factory
    still runs on its own (and its blocking calls block this coroutine briefly)."""
    client = FakeClient()
    client.source("pods").add(pod("a"))
    with SyncSharedInformerFactory(client) as factory:  # type: ignore[arg-type]
        factory.informer_for("pods")
        factory.start()
        assert factory.loop is not asyncio.get_running_loop()
        assert factory.wait_for_cache_sync(timeout=WAIT) == {"pods": True}
        assert client.loop is factory.loop
    assert factory_threads() == []


def test_concurrent_sync_shutdowns() -> None:
    client = FakeClient()
    client.source("pods").add(pod("a"))
    factory = SyncSharedInformerFactory(client)  # type: ignore[arg-type]
    factory.informer_for("pods")
    factory.start()
    assert factory.wait_for_cache_sync(timeout=WAIT) == {"pods": True}
    threads = [threading.Thread(target=factory.shutdown) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()
    assert factory.is_shut_down()
    assert factory_threads() == []


def test_a_blocked_wait_returns_when_another_thread_shuts_down() -> None:
    client = FakeClient()
    client.source("pods").fail_next_watch(ForbiddenError("no"), times=1000)
    client.source("pods").fail_next_list(ForbiddenError("no"), times=1000)
    factory = SyncSharedInformerFactory(client)  # type: ignore[arg-type]
    factory.informer_for("pods")
    factory.start()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(factory.wait_for_cache_sync)
        factory.shutdown()
        assert waiting.result(WAIT) == {"pods": False}


def test_a_sync_factory_never_started() -> None:
    client = FakeClient()
    factory = SyncSharedInformerFactory(client)  # type: ignore[arg-type]
    assert factory.wait_for_cache_sync() == {}
    factory.shutdown()
    assert factory.is_shut_down()
    assert factory.loop is None
    assert factory_threads() == []


@pytest.mark.asyncio
async def test_an_async_factory_never_started() -> None:
    factory = SharedInformerFactory(FakeClient())  # type: ignore[arg-type]
    assert await factory.wait_for_cache_sync() == {}
    await factory.shutdown()
    assert factory.is_shut_down()
    assert factory.loop is None


# -- the loop thread ------------------------------------------------------------------------


def test_loop_thread_runs_coroutines_and_propagates_errors() -> None:
    thread = LoopThread(name="test-loop")
    thread.start()
    with pytest.raises(RuntimeError, match="only once"):
        thread.start()

    async def where() -> bool:
        return asyncio.get_running_loop() is thread.loop and thread.in_thread()

    async def fail() -> None:
        raise KeyError("boom")

    async def nested() -> str:
        inner = where()
        try:
            thread.run(inner)
        except RuntimeError as err:
            return str(err)
        return "not refused"

    assert thread.run(where()) is True
    with pytest.raises(KeyError, match="boom"):
        thread.run(fail())
    assert "deadlock" in thread.run(nested())
    pending = thread.submit(asyncio.Event().wait())  # left pending: cancelled at stop
    thread.stop()
    assert pending.cancelled()
    assert thread.loop.is_closed()
    assert not thread.is_running()
    assert thread.thread is not None
    assert not thread.thread.is_alive()
    thread.stop()  # idempotent
    with pytest.raises(RuntimeError, match="not running"):
        thread.run(where())  # closed, not left "never awaited"


# -- models: typed informers, resolved without discovery ----------------------------------


class SlimDeployment(TypedDict):
    """A model of the tests' own for a version of Deployments nobody serves."""

    metadata: NotRequired[ObjectMeta]


register(SlimDeployment, ApiResource("apps", "v2", "Deployment", "deployments", namespaced=True))


class Gadget(TypedDict):
    """A custom resource's model registered as namespaced: the server says otherwise."""

    metadata: NotRequired[ObjectMeta]


register(Gadget, ApiResource("example.com", "v1", "Gadget", "gadgets", namespaced=True))


@pytest.mark.asyncio
async def test_a_model_needs_no_discovery() -> None:
    client = FakeClient()
    client.source("pods").add(pod("a"))
    client.source("pods").add(pod("b", namespace="other"))
    factory = SharedInformerFactory(client)  # type: ignore[arg-type]  # never entered
    pods = factory.informer_for(Pod)
    assert factory.lister_for(Pod) is pods.lister
    factory.start()
    assert await factory.wait_for_cache_sync(timeout=WAIT) == {"pods": True}
    web = factory.lister_for(Pod).namespaced("other").get("b")
    assert web is not None
    assert web["metadata"].get("namespace") == "other"
    assert [(verb, path) for verb, path, _ in client.calls] == [("watch", "/api/v1/pods")]
    assert client.discovery_fetches == 0
    await factory.shutdown()


def test_a_model_needs_no_discovery_in_the_sync_factory_either() -> None:
    client = FakeClient()
    client.source("deployments", "apps").add(deployment("web"))
    factory = SyncSharedInformerFactory(client, namespace="default")  # type: ignore[arg-type]
    deployments = factory.informer_for(Deployment)
    assert factory_threads() == []  # nothing to fetch: the loop thread has not even started
    factory.start()
    assert factory.wait_for_cache_sync(timeout=WAIT) == {"deployments.apps": True}
    assert names(deployments.lister.list()) == ["web"]
    assert {path for _, path, _ in client.calls} == {"/apis/apps/v1/namespaces/default/deployments"}
    assert client.discovery_fetches == 0
    factory.shutdown()


@pytest.mark.asyncio
async def test_a_model_and_the_names_of_its_resource_share_one_informer() -> None:
    client = FakeClient()
    client.source("pods").add(pod("a"))
    async with SharedInformerFactory(client) as factory:  # type: ignore[arg-type]
        by_model = factory.informer_for(Pod)
        for name in ("pods", "po", "Pod", "v1/pods"):
            assert factory.informer_for(name) is by_model
        by_name = factory.informer_for("deploy")
        assert factory.informer_for(Deployment) is by_name
        assert factory.lister_for(Deployment) is by_name.lister
        assert set(factory.informers()) == {"pods", "deployments.apps"}
        factory.start()
        assert await factory.wait_for_cache_sync(timeout=WAIT) == {
            "pods": True,
            "deployments.apps": True,
        }
    streams = sorted((verb, path) for verb, path, _ in client.calls)
    assert streams == [("watch", "/api/v1/pods"), ("watch", "/apis/apps/v1/deployments")]


@pytest.mark.asyncio
async def test_a_models_scope_is_checked_again_once_discovery_is_loaded() -> None:
    client = FakeClient()
    client.resources.append(GADGETS)  # served cluster-scoped
    factory = SharedInformerFactory(client)  # type: ignore[arg-type]
    gadgets = factory.informer_for(Gadget)  # no discovery yet: taken at its word
    assert factory.informer_for(Gadget) is gadgets
    await factory.resolve("deployments")  # loads discovery
    with pytest.raises(ValueError, match=r"Gadget is registered as namespaced"):
        factory.informer_for(Gadget)
    await factory.shutdown()


@pytest.mark.asyncio
async def test_a_model_of_another_version_or_scope_than_the_informer_is_refused() -> None:
    client = FakeClient()
    client.resources.append(GADGETS)  # served cluster-scoped
    async with SharedInformerFactory(client) as factory:  # type: ignore[arg-type]
        factory.informer_for("deployments")
        with pytest.raises(
            ValueError,
            match=r"test_factory\.SlimDeployment is apps/v2/deployments \(namespaced\), but this "
            r"factory's informer of deployments\.apps watches apps/v1/deployments",
        ):
            factory.informer_for(SlimDeployment)
        with pytest.raises(
            ValueError,
            match=r"test_factory\.Gadget is registered as namespaced, but the server serves "
            r"example\.com/v1/gadgets cluster-scoped",
        ):
            factory.informer_for(Gadget)
        assert set(factory.informers()) == {"deployments.apps"}
    # Without discovery loaded, the registration is taken at its word; an informer made
    # first for the resource as it is served then disagrees with it.
    factory = SharedInformerFactory(FakeClient())  # type: ignore[arg-type]
    served = ResourceInfo("example.com", "v1", "gadgets", "Gadget", False)
    gadgets = factory.informer_for(served)
    with pytest.raises(ValueError, match=r"watches example\.com/v1/gadgets \(cluster-scoped\)"):
        factory.informer_for(Gadget)
    assert factory.informer_for(served) is gadgets
    assert set(factory.informers()) == {"gadgets.example.com"}
    await factory.shutdown()


def test_a_class_that_is_not_a_registered_model_is_named() -> None:
    class Widget(TypedDict):
        size: int

    factory = SyncSharedInformerFactory(FakeClient())  # type: ignore[arg-type]
    with pytest.raises(LookupError, match=r"test_factory\..*Widget is not a registered model"):
        factory.informer_for(Widget)
    with pytest.raises(LookupError, match="Widget is not a registered model"):
        factory.lister_for(Widget)
    assert factory.informers() == {}
    factory.shutdown()
