"""examples/foo_controller.py: its conversions round-trip; the program installs its CRD
and webhooks and runs its controller on the emulator; and, on the target (the emulator,
or a real kube-apiserver with RBAC on), its generated manifests apply and the operator
runs sample-controller's scenario with a token of its ServiceAccount, bound to exactly
that RBAC, without one 403, led or sharded: Deployments appear owned by their Foos,
status follows, a Deployment it does not own gets a warning Event, a Foo is defaulted,
a bad one refused, and a v1alpha1 Foo read as v1.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import pytest_asyncio
from conftest import Target
from examples_run import EXAMPLES, WAIT, program, read_line
from hypothesis import given, settings
from hypothesis import strategies as st
from test_operator_rbac import admin_kubeconfig, apply, requests_answered, with_token
from test_rbac import SETTLE, review, settled

from kubereflector import ListOptions
from kubereflector.client import Client, load_config
from kubereflector.errors import ApiError, InvalidError, NotFoundError
from kubereflector.models import CustomResourceDefinition
from kubereflector.runtime import Manager
from kubereflector.runtime.manifests import CA_INJECTION, manifests
from kubereflector.runtime.webhooks import Conversion
from kubereflector.runtime.webhooks.configuration import conversion_stanza
from kubereflector.testing import ApiServerEmulator
from programs import finish

PROGRAM_GROUP = "samplecontroller.kubereflector.io"
"""The group the program serves (its own process)."""
GROUP = "e2e.samplecontroller.kubereflector.io"
"""The example's group in this process: its CRD is cluster-wide, and a real server's
``foos.samplecontroller.kubereflector.io`` is other tests' (and other branches')."""


def load_example() -> ModuleType:
    """The example as a module of this process, its Foo in :data:`GROUP` (loaded once:
    a custom resource is declared once)."""
    name = "foo_controller_under_test"
    if name in sys.modules:
        return sys.modules[name]
    source = (EXAMPLES / "foo_controller.py").read_text(encoding="utf-8")
    declared = f'GROUP: Final = "{PROGRAM_GROUP}"'
    assert declared in source
    module = ModuleType(name)
    module.__file__ = str(EXAMPLES / "foo_controller.py")
    sys.modules[name] = module
    code = compile(source.replace(declared, f'GROUP: Final = "{GROUP}"'), module.__file__, "exec")
    exec(code, module.__dict__)
    return module


example = load_example()

# -- the conversions --------------------------------------------------------------------------

names = st.from_regex(r"[a-z]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)
metadata = st.fixed_dictionaries(
    {"name": names, "namespace": names},
    optional={
        # (non-empty: kube drops an empty map, and so may a conversion)
        "annotations": st.dictionaries(
            st.sampled_from(["a", "b/c"]), st.text(max_size=3), min_size=1
        ),
        "labels": st.dictionaries(st.sampled_from(["x", "y"]), names, max_size=2),
    },
)
shared = {"replicas": st.integers(0, 5)}


def conversion() -> Conversion[Any]:
    converting: Conversion[Any] = Conversion(example.Foo)
    converting.spoke(
        example.FooV1alpha1, to_hub=example.v1alpha1_to_v1, from_hub=example.v1_to_v1alpha1
    )
    return converting


@settings(max_examples=200, deadline=None)
@given(meta=metadata, name=names, spec=st.fixed_dictionaries({}, optional=shared))
def test_v1alpha1_to_the_hub_and_back_is_the_same_foo(meta: Any, name: str, spec: Any) -> None:
    foo = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "Foo",
        "metadata": meta,
        "spec": {"deploymentName": name, **spec},
    }
    hub = conversion().convert(foo, f"{GROUP}/v1")
    assert conversion().convert(hub, f"{GROUP}/v1alpha1") == foo


@settings(max_examples=200, deadline=None)
@given(
    meta=metadata,
    name=names,
    spec=st.fixed_dictionaries({}, optional={**shared, "paused": st.just(True)}),
)
def test_v1_to_v1alpha1_and_back_keeps_paused(meta: Any, name: str, spec: Any) -> None:
    foo = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Foo",
        "metadata": meta,
        "spec": {"deploymentName": name, **spec},
    }
    spoke = conversion().convert(foo, f"{GROUP}/v1alpha1")
    assert "paused" not in spoke["spec"]
    assert conversion().convert(spoke, f"{GROUP}/v1") == foo


# -- the program --------------------------------------------------------------------------------


@pytest_asyncio.fixture
async def server() -> AsyncIterator[ApiServerEmulator]:
    async with ApiServerEmulator() as emulator:
        yield emulator


def foo(name: str, version: str = "v1", group: str = GROUP, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/{version}",
        "kind": "Foo",
        "metadata": {"name": name},
        "spec": spec,
    }


def foos_path(namespace: str, version: str = "v1", group: str = GROUP) -> str:
    return f"/apis/{group}/{version}/namespaces/{namespace}/foos"


@pytest.mark.asyncio
async def test_the_program_installs_its_crd_and_webhooks_and_reconciles(
    server: ApiServerEmulator,
) -> None:
    args = ["--kubeconfig", server.kubeconfig_path, "--webhook-port", "0", "--install"]
    args += ["--metrics-port", "0", "--health-port", "0"]
    async with program(str(EXAMPLES / "foo_controller.py"), *args) as proc:
        line = await read_line(proc)
        assert line.startswith("serving Foo webhooks at https://127.0.0.1:")
        async with Client(load_config(server.kubeconfig_path)) as client:
            path = foos_path("default", group=PROGRAM_GROUP)
            made = await client.create(path, foo("a", group=PROGRAM_GROUP, deploymentName="web"))
            assert made["spec"] == {"deploymentName": "web", "replicas": 1}
            with pytest.raises(InvalidError, match="is not a DNS-1123 label"):
                await client.create(path, foo("b", group=PROGRAM_GROUP, deploymentName="Web_1"))
            deployment = await until(
                client,
                "/apis/apps/v1/namespaces/default/deployments",
                lambda d: d["metadata"]["name"] == "web",
            )
            (owner,) = deployment["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["uid"], owner["controller"]) == (
                "Foo",
                made["metadata"]["uid"],
                True,
            )
        proc.send_signal(signal.SIGINT)
        _, err = await finish(proc)  # a hang fails with the program's stacks
        assert proc.returncode == 0, err
        assert "Traceback" not in err


# -- the scenario, under exactly the generated RBAC ------------------------------------------------


async def until(client: Client, path: str, holds: Callable[[dict[str, Any]], bool]) -> Any:
    """The first object of the collection ``path`` for which ``holds``: listed, then
    watched (no polling); ``AssertionError`` after :data:`WAIT` seconds."""

    async def find() -> Any:
        listed = await client.list(path, ListOptions())
        for item in listed.items:
            if holds(item):
                return item
        options = ListOptions(resource_version=listed.resource_version)
        async with client.watch(path, options) as events:
            async for event in events:
                if event.type in ("ADDED", "MODIFIED") and holds(event.object):
                    return event.object
        raise AssertionError(f"the watch of {path} ended")

    try:
        return await asyncio.wait_for(find(), WAIT)
    except asyncio.TimeoutError:  # not TimeoutError before Python 3.11
        raise AssertionError(f"nothing in {path} came to hold") from None


async def in_effect(target: Target, check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Wait until ``check()``: at once on the emulator; on a real server, once its
    admission and CRD handlers have the configurations just written (polled: nothing
    else tells when they have)."""
    if target.emulator is not None:
        assert await check(), what
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE
    while not await check():
        assert loop.time() < deadline, f"the server never took {what}"
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def webhooks_installed(target: Target, manager: Manager, name: str) -> AsyncIterator[None]:
    """The manager's webhook configurations (``name``; for the test's namespace only) and
    its CRD's conversion, at its webhook server's URL, written by the admin; then taken
    away (the CRD's conversion back to ``None``)."""
    server = manager.webhook_server
    assert server is not None
    await server.wait_serving()
    crd_path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.{GROUP}"
    written: list[str] = []
    try:
        for configuration in server.configurations(name):
            for hook in configuration["webhooks"]:
                hook["namespaceSelector"] = {
                    "matchLabels": {"kubernetes.io/metadata.name": target.namespace}
                }
            plural = configuration["kind"].lower() + "s"
            path = f"/apis/admissionregistration.k8s.io/v1/{plural}"
            await target.client.create(path, configuration)
            written.append(f"{path}/{name}")
        (converting,) = manager.webhooks.conversions
        stanza = conversion_stanza(converting, server.endpoint, server.ca_bundle)
        await target.client.patch(crd_path, {"spec": {"conversion": stanza}})
        yield
    finally:
        for path in written:
            with contextlib.suppress(ApiError):
                await target.client.delete(path)
        await no_conversion(target, crd_path)


