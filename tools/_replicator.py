"""What tools/soak.py and tools/chaos.py share about examples/configmap_replicator.py
(private to tools/): loading the example, churning its parents and copies, and
telling whether it has converged.

A parent is a ConfigMap labelled ``replicator.kubereflector.io/replicas=N``; the
operator keeps N copies ``<parent>-<i>`` with the parent's data, and deletes them
(its finalizer) when the parent goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp

from kubereflector.client import Client
from kubereflector.errors import ApiError, NotFoundError

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "configmap_replicator.py"
REPLICAS_LABEL = "replicator.kubereflector.io/replicas"
PARENT_LABEL = "replicator.kubereflector.io/parent"
FINALIZER = "replicator.kubereflector.io/cleanup"

REFUSED = (ApiError, OSError, aiohttp.ClientError, asyncio.TimeoutError)
"""What a write may fail with while the server misbehaves or is down."""


def load_example() -> ModuleType:
    """examples/configmap_replicator.py as a module (its ``build`` and ``parse_args``)."""
    spec = importlib.util.spec_from_file_location("configmap_replicator", EXAMPLE)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {EXAMPLE}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Churn:
    """Steady writes (``rate`` a second) to ``parents`` parent ConfigMaps and their
    copies: parents created with 0 to 3 copies, their data edited, their number of
    copies changed, deleted; copies edited or deleted behind the operator's back.
    A write the server refuses or cannot take is counted, not raised."""

    def __init__(
        self, client: Client, namespace: str, parents: int, rate: float, seed: int = 26
    ) -> None:
        self.api = client.resource("configmaps", namespace=namespace)
        self.names = [f"parent-{i}" for i in range(parents)]
        self.rate = rate
        self.rng = random.Random(seed)
        self.writes = 0
        self.refused = 0

    async def run(self) -> None:
        """Write until cancelled."""
        while True:
            started = time.monotonic()
            try:
                await self.step()
            except REFUSED:  # a conflict with the operator, a race with a finalizer, a fault
                self.refused += 1
            self.writes += 1
            await asyncio.sleep(max(0.0, 1 / self.rate - (time.monotonic() - started)))

    async def step(self) -> None:
        """One write."""
        rng, api = self.rng, self.api
        name = rng.choice(self.names)
        try:
            parent = await api.get(name)
        except NotFoundError:
            parent = None
        if parent is None or parent["metadata"].get("deletionTimestamp"):
            if parent is None:
                labels = {REPLICAS_LABEL: str(rng.randint(0, 3))}
                body = {"metadata": {"name": name, "labels": labels}, "data": {"v": "0"}}
                await api.create(body)
            return
        roll = rng.random()
        copies = int(parent["metadata"].get("labels", {}).get(REPLICAS_LABEL, "0") or 0)
        if roll < 0.40:
            await api.patch(name, {"data": {"v": str(rng.randrange(10**6))}})
        elif roll < 0.65:
            labels = {REPLICAS_LABEL: str(rng.randint(0, 3))}
            await api.patch(name, {"metadata": {"labels": labels}})
        elif roll < 0.80:
            await api.delete(name)
        elif copies:
            copy = f"{name}-{rng.randrange(copies)}"
            with contextlib.suppress(NotFoundError):
                if roll < 0.90:
                    await api.patch(copy, {"data": {"v": "edited behind its back"}})
                else:
                    await api.delete(copy)


def unconverged(objects: Sequence[Mapping[str, Any]]) -> list[str]:
    """What is not as the operator should leave it, in the ConfigMaps ``objects`` of
    one namespace (as the server lists them): a parent without its copies or its
    finalizer, a copy missing, extra or with other data, a deleted parent still
    held by its finalizer. Empty when the operator has converged."""
    by_name = {o["metadata"]["name"]: o for o in objects}
    wanted: dict[str, dict[str, str]] = {}
    problems = []
    for name, obj in by_name.items():
        meta = obj["metadata"]
        value = meta.get("labels", {}).get(REPLICAS_LABEL)
        if value is None:
            continue
        if meta.get("deletionTimestamp"):
            problems.append(f"{name} is deleted but still held by its finalizer")
            continue
        if FINALIZER not in meta.get("finalizers", ()):
            problems.append(f"{name} has no finalizer")
        for i in range(int(value)):
            wanted[f"{name}-{i}"] = dict(obj.get("data") or {})
    for name, obj in by_name.items():
        parent = obj["metadata"].get("labels", {}).get(PARENT_LABEL)
        if parent is None:
            continue
        if name not in wanted:
            problems.append(f"{name} is a copy nobody wants")
        elif dict(obj.get("data") or {}) != wanted[name]:
            problems.append(f"{name} does not hold its parent's data")
    problems += [f"{name} is missing" for name in wanted if name not in by_name]
    return problems
