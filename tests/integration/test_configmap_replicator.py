"""examples/configmap_replicator.py against the target (the emulator, or a real cluster).

In-process, the operator's whole behaviour: copies made, restored after edits and
deletes, resized, updated, the finalizer's cleanup, a bad label, the Events. As
subprocesses (real signals, real clocks): two replicas with leader election,
one reconciles; SIGTERM hands over at once; SIGKILL hands over within the lease
duration; metrics and probes scraped over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp
import pytest
from conftest import KUBECONFIG_ENV, Target
from prometheus_client.parser import text_string_to_metric_families

from kubereflector import ResourceEventHandlerFuncs, SharedIndexInformer, SharedInformerFactory
from programs import PROGRAM_TEST_TIMEOUT, start, step

pytestmark = pytest.mark.asyncio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "configmap_replicator.py"
WAIT = 30.0
"""Upper bound (seconds) on any wait; never reached when things work."""
REPLICAS = "replicator.kubereflector.io/replicas"
FINALIZER = "replicator.kubereflector.io/cleanup"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("configmap_replicator", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kubeconfig(target: Target) -> str:
    if target.emulator is not None:
        return target.emulator.kubeconfig_path
    return os.environ[KUBECONFIG_ENV]


def in_process_args(target: Target, *extra: str) -> list[str]:
    """The example's flags for a run inside the test (no servers: ports 0)."""
    where = ["--kubeconfig", kubeconfig(target), "--namespace", target.namespace]
    return [*where, "--metrics-port", "0", "--health-port", "0", *extra]


