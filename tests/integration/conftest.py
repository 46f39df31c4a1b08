"""The integration suite's target: the bundled emulator, or a real cluster.

By default every test gets a fresh ``ApiServerEmulator`` (in-process, HTTP on
127.0.0.1). With ``KUBEREFLECTOR_TEST_KUBECONFIG=/path/to/kubeconfig`` the same
tests run against that cluster instead: each test works in a fresh namespace
that it deletes afterwards, and tests that need fault injection (which only the
emulator can do) are skipped with that reason.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from kubereflector import Cache
from kubereflector.client import Client, load_config
from kubereflector.testing import ApiServerEmulator

KUBECONFIG_ENV = "KUBEREFLECTOR_TEST_KUBECONFIG"


@dataclass
class Target:
    """Where a test runs: a client, its own namespace, and the emulator if any."""

    client: Client
    namespace: str
    emulator: ApiServerEmulator | None

    def faults(self) -> ApiServerEmulator:
        """The emulator, for fault injection; skips the test on a real cluster."""
        if self.emulator is None:
            pytest.skip("needs fault injection, which only the emulator offers")
        return self.emulator

    def pods_path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods"

    # Writes and reads of the server's state go through the emulator's Python
    # API when there is one (so they never consume an injected HTTP fault), and
    # through the REST client on a real cluster.

    async def create_pod(self, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]},
        }
        if self.emulator is not None:
            return self.emulator.create("pods", body, namespace=self.namespace)
        result: dict[str, Any] = await self.client.request("POST", self.pods_path(), json=body)
        return result

    async def delete_pod(self, name: str) -> None:
        if self.emulator is not None:
            self.emulator.delete("pods", name, namespace=self.namespace)
            return
        await self.client.request(
            "DELETE", f"{self.pods_path()}/{name}", json={"gracePeriodSeconds": 0}
        )

    async def label_pod(self, name: str, labels: dict[str, str]) -> dict[str, Any]:
        patch = {"metadata": {"labels": labels}}
        if self.emulator is not None:
            return self.emulator.patch("pods", name, patch, namespace=self.namespace)
        result: dict[str, Any] = await self.client.request(
            "PATCH",
            f"{self.pods_path()}/{name}",
            json=patch,
            content_type="application/merge-patch+json",
        )
        return result

    async def server_pods(self) -> dict[str, str]:
        """key -> resourceVersion of every pod in the namespace, as the server has them."""
        if self.emulator is not None:
            items = self.emulator.objects("pods", namespace=self.namespace)
        else:
            items = (await self.client.request("GET", self.pods_path()))["items"]
        return {
            f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["metadata"][
                "resourceVersion"
            ]
            for p in items
        }


class WatchedCache(Cache):
    """A Cache whose changes can be awaited (no polling, no sleeps)."""

    def __init__(self) -> None:
        super().__init__()
        self._changed = asyncio.Event()

    def _touch(self) -> None:
        self._changed.set()

    def add(self, obj: Any) -> None:
        super().add(obj)
        self._touch()

    def update(self, obj: Any) -> None:
        super().update(obj)
        self._touch()

    def delete(self, obj: Any) -> None:
        super().delete(obj)
        self._touch()

    def replace(self, items: list[Any], resource_version: str) -> None:
        super().replace(items, resource_version)
        self._touch()

    def update_resource_version(self, resource_version: str) -> None:
        super().update_resource_version(resource_version)
        self._touch()

    def versions(self) -> dict[str, str]:
        return {
            key: obj["metadata"]["resourceVersion"]
            for key in self.list_keys()
            if (obj := self.get_by_key(key)) is not None
        }

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        async def loop() -> None:
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(loop(), timeout)


@pytest_asyncio.fixture
async def target() -> AsyncIterator[Target]:
    kubeconfig = os.environ.get(KUBECONFIG_ENV)
    namespace = f"kr-test-{uuid.uuid4().hex[:8]}"
    if kubeconfig:
        async with Client(load_config(kubeconfig)) as client:
            await client.request(
                "POST", "/api/v1/namespaces", json={"metadata": {"name": namespace}}
            )
            try:
                yield Target(client, namespace, None)
            finally:
                await client.request("DELETE", f"/api/v1/namespaces/{namespace}")
        return
    async with ApiServerEmulator() as server, Client(load_config(server.kubeconfig_path)) as client:
        await client.request("POST", "/api/v1/namespaces", json={"metadata": {"name": namespace}})
        yield Target(client, namespace, server)
