"""A Controller with a ReconcileGate: what the gate does not want is neither queued
nor reconciled, what it revokes is cancelled and forgotten, and every admitted
reconcile is counted in flight until it ends (coroutine and thread reconcilers)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

import pytest

from kubereflector import SharedIndexInformer
from kubereflector.client import ResourceInfo
from kubereflector.metrics import RECONCILE_TOTAL, Metrics
from kubereflector.runtime import (
    Controller,
    ControllerOptions,
    ReconcileGate,
    ReconcileRevokedError,
    Request,
)
from kubereflector.testing import FakeClock, FakeControllerSource, settle
from running_task import running as started

pytestmark = pytest.mark.asyncio

T = TypeVar("T")
CONFIGMAPS = ResourceInfo("", "v1", "configmaps", "ConfigMap", namespaced=True)
WAIT = 10.0


def cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}}


class Ticket:
    def __init__(self, gate: NameGate, request: Request) -> None:
        self.gate = gate
        self.request = request
        self.task: asyncio.Future[Any] | None = None

    async def _run(self, reconcile: Awaitable[T]) -> T:
        self.task = asyncio.ensure_future(reconcile)
        self.gate.tasks[self.request] = self.task
        await asyncio.wait({self.task})
        if self.task.cancelled():
            raise ReconcileRevokedError(f"{self.request} revoked")
        return self.task.result()

    def run(self, reconcile: Awaitable[T]) -> Awaitable[T]:
        return self._run(reconcile)

    def exit(self) -> None:
        self.gate.in_flight -= 1
        self.gate.exits.append(self.request)
        self.gate.exited.set()


class NameGate:
    """Lets through the requests whose name is in ``allowed``."""

    def __init__(self, allowed: set[str]) -> None:
        self.allowed = allowed
        self.in_flight = 0
        self.wanted_calls: list[Request] = []
        self.exits: list[Request] = []
        self.tasks: dict[Request, asyncio.Future[Any]] = {}
        self.exited = asyncio.Event()

    def wanted(self, request: Request) -> bool:
        self.wanted_calls.append(request)
        return request.name in self.allowed

    def enter(self, request: Request) -> Ticket | None:
        if request.name not in self.allowed:
            return None
        self.in_flight += 1
        return Ticket(self, request)

    def revoke(self, name: str) -> None:
        self.tasks[Request("ns", name)].cancel()


@contextlib.asynccontextmanager
async def informer_of(source: FakeControllerSource, clock: FakeClock) -> AsyncIterator[Any]:
    informer: SharedIndexInformer[Any] = SharedIndexInformer(source, clock=clock)
    task = asyncio.create_task(informer.run())
    try:
        yield informer
    finally:
        task.cancel()
        await asyncio.wait({task})


async def test_only_what_the_gate_wants_is_queued_and_reconciled() -> None:
    clock = FakeClock()
    source = FakeControllerSource()
    for name in ("a", "b", "c"):
        source.add(cm(name))
    gate = NameGate({"a", "c"})
    assert isinstance(gate, ReconcileGate)
    calls: list[Request] = []

    async def reconcile(request: Request) -> None:
        calls.append(request)

    async with informer_of(source, clock) as informer:
        controller = Controller(reconcile, for_=(informer, CONFIGMAPS), clock=clock, gate=gate)
        async with started(controller):
            await settle()
            assert sorted(r.name for r in calls) == ["a", "c"]
            assert {r.name for r in gate.wanted_calls} == {"a", "b", "c"}
            # added directly (not through the handlers): dropped when a worker takes it
            controller.queue.add(Request("ns", "b"))
            await settle()
            assert sorted(r.name for r in calls) == ["a", "c"]
            assert controller.queue.num_requeues(Request("ns", "b")) == 0
            assert gate.in_flight == 0
            assert sorted(r.name for r in gate.exits) == ["a", "c"]


async def test_a_revoked_reconcile_is_cancelled_forgotten_and_not_counted() -> None:
    clock = FakeClock()
    source = FakeControllerSource()
    source.add(cm("a"))
    gate = NameGate({"a"})
    started_a = asyncio.Event()
    cancelled: list[str] = []
    metrics = Metrics(process=False)

    async def reconcile(request: Request) -> None:
        started_a.set()
        try:
            await asyncio.Event().wait()  # until revoked
        except asyncio.CancelledError:
            cancelled.append(request.name)
            raise

    async with informer_of(source, clock) as informer:
        controller = Controller(
            reconcile,
            for_=(informer, CONFIGMAPS),
            clock=clock,
            gate=gate,
            metrics=metrics,
            name="cms",
        )
        async with started(controller):
            await asyncio.wait_for(started_a.wait(), WAIT)
            assert gate.in_flight == 1
            gate.revoke("a")
            await settle()
            assert cancelled == ["a"]
            assert gate.in_flight == 0
            assert controller.in_flight() == 0
            assert controller.queue.num_requeues(Request("ns", "a")) == 0
            assert len(controller.queue) == 0
            exposition = metrics.exposition().decode()
            assert f'{RECONCILE_TOTAL}{{controller="cms",result="error"}} 0.0' in exposition


async def test_plain_function_reconciles_are_admitted_and_counted_too() -> None:
    clock = FakeClock()
    source = FakeControllerSource()
    for name in ("a", "b"):
        source.add(cm(name))
    gate = NameGate({"b"})
    threads: list[str] = []

    def reconcile(request: Request) -> None:
        threads.append(f"{request.name} on {threading.current_thread().name}")

    async with informer_of(source, clock) as informer:
        controller = Controller(
            reconcile,
            for_=(informer, CONFIGMAPS),
            clock=clock,
            gate=gate,
            options=ControllerOptions(max_concurrent_reconciles=2),
        )
        async with started(controller):
            await asyncio.wait_for(gate.exited.wait(), WAIT)
            await settle()
            assert len(threads) == 1
            assert threads[0].startswith("b on reconcile-")
            assert [r.name for r in gate.exits] == ["b"]
            assert gate.in_flight == 0


async def test_a_gate_must_be_one() -> None:
    source = FakeControllerSource()
    informer: SharedIndexInformer[Any] = SharedIndexInformer(source)

    async def reconcile(request: Request) -> None:
        return None

    with pytest.raises(TypeError, match="gate must be a ReconcileGate, not str"):
        Controller(reconcile, for_=(informer, CONFIGMAPS), gate="all")  # type: ignore[arg-type]
