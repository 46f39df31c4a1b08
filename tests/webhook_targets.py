"""Helpers of the webhook tests that run against the target (the emulator, or a real
kube-apiserver): a Foo custom resource of its own group per test (CRDs and webhook
configurations are cluster-wide, so nothing a test makes can touch another's), raw HTTP
for what the client does not show (Warning headers), and waits for what a real server
does asynchronously (a CRD served, a configuration in effect).

A real kube-apiserver reads CRDs and webhook configurations through informers: each wait
retries a request until the server behaves as expected, bounded by ``WAIT`` seconds of
wall time (against the emulator the first try succeeds)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import aiohttp
from conftest import KUBECONFIG_ENV, Target

from kubereflector.client import ClientConfig, load_config
from kubereflector.errors import ApiError, NotFoundError
from kubereflector.models import ApiResource, register
from kubereflector.runtime import Manager

WAIT = 20.0
"""Upper bound (seconds) on any wait; never reached when things work."""

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"


def config_of(target: Target) -> ClientConfig:
    if target.emulator is not None:
        return load_config(target.emulator.kubeconfig_path)
    return load_config(os.environ[KUBECONFIG_ENV])


async def raw(
    target: Target,
    method: str,
    path: str,
    body: Any = None,
    params: Mapping[str, str] | None = None,
) -> tuple[int, list[str], Any]:
    """A request without the client: status, ``Warning`` headers, decoded body."""
    config = config_of(target)
    auth = await config.auth.authorize()
    context: ssl.SSLContext | bool = True
    if config.ca_data:
        context = ssl.create_default_context(cadata=config.ca_data.decode())
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method,
            config.server + path,
            json=body,
            params=params,
            headers=dict(auth.headers),
            ssl=context if config.server.startswith("https") else False,
        ) as response,
    ):
        return response.status, response.headers.getall("Warning", []), await response.json()


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Retry ``check`` (a request to the server) until it returns True: a real server
    applies CRDs and webhook configurations a moment after they are written, and nothing
    tells when; each try is a round trip, nothing sleeps. Fails after ``WAIT`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"still not {what} after {WAIT} s")
        await asyncio.sleep(0)  # lets the loop run (a check in this process may not await)


class FooSpec(TypedDict, total=False):
    deploymentName: str
    replicas: int


class FooAlphaSpec(TypedDict, total=False):
    deployment: str
    replicas: int


@dataclass
class Foos:
    """A Foo kind (sample-controller's) in a group of its own: v1 (``spec.deploymentName``,
    ``spec.replicas``), and v1alpha1 (``spec.deployment``, ``spec.replicas``)."""

    group: str
    v1: type[Any]
    v1alpha1: type[Any]
    target: Target

    @classmethod
    def make(cls, target: Target) -> Foos:
        group = f"t{uuid.uuid4().hex[:8]}.webhooks.kubereflector.example.com"
        fields = {"apiVersion": str, "kind": str, "metadata": dict, "spec": FooSpec}
        alpha = {**fields, "spec": FooAlphaSpec}
        v1 = TypedDict("Foo", fields, total=False)  # type: ignore[misc]
        v1alpha1 = TypedDict("FooV1alpha1", alpha, total=False)  # type: ignore[misc]
        register(v1, ApiResource(group, "v1", "Foo", "foos", True))
        register(v1alpha1, ApiResource(group, "v1alpha1", "Foo", "foos", True))
        return cls(group, v1, v1alpha1, target)

    @property
    def crd_name(self) -> str:
        return f"foos.{self.group}"

    def crd(self, *, alpha: bool = False, status: bool = False) -> dict[str, Any]:
        def version(name: str, spec: dict[str, Any], storage: bool) -> dict[str, Any]:
            entry: dict[str, Any] = {
                "name": name,
                "served": True,
                "storage": storage,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "properties": spec},
                            "status": {
                                "type": "object",
                                "properties": {"availableReplicas": {"type": "integer"}},
                            },
                        },
                    }
                },
            }
            if status:
                entry["subresources"] = {"status": {}}
            return entry

        versions = [
            version(
                "v1",
                {"deploymentName": {"type": "string"}, "replicas": {"type": "integer"}},
                True,
            )
        ]
        if alpha:
            versions.insert(
                0,
                version(
                    "v1alpha1",
                    {"deployment": {"type": "string"}, "replicas": {"type": "integer"}},
                    False,
                ),
            )
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": self.crd_name},
            "spec": {
                "group": self.group,
                "scope": "Namespaced",
                "names": {
                    "plural": "foos",
                    "singular": "foo",
                    "kind": "Foo",
                    "listKind": "FooList",
                },
                "versions": versions,
            },
        }

    def path(self, version: str = "v1", name: str | None = None) -> str:
        base = f"/apis/{self.group}/{version}/namespaces/{self.target.namespace}/foos"
        return f"{base}/{name}" if name else base

    def foo(self, name: str, version: str = "v1", **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": f"{self.group}/{version}",
            "kind": "Foo",
            "metadata": {"name": name},
            "spec": spec,
        }

    @contextlib.asynccontextmanager
    async def served(self, crd: dict[str, Any]) -> AsyncIterator[None]:
        """The CRD created and served (every version), deleted on leaving."""
        client = self.target.client
        await client.create(CRDS, crd)
        try:
            for version in [v["name"] for v in crd["spec"]["versions"] if v["served"]]:

                async def listed(version: str = version) -> bool:
                    try:
                        await client.get(self.path(version))
                    except NotFoundError:
                        return False
                    return True

                await eventually(listed, f"serving {self.crd_name} {version}")
            yield
        finally:
            with contextlib.suppress(NotFoundError):
                await client.delete(f"{CRDS}/{self.crd_name}")


@contextlib.asynccontextmanager
async def configured(
    target: Target, configurations: Sequence[Mapping[str, Any]]
) -> AsyncIterator[None]:
    """The webhook configurations created, deleted on leaving."""
    made = []
    try:
        for configuration in configurations:
            plural = str(configuration["kind"]).lower() + "s"
            await target.client.create(f"{ADMISSION}/{plural}", configuration)
            made.append(f"{ADMISSION}/{plural}/{configuration['metadata']['name']}")
        yield
    finally:
        for path in made:
            with contextlib.suppress(NotFoundError):
                await target.client.delete(path)


async def delete_configurations(target: Target, name: str) -> None:
    for plural in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
        with contextlib.suppress(NotFoundError):
            await target.client.delete(f"{ADMISSION}/{plural}/{name}")


@contextlib.asynccontextmanager
async def running(manager: Manager) -> AsyncIterator[None]:
    """``manager`` running in a task until the block ends (then stopped and awaited)."""
    task = asyncio.create_task(manager.run(handle_signals=False))
    try:
        server = manager.webhook_server
        assert server is not None
        serving = asyncio.create_task(server.wait_serving())
        await asyncio.wait({task, serving}, timeout=WAIT, return_when=asyncio.FIRST_COMPLETED)
        serving.cancel()
        if task.done():
            task.result()  # its failure, if it failed
        assert server.ready()
        yield
    finally:
        manager.stop()
        await asyncio.wait_for(task, WAIT)


async def refused(make: Awaitable[Any]) -> ApiError:
    """The error ``make`` raises (it must raise an ApiError)."""
    try:
        await make
    except ApiError as exc:
        return exc
    raise AssertionError("the request was not refused")