class Watched:
    """A resource of the namespace as the server has it, through an informer of the
    test's own; ``until`` waits (on its notifications, with a timeout) for a condition."""

    def __init__(self, target: Target, informer: SharedIndexInformer) -> None:
        self.target = target
        self.informer = informer
        self.changed = asyncio.Event()
        informer.add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=self._touch, on_update=self._touch, on_delete=self._touch
            )
        )

    async def _touch(self, *_: Any) -> None:
        self.changed.set()

    def get(self, name: str) -> dict[str, Any] | None:
        obj = self.informer.indexer.get_by_key(f"{self.target.namespace}/{name}")
        return obj  # type: ignore[no-any-return]

    def names(self) -> set[str]:
        return {o["metadata"]["name"] for o in self.informer.indexer.list()}

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        async def wait() -> None:
            while not condition():
                self.changed.clear()
                await self.changed.wait()

        try:
            await asyncio.wait_for(wait(), WAIT)
        except asyncio.TimeoutError:  # not TimeoutError before Python 3.11
            raise AssertionError(
                f"timed out waiting until {what}; have {sorted(self.names())}"
            ) from None

    def path(self, name: str = "") -> str:
        base = f"/api/v1/namespaces/{self.target.namespace}/configmaps"
        return f"{base}/{name}" if name else base

    async def create(self, name: str, data: dict[str, str], labels: dict[str, str]) -> None:
        body = {"metadata": {"name": name, "labels": labels}, "data": data}
        await self.target.client.create(self.path(), body)

    async def patch(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        patched: dict[str, Any] = await self.target.client.patch(self.path(name), patch)
        return patched

    def uid(self, name: str) -> str | None:
        return (self.get(name) or {}).get("metadata", {}).get("uid")

    async def delete(self, name: str) -> None:
        await self.target.client.delete(self.path(name))


@contextlib.asynccontextmanager
async def watching(target: Target) -> AsyncIterator[tuple[Watched, Watched]]:
    """The namespace's Watched and Leases."""
    async with SharedInformerFactory(target.client, namespace=target.namespace) as factory:
        cms = Watched(target, factory.informer_for("configmaps"))
        leases = Watched(target, factory.informer_for(await factory.resolve("leases")))
        factory.start()
        await factory.wait_for_cache_sync(timeout=WAIT)
        yield cms, leases


def copies_match(cms: Watched, parent: str, count: int) -> bool:
    owner = cms.get(parent)
    if owner is None:
        return False
    names = {n for n in cms.names() if n.startswith(f"{parent}-")}
    if names != {f"{parent}-{i}" for i in range(count)}:
        return False
    for name in names:
        copy = cms.get(name)
        assert copy is not None
        refs = copy["metadata"].get("ownerReferences") or []
        if copy.get("data") != owner.get("data") or not any(
            r.get("controller") and r.get("uid") == owner["metadata"]["uid"] for r in refs
        ):
            return False
    return True


async def events_about(target: Target, name: str) -> list[dict[str, Any]]:
    events = await target.client.get(f"/apis/events.k8s.io/v1/namespaces/{target.namespace}/events")
    return [e for e in events["items"] if e.get("regarding", {}).get("name") == name]


async def test_the_operator_keeps_the_copies(target: Target) -> None:
    example = load_example()
    args = example.parse_args(in_process_args(target, "--concurrency", "2"))
    await keep_the_copies(target, example.build(args))


async def keep_the_copies(target: Target, manager: Any) -> None:
    """The operator's whole scenario, run by ``manager`` (the example's, built with
    ``--concurrency 2`` and any identity: tests/integration/test_operator_rbac.py runs
    it under the operator's generated RBAC)."""
    async with watching(target) as (cms, _), manager:
        run = asyncio.create_task(manager.run(handle_signals=False))
        try:
            await cms.create("app", {"color": "blue"}, {REPLICAS: "3"})
            await cms.until(lambda: copies_match(cms, "app", 3), "3 copies of app")
            app = cms.get("app")
            assert app is not None
            assert FINALIZER in app["metadata"]["finalizers"]
            # A plain ConfigMap is left alone.
            await cms.create("plain", {"a": "b"}, {})
            # An edited copy is restored, a deleted one comes back.
            edited = (await cms.patch("app-1", {"data": {"color": "green"}}))["metadata"]
            uid = cms.uid("app-2")
            await cms.delete("app-2")
            await cms.until(
                lambda: (
                    copies_match(cms, "app", 3)
                    and (cms.get("app-1") or {})["metadata"]["resourceVersion"]
                    != edited["resourceVersion"]
                    and cms.uid("app-2") != uid
                ),
                "app-1 restored and app-2 back",
            )
            # The parent's data flows to the copies; fewer replicas, fewer copies.
            await cms.patch("app", {"data": {"color": "red"}})
            await cms.until(
                lambda: (
                    copies_match(cms, "app", 3)
                    and (cms.get("app-0") or {}).get("data") == {"color": "red"}
                ),
                "the copies turned red",
            )
            await cms.patch("app", {"metadata": {"labels": {REPLICAS: "1"}}})
            await cms.until(lambda: copies_match(cms, "app", 1), "1 copy of app")
            assert not any(n.startswith("plain-") for n in cms.names())
            # Deleting the parent runs the finalizer: the copies go, then the parent.
            await cms.delete("app")
            await cms.until(
                lambda: not any(n == "app" or n.startswith("app-") for n in cms.names()),
                "app and its copies gone",
            )
            replicated = [
                e for e in await events_about(target, "app") if e["reason"] == "Replicated"
            ]
            assert replicated
            assert replicated[0]["type"] == "Normal"
            assert replicated[0]["reportingController"] == "configmap-replicator"
        finally:
            manager.stop()
            await asyncio.wait_for(run, WAIT)


async def test_a_bad_label_is_a_terminal_error_with_a_warning(target: Target) -> None:
    example = load_example()
    args = example.parse_args(in_process_args(target))
    manager = example.build(args)
    async with watching(target) as (cms, _), manager:
        run = asyncio.create_task(manager.run(handle_signals=False))
        try:
            await cms.create("bad", {"a": "b"}, {REPLICAS: "many"})

            async def warned() -> bool:
                events = await events_about(target, "bad")
                return any(e["reason"] == "InvalidReplicas" for e in events)

            async def wait_warned() -> None:
                while not await warned():
                    cms.changed.clear()
                    with contextlib.suppress(asyncio.TimeoutError):  # 3.10: not TimeoutError
                        await asyncio.wait_for(cms.changed.wait(), 0.5)

            await asyncio.wait_for(wait_warned(), WAIT)
            await cms.patch("bad", {"metadata": {"labels": {REPLICAS: "1"}}})
            await cms.until(lambda: copies_match(cms, "bad", 1), "the fixed label applied")
        finally:
            manager.stop()
            await asyncio.wait_for(run, WAIT)


# -- two replicas, as processes ----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Replica:
    """The example as a process, with its metrics and health ports; its log lines
    are read as they come (``logged`` waits for one)."""

    def __init__(self, name: str, target: Target) -> None:
        self.name = name
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.args = [
            str(EXAMPLE),
            *("--kubeconfig", kubeconfig(target), "--namespace", target.namespace),
            *("--leader-elect", "--lease-name", "replicator-test"),
            *("--lease-namespace", target.namespace),
            *("--metrics-port", str(self.metrics_port), "--health-port", str(self.health_port)),
        ]
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: list[str] = []
        self._new_line = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        env = {**os.environ, "POD_NAME": self.name}
        self.proc = await start(
            sys.executable, *self.args, env=env, stdout=asyncio.subprocess.DEVNULL
        )
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc is not None
        assert self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self.lines.append(line.decode().rstrip())
            self._new_line.set()
        self._new_line.set()

    async def logged(self, text: str) -> None:
        async def wait() -> None:
            while not any(text in line for line in self.lines):
                assert self._reader is not None
                if self._reader.done():
                    raise AssertionError(f"{self.name} exited:\n" + "\n".join(self.lines))
                self._new_line.clear()
                await self._new_line.wait()

        assert self.proc is not None
        await step(self.proc, wait(), f"a log line with {text!r}")

    async def get(self, path: str, port: int) -> tuple[int, str]:
        url = f"http://127.0.0.1:{port}{path}"
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            return resp.status, await resp.text()

    async def metrics(self) -> dict[str, float]:
        status, body = await self.get("/metrics", self.metrics_port)
        assert status == 200
        return {
            s.name + repr(sorted(s.labels.items())): s.value
            for family in text_string_to_metric_families(body)
            for s in family.samples
        }

    async def wait(self) -> int:
        assert self.proc is not None
        code = await step(self.proc, self.proc.wait(), "its exit")
        assert self._reader is not None
        await self._reader
        return code

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.wait()


def reconciles(metrics: dict[str, float]) -> float:
    return sum(v for k, v in metrics.items() if k.startswith("controller_runtime_reconcile_total"))


async def counted(replica: Replica) -> None:
    """Return once ``replica``'s metrics count a reconcile (scraping again and again)."""
    while reconciles(await replica.metrics()) == 0:
        pass


def leading(metrics: dict[str, float]) -> float:
    return metrics["leader_election_master_status[('name', 'replicator-test')]"]


@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_two_replicas_one_reconciles_and_they_hand_over(target: Target) -> None:
    loop = asyncio.get_running_loop()
    a, b, c = (Replica(f"replica-{n}", target) for n in "abc")
    async with watching(target) as (cms, leases):

        def holder() -> str:
            lease = leases.get("replicator-test")
            return str((lease or {}).get("spec", {}).get("holderIdentity") or "")

        try:
            await a.start()
            await leases.until(lambda: holder().startswith("replica-a_"), "a leads")
            await b.start()
            await b.logged("/healthz")  # b serves its probes: it runs, as a standby
            await a.logged("/healthz")
            await cms.create("app", {"color": "blue"}, {REPLICAS: "2"})
            await cms.until(lambda: copies_match(cms, "app", 2), "2 copies of app")
            # Exactly one reconciles. a's reconcile counts once it returns, which may be
            # after its copies are seen (one reconcile adds the finalizer and makes them).
            await asyncio.wait_for(counted(a), WAIT)
            metrics_a, metrics_b = await a.metrics(), await b.metrics()
            assert reconciles(metrics_a) > 0
            assert reconciles(metrics_b) == 0
            assert leading(metrics_a) == 1
            assert leading(metrics_b) == 0
            assert await a.get("/readyz", a.health_port) == (200, "ok")
            assert await b.get("/healthz", b.health_port) == (200, "ok")

            # SIGTERM: a drains, releases the lease and exits 0; b takes over at once
            # (within its retry period, 2-4.4 s), not after a lease duration (15 s).
            assert a.proc is not None
            a.proc.send_signal(signal.SIGTERM)
            released = loop.time()
            assert await a.wait() == 0
            await leases.until(lambda: holder().startswith("replica-b_"), "b leads")
            assert loop.time() - released < 10
            uid = cms.uid("app-0")
            await cms.delete("app-0")
            await cms.until(
                lambda: copies_match(cms, "app", 2) and cms.uid("app-0") != uid,
                "b restored app-0",
            )

            # SIGKILL: c (a new standby) takes over once b's lease has expired.
            await c.start()
            await c.logged("/healthz")
            # Asked only now: b's reconcile counts once it returns, which may be
            # after the copy it restored is seen; c's start took far longer.
            assert reconciles(await b.metrics()) > 0
            await b.kill()
            killed = loop.time()
            await leases.until(lambda: holder().startswith("replica-c_"), "c leads")
            assert loop.time() - killed < 15 + 4.4 + 5
            await cms.patch("app", {"data": {"color": "red"}})
            await cms.until(
                lambda: (cms.get("app-1") or {}).get("data") == {"color": "red"}, "c updated app-1"
            )
        finally:
            for replica in (a, b, c):
                await replica.kill()