def deployment(name: str, namespace: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }


WEBHOOKS_DEPLOYED = ["--webhook-port", "9443", "--cert-dir", example.CERT_DIR]
PORTS_ANY = ["--metrics-port", "0", "--health-port", "0", "--webhook-port", "0"]


@pytest.mark.asyncio
@pytest.mark.timeout(180)
@pytest.mark.parametrize("scale", ["leader-election", "sharded"])
async def test_the_operator_runs_its_scenario_under_exactly_its_generated_rbac(
    target: Target, tmp_path: Path, scale: str
) -> None:
    ns = target.namespace
    name = f"foo-{ns}"  # its webhook configurations are cluster-wide: one per test
    flags = ["--namespace", ns, "--lease-name", "foo-controller", "--lease-namespace", ns]
    flags += ["--shards", "4"] if scale == "sharded" else []
    # As deployed: the webhooks on 9443, their certificate mounted from a Secret.
    deployed = example.parse_args(
        ["--kubeconfig", admin_kubeconfig(target), *flags, *WEBHOOKS_DEPLOYED]
    )
    objects = manifests(
        example.build(deployed).describe(), name=name, namespace=ns, image="foo:1.0", replicas=2
    )
    kinds = [o["kind"] for o in objects]
    assert kinds == [
        "CustomResourceDefinition",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Service",
        "Deployment",
        "PodDisruptionBudget",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    crd = objects[0]
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["name"] == (
        f"{name}-webhook"
    )
    assert crd["metadata"]["annotations"][CA_INJECTION] == f"{ns}/{name}-webhook"
    # Applied as generated, but what calls the webhooks through their Service (no pod
    # serves it here): the CRD converts through the webhook server of this process, below.
    await example_crd(target, {**crd, "spec": {**crd["spec"], "conversion": {"strategy": "None"}}})
    await apply(target, [o for o in objects[1:] if "WebhookConfiguration" not in o["kind"]])
    user = f"system:serviceaccount:{ns}:{name}"
    foos = {"verb": "watch", "resource": "foos", "group": GROUP, "namespace": ns}
    await settled(target, {"user": user, "resourceAttributes": foos})
    for attributes in (  # least privilege: what the operator does not do, it may not do
        {"verb": "list", "resource": "secrets", "namespace": ns},
        {"verb": "delete", "resource": "foos", "group": GROUP, "namespace": ns},
        {"verb": "update", "resource": "foos", "group": GROUP, "namespace": ns},
        {"verb": "update", "resource": "foos/status", "group": GROUP, "namespace": ns},
        {"verb": "list", "resource": "foos", "group": GROUP, "namespace": "default"},
    ):
        status = await review(target, {"user": user, "resourceAttributes": attributes})
        assert status == {"allowed": False}, attributes

    token_path = f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token"
    token = (await target.client.create(token_path, {"spec": {}}))["status"]["token"]
    kubeconfig = with_token(target, token, tmp_path / "operator.kubeconfig")
    args = example.parse_args(["--kubeconfig", kubeconfig, *flags, *PORTS_ANY])
    manager = example.build(args)
    async with manager:
        running = asyncio.create_task(manager.run(handle_signals=False))
        try:
            async with webhooks_installed(target, manager, name):
                await scenario(target, manager)
        finally:
            manager.stop()
            await asyncio.wait_for(running, WAIT)
    assert requests_answered(manager, "200") > 0  # (the manager's requests are counted)
    assert requests_answered(manager, "403") == 0
    if target.emulator is not None:
        assert target.emulator.denials() == []


async def no_conversion(target: Target, crd_path: str) -> None:
    """The CRD at ``crd_path`` converts with strategy ``None`` again (if it exists)."""
    none = {"spec": {"conversion": {"strategy": "None", "webhook": None}}}
    with contextlib.suppress(NotFoundError):
        await target.client.patch(crd_path, none)


async def example_crd(target: Target, crd: dict[str, Any]) -> None:
    """Apply ``crd`` (a real server may have it from an earlier run) and wait until it is
    established."""
    crds = target.client.resource(CustomResourceDefinition)
    path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
    await no_conversion(target, path)  # (as an earlier run that stopped short left it)
    await crds.apply(crd, field_manager="kubereflector-tests", force=True)
    await until(
        target.client,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        lambda c: (
            c["metadata"]["name"] == crd["metadata"]["name"]
            and any(
                x["type"] == "Established" and x["status"] == "True"
                for x in (c.get("status") or {}).get("conditions", [])
            )
        ),
    )
    target.client.discovery.invalidate()


async def scenario(target: Target, manager: Manager) -> None:
    """sample-controller's scenario, the admin's writes against the operator's work."""
    ns, client = target.namespace, target.client
    foos, deployments = foos_path(ns), f"/apis/apps/v1/namespaces/{ns}/deployments"

    async def defaulted() -> bool:
        probe = foo("probe", deploymentName="probe")
        made = await client.create(foos, probe, params={"dryRun": "All"})
        return bool(made["spec"].get("replicas") == 1)

    await in_effect(target, defaulted, "the defaulter")

    # A Foo: defaulted, then its Deployment, controlled by it.
    made = await client.create(foos, foo("a", deploymentName="a-nginx"))
    assert made["spec"] == {"deploymentName": "a-nginx", "replicas": 1}
    owned = await until(client, deployments, lambda d: d["metadata"]["name"] == "a-nginx")
    (owner,) = owned["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Foo",
        "a",
        made["metadata"]["uid"],
        True,
    )
    assert owned["spec"]["replicas"] == 1
    # Its status follows the Deployment's (no deployment controller here: the admin's).
    ready = {"replicas": 1, "availableReplicas": 1, "readyReplicas": 1}
    await client.patch(f"{deployments}/a-nginx/status", {"status": ready})
    status = (
        await until(
            client,
            foos,
            lambda f: (
                f["metadata"]["name"] == "a"
                and (f.get("status") or {}).get("availableReplicas") == 1
            ),
        )
    )["status"]
    (condition,) = status["conditions"]
    assert (condition["type"], condition["status"]) == ("Ready", "True")
    # Scaled with its Foo.
    await client.patch(f"{foos}/a", {"spec": {"replicas": 3}})
    await until(
        client,
        deployments,
        lambda d: d["metadata"]["name"] == "a-nginx" and d["spec"]["replicas"] == 3,
    )

    # A Deployment of that name that is not the Foo's: left alone, a warning Event.
    await client.create(deployments, deployment("taken", ns))
    refused = await client.create(foos, foo("b", deploymentName="taken"))
    event = await until(
        client,
        f"/apis/events.k8s.io/v1/namespaces/{ns}/events",
        lambda e: (
            e["regarding"].get("uid") == refused["metadata"]["uid"]
            and e["reason"] == "ErrResourceExists"
        ),
    )
    assert event["type"] == "Warning"
    assert "'taken' already exists and is not managed by Foo" in event["note"]
    taken = await client.get(f"{deployments}/taken")
    assert "ownerReferences" not in taken["metadata"]

    # Validation: a deploymentName that is no DNS-1123 label, or changed, is refused.
    with pytest.raises(InvalidError) as invalid:
        await client.create(foos, foo("c", deploymentName="Not_A_Label"))
    assert invalid.value.message == (
        f'admission webhook "vfoo.{GROUP}" denied the request: '
        "spec.deploymentName 'Not_A_Label' is not a DNS-1123 label"
    )
    with pytest.raises(InvalidError, match=r"spec\.deploymentName cannot change"):
        await client.patch(f"{foos}/a", {"spec": {"deploymentName": "elsewhere"}})

    # v1alpha1 read as v1: v1's paused, kept in an annotation by v1alpha1, comes back.
    alpha = foo("d", "v1alpha1", deploymentName="d-nginx")
    alpha["metadata"]["annotations"] = {f"{GROUP}/paused": "true"}

    await client.create(foos, foo("probe", deploymentName="probe", paused=True))

    async def converting() -> bool:  # (without the webhook, v1alpha1 would say paused)
        probe = await client.get(f"{foos_path(ns, 'v1alpha1')}/probe")
        return "paused" not in probe["spec"]

    await in_effect(target, converting, "the conversion")
    await client.create(foos_path(ns, "v1alpha1"), alpha)
    as_v1 = await client.get(f"{foos}/d")
    assert as_v1["apiVersion"] == f"{GROUP}/v1"
    assert as_v1["spec"] == {"deploymentName": "d-nginx", "replicas": 1, "paused": True}
    assert "annotations" not in as_v1["metadata"]
    paused = await until(client, deployments, lambda d: d["metadata"]["name"] == "d-nginx")
    assert paused["spec"]["paused"] is True
