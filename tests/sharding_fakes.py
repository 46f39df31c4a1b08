"""Leases in memory for sharded replicas, with faults per replica; a recorder of
reconciles that proves no two replicas ever reconcile one object at once.

``LeaseServer`` keeps Leases with kube-apiserver's compare-and-swap (a
``resourceVersion`` per write; a stale write gets 409 Conflict, a second create
409 AlreadyExists). Each replica talks to it through its own ``Link``, which a
test pauses (calls hang until resumed: renewals that stall), cuts (calls fail:
a partition from the API server) or slows.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kubereflector.errors import AlreadyExistsError, ConflictError


class Partitioned(ConnectionError):
    """A call from a replica cut off from the API server."""


class LeaseServer:
    """The Leases of one namespace, in memory (see the module documentation)."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self._rv = itertools.count(1)
        self.writes = 0

    def link(self) -> Link:
        return Link(self)

    def holder(self, name: str) -> str | None:
        lease = self.leases.get(name)
        return None if lease is None else lease["spec"].get("holderIdentity", "")

    def _list(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(lease) for lease in self.leases.values()]

    def _create(self, lease: dict[str, Any]) -> dict[str, Any]:
        name = lease["metadata"]["name"]
        if name in self.leases:
            raise AlreadyExistsError(409, "AlreadyExists", f'leases "{name}" already exists')
        stored = copy.deepcopy(lease)
        stored["metadata"]["resourceVersion"] = str(next(self._rv))
        self.leases[name] = stored
        self.writes += 1
        return copy.deepcopy(stored)

    def _update(self, lease: dict[str, Any]) -> dict[str, Any]:
        name = lease["metadata"]["name"]
        current = self.leases.get(name)
        if current is None:
            raise ConflictError(409, "Conflict", f'leases "{name}" not found')
        if lease["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise ConflictError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on leases "{name}": the object has been modified',
            )
        stored = copy.deepcopy(lease)
        stored["metadata"]["resourceVersion"] = str(next(self._rv))
        self.leases[name] = stored
        self.writes += 1
        return copy.deepcopy(stored)


@dataclass
class Link:
    """One replica's connection to a LeaseServer (a LeaseStore)."""

    server: LeaseServer
    cut: bool = False
    _resume: asyncio.Event | None = None
    calls: int = 0
    blocked: list[str] = field(default_factory=list)

    def pause(self) -> None:
        """Every call from now hangs until :meth:`resume` (then goes through)."""
        if self._resume is None:
            self._resume = asyncio.Event()

    def resume(self) -> None:
        if self._resume is not None:
            self._resume.set()
            self._resume = None

    @contextmanager
    def partitioned(self) -> Iterator[None]:
        self.cut = True
        try:
            yield
        finally:
            self.cut = False

    async def _gate(self, what: str) -> None:
        self.calls += 1
        if self._resume is not None:
            self.blocked.append(what)
            await self._resume.wait()
        if self.cut:
            raise Partitioned(f"{what}: connection refused")

    async def list(self) -> list[dict[str, Any]]:
        await self._gate("list")
        return self.server._list()

    async def create(self, lease: dict[str, Any]) -> dict[str, Any]:
        await self._gate("create")
        return self.server._create(lease)

    async def update(self, lease: dict[str, Any]) -> dict[str, Any]:
        await self._gate("update")
        return self.server._update(lease)


class OverlapError(AssertionError):
    """Two replicas reconciled one object at once."""


@dataclass
class ReconcileLog:
    """Every reconcile's start and end per object and replica; raises at the moment
    a second replica starts on an object another one is reconciling."""

    running: dict[str, str] = field(default_factory=dict)
    history: list[tuple[str, str, str]] = field(default_factory=list)  # (event, key, replica)
    overlaps: list[str] = field(default_factory=list)

    def start(self, key: str, replica: str) -> None:
        other = self.running.get(key)
        if other is not None and other != replica:
            message = f"{key}: {replica} started while {other} was reconciling it"
            self.overlaps.append(message)
            raise OverlapError(message)
        self.running[key] = replica
        self.history.append(("start", key, replica))

    def end(self, key: str, replica: str) -> None:
        if self.running.get(key) == replica:
            del self.running[key]
        self.history.append(("end", key, replica))

    def reconciled_by(self, key: str) -> list[str]:
        return [r for event, k, r in self.history if event == "start" and k == key]
