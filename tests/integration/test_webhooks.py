"""Admission and conversion webhooks served by kubereflector and called by the target (the
emulator, or a real kube-apiserver that calls ``https://127.0.0.1:PORT``): the same tests
on both, so the emulator is checked against kube's behaviour.

Each test uses a Foo kind of its own group and webhook configurations of its own names,
restricted to its own namespace (``namespaceSelector``), deleted at its end."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession, web
from conftest import Target

from kubereflector import ListOptions
from kubereflector.client import Client, ClientConfig, StaticAuth
from kubereflector.errors import ApiError, ForbiddenError, InvalidError, NotFoundError
from kubereflector.runtime import Manager, ManagerError
from kubereflector.runtime.webhooks import (
    AdmissionRequest,
    Cause,
    Denied,
    SelfSignedCertificate,
    WebhookEndpoint,
    WebhookOptions,
    Webhooks,
    WebhookServer,
)
from webhook_targets import (
    ADMISSION,
    CRDS,
    Foos,
    config_of,
    configured,
    delete_configurations,
    eventually,
    raw,
    refused,
    running,
)

pytestmark = pytest.mark.asyncio

DNS_LABEL = "abcdefghijklmnopqrstuvwxyz0123456789-"
WATCH_SECONDS = 30
"""A watch's own timeout (never reached when things work)."""


def in_namespace(target: Target) -> dict[str, Any]:
    return {"matchLabels": {"kubernetes.io/metadata.name": target.namespace}}


def add_foo_webhooks(manager: Manager | Webhooks, foos: Foos, target: Target) -> list[Any]:
    """The sample-controller Foo's webhooks: replicas default to 1; deploymentName is a
    DNS-1123 label that does not change. Returns the requests the validator saw."""
    seen: list[Any] = []

    @manager.defaulter(foos.v1, namespace_selector=in_namespace(target))
    def default(foo: Any, request: AdmissionRequest[Any]) -> None:
        foo["spec"].setdefault("replicas", 1)

    @manager.validator(foos.v1, namespace_selector=in_namespace(target))
    async def validate(foo: Any, request: AdmissionRequest[Any]) -> list[str]:
        seen.append(request)
        name = foo["spec"].get("deploymentName", "")
        if not name or len(name) > 63 or set(name) - set(DNS_LABEL) or name[0] == "-":
            raise Denied(
                f"spec.deploymentName {name!r} is not a DNS-1123 label",
                causes=[Cause("spec.deploymentName", "must be a DNS-1123 label")],
            )
        old = request.old_object
        if old is not None and old["spec"].get("deploymentName") != name:
            raise Denied("spec.deploymentName cannot change")
        return ["replicas above 10 are slow"] if foo["spec"].get("replicas", 0) > 10 else []

    return seen


# -- admission ----------------------------------------------------------------------------------


async def test_an_invalid_foo_is_refused_with_the_handlers_message(target: Target) -> None:
    foos = Foos.make(target)
    name = f"kr-{foos.group.split('.')[0]}"
    async with foos.served(foos.crd()):
        manager = Manager(
            config_of(target), webhook_port=0, webhook_options=WebhookOptions(install=name)
        )
        add_foo_webhooks(manager, foos, target)
        try:
            async with running(manager):

                async def denied() -> bool:
                    bad = foos.foo("probe", deploymentName="Bad_Name")
                    try:
                        await target.client.create(foos.path(), bad, params={"dryRun": "All"})
                    except InvalidError:
                        return True
                    return False

                await eventually(denied, "calling the webhooks")
                error = await refused(
                    target.client.create(foos.path(), foos.foo("a", deploymentName="Not_OK"))
                )
                assert isinstance(error, InvalidError)
                assert error.message == (
                    f'admission webhook "vfoo.{foos.group}" denied the request: '
                    "spec.deploymentName 'Not_OK' is not a DNS-1123 label"
                )
                assert error.details is not None
                assert error.details["causes"] == [
                    {
                        "reason": "FieldValueInvalid",
                        "message": "must be a DNS-1123 label",
                        "field": "spec.deploymentName",
                    }
                ]
                created = await target.client.create(
                    foos.path(), foos.foo("a", deploymentName="web")
                )
                assert created["spec"]["deploymentName"] == "web"
                changed = {**created, "spec": {**created["spec"], "deploymentName": "api"}}
                error = await refused(target.client.update(foos.path("v1", "a"), changed))
                assert isinstance(error, ForbiddenError)
                assert error.message.endswith(
                    "denied the request: spec.deploymentName cannot change"
                )
        finally:
            await delete_configurations(target, name)


async def test_a_defaulted_field_appears_and_belongs_to_nobody(target: Target) -> None:
    foos = Foos.make(target)
    name = f"kr-{foos.group.split('.')[0]}"
    async with foos.served(foos.crd()):
        manager = Manager(
            config_of(target), webhook_port=0, webhook_options=WebhookOptions(install=name)
        )
        add_foo_webhooks(manager, foos, target)
        try:
            async with running(manager):

                async def defaulted() -> bool:
                    probe = foos.foo("probe", deploymentName="web")
                    made = await target.client.create(foos.path(), probe, params={"dryRun": "All"})
                    return bool(made["spec"].get("replicas") == 1)

                await eventually(defaulted, "calling the defaulter")
                created = await target.client.create(
                    foos.path(), foos.foo("a", deploymentName="web"), params={"fieldManager": "me"}
                )
                assert created["spec"] == {"deploymentName": "web", "replicas": 1}
                stored = await target.client.get(foos.path("v1", "a"))
                assert stored["spec"]["replicas"] == 1
                (managed,) = stored["metadata"]["managedFields"]
                assert managed["manager"] == "me"
                assert managed["fieldsV1"]["f:spec"] == {".": {}, "f:deploymentName": {}}
                status, warnings, _ = await raw(
                    target, "POST", foos.path(), foos.foo("b", deploymentName="db", replicas=11)
                )
                assert status == 201
                assert warnings == ['299 - "replicas above 10 are slow"']
        finally:
            await delete_configurations(target, name)


async def test_the_review_carries_what_kube_sends(target: Target) -> None:
    hooks = Webhooks()
    seen: list[tuple[str, AdmissionRequest[Any]]] = []

    @hooks.defaulter("configmaps", operations=["*"], namespace_selector=in_namespace(target))
    def default(obj: dict[str, Any], request: AdmissionRequest[Any]) -> None:
        seen.append(("mutating", request))

    @hooks.validator("configmaps", operations=["*"], namespace_selector=in_namespace(target))
    def validate(obj: dict[str, Any], request: AdmissionRequest[Any]) -> None:
        seen.append(("validating", request))
        if (obj.get("data") or {}).get("probe"):
            raise Denied("probe")

    server = WebhookServer(hooks, port=0, host="127.0.0.1")
    await server.start()
    path = f"/api/v1/namespaces/{target.namespace}/configmaps"
    try:
        async with configured(target, server.configurations(f"kr-{target.namespace}")):

            async def active() -> bool:
                probe = {"metadata": {"generateName": "probe-"}, "data": {"probe": "1"}}
                try:
                    await target.client.create(path, probe, params={"dryRun": "All"})
                except ForbiddenError:
                    return True
                return False

            await eventually(active, "calling the webhooks")
            seen.clear()
            made = await target.client.create(
                path,
                {"metadata": {"generateName": "cm-", "labels": {"a": "b"}}, "data": {"k": "v"}},
                params={"fieldManager": "tester"},
            )
            name = made["metadata"]["name"]
            await target.client.patch(
                f"{path}/{name}", {"data": {"k": "w"}}, params={"dryRun": "All"}
            )
            await target.client.delete(f"{path}/{name}")
    finally:
        await server.stop()
    kinds = [(kind, r.operation, r.name, r.dry_run) for kind, r in seen]
    assert kinds == [
        ("mutating", "CREATE", "", False),
        ("validating", "CREATE", name, False),
        ("mutating", "UPDATE", name, True),
        ("validating", "UPDATE", name, True),
        ("mutating", "DELETE", name, False),
        ("validating", "DELETE", name, False),
    ]
    for _, request in seen:
        assert request.kind.kind == "ConfigMap"
        assert (request.resource.group, request.resource.version) == ("", "v1")
        assert request.resource.resource == "configmaps"
        assert request.request_kind == request.kind
        assert request.request_resource == request.resource
        assert request.sub_resource == ""
        assert request.namespace == target.namespace
        assert request.user_info.username
        assert "system:authenticated" in request.user_info.groups
    mutating_create, validating_create = seen[0][1], seen[1][1]
    assert mutating_create.object is not None
    assert "uid" not in mutating_create.object["metadata"]
    assert mutating_create.object["metadata"]["creationTimestamp"] is None
    assert mutating_create.object["metadata"]["managedFields"][0]["manager"] == "tester"
    assert validating_create.object is not None
    assert validating_create.object["metadata"]["uid"] == made["metadata"]["uid"]
    assert validating_create.old_object is None
    assert validating_create.options == {
        "kind": "CreateOptions",
        "apiVersion": "meta.k8s.io/v1",
        "fieldManager": "tester",
    }
    update = seen[3][1]
    assert update.object is not None
    assert update.old_object is not None
    assert update.object["data"] == {"k": "w"}
    assert update.old_object["data"] == {"k": "v"}
    assert update.options == {
        "kind": "UpdateOptions",
        "apiVersion": "meta.k8s.io/v1",
        "dryRun": ["All"],
    }
    delete = seen[5][1]
    assert delete.object is None
    assert delete.old_object is not None
    assert delete.old_object["metadata"]["name"] == name
    assert delete.options is not None
    assert delete.options["kind"] == "DeleteOptions"


async def test_a_status_write_names_its_subresource(target: Target) -> None:
    foos = Foos.make(target)
    hooks = Webhooks()
    seen: list[AdmissionRequest[Any]] = []

    @hooks.validator(foos.v1, subresources=["status"], namespace_selector=in_namespace(target))
    def validate(foo: Any, request: AdmissionRequest[Any]) -> None:
        seen.append(request)
        if foo.get("status", {}).get("availableReplicas") == -1:
            raise Denied("availableReplicas cannot be negative")

    server = WebhookServer(hooks, port=0, host="127.0.0.1")
    await server.start()
    try:
        async with foos.served(foos.crd(status=True)):
            created = await target.client.create(foos.path(), foos.foo("a", deploymentName="web"))
            async with configured(target, server.configurations(f"kr-{foos.group.split('.')[0]}")):
                negative = {**created, "status": {"availableReplicas": -1}}

                async def active() -> bool:
                    try:
                        await target.client.update(
                            foos.path("v1", "a") + "/status", negative, params={"dryRun": "All"}
                        )
                    except ForbiddenError:
                        return True
                    return False

                await eventually(active, "calling the webhook")
                seen.clear()
                ok = {**created, "status": {"availableReplicas": 2}}
                updated = await target.client.update(foos.path("v1", "a") + "/status", ok)
                assert updated["status"] == {"availableReplicas": 2}
    finally:
        await server.stop()
    (request,) = seen
    assert request.operation == "UPDATE"
    assert request.sub_resource == "status"
    assert request.request_sub_resource == "status"


@contextlib.asynccontextmanager
async def closed_port() -> AsyncIterator[str]:
    """An https URL nothing listens on."""
    server = WebhookServer(Webhooks(), port=0, host="127.0.0.1")
    await server.start()
    url = server.url
    await server.stop()
    yield url


def validating(name: str, webhooks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": webhooks,
    }


def configmap_hook(
    target: Target, name: str, url: str, ca: bytes | None = None, **fields: Any
) -> dict[str, Any]:
    client: dict[str, Any] = {"url": url}
    if ca is not None:
        client["caBundle"] = base64.b64encode(ca).decode()
    return {
        "name": name,
        "clientConfig": client,
        "rules": [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["configmaps"],
            }
        ],
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "namespaceSelector": in_namespace(target),
        **fields,
    }


async def test_failure_policy_fail_refuses_and_ignore_admits_when_the_webhook_is_down(
    target: Target,
) -> None:
    path = f"/api/v1/namespaces/{target.namespace}/configmaps"
    async with closed_port() as url:
        hooks = [
            configmap_hook(
                target,
                "fail.down.kubereflector.io",
                url + "/validate",
                failurePolicy="Fail",
                objectSelector={"matchLabels": {"policy": "fail"}},
            ),
            configmap_hook(
                target,
                "ignore.down.kubereflector.io",
                url + "/validate",
                failurePolicy="Ignore",
                objectSelector={"matchLabels": {"policy": "ignore"}},
            ),
        ]
        async with configured(target, [validating(f"kr-down-{target.namespace}", hooks)]):

            def cm(name: str, policy: str) -> dict[str, Any]:
                return {"metadata": {"name": name, "labels": {"policy": policy}}}

            async def failing() -> bool:
                try:
                    await target.client.create(path, cm("probe", "fail"), params={"dryRun": "All"})
                except ApiError as exc:
                    return exc.status == 500
                return False

            await eventually(failing, "calling the webhook")
            error = await refused(target.client.create(path, cm("a", "fail")))
            assert error.status == 500
            assert error.reason == "InternalError"
            assert error.message.startswith(
                'Internal error occurred: failed calling webhook "fail.down.kubereflector.io": '
                f'failed to call webhook: Post "{url}/validate?timeout=10s": '
            )
            assert error.message.endswith("connect: connection refused")
            made = await target.client.create(path, cm("b", "ignore"))
            assert made["metadata"]["name"] == "b"
            assert await target.client.get(f"{path}/b")
            with pytest.raises(NotFoundError):
                await target.client.get(f"{path}/a")


@contextlib.asynccontextmanager
async def hanging_webhook() -> AsyncIterator[tuple[str, bytes]]:
    """An https webhook that never answers: its URL and CA."""
    certificate = SelfSignedCertificate.generate(["127.0.0.1"])
    forever = asyncio.Event()

    async def hang(request: web.BaseRequest) -> web.StreamResponse:
        await forever.wait()
        return web.Response()

    folder = Path(__import__("tempfile").mkdtemp())
    cert, key = certificate.write(folder)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    runner = web.ServerRunner(web.Server(hang, handler_cancellation=True))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    try:
        yield f"https://127.0.0.1:{runner.addresses[0][1]}", certificate.ca_pem
    finally:
        forever.set()
        await runner.cleanup()
        __import__("shutil").rmtree(folder, ignore_errors=True)


async def test_timeout_seconds_bounds_a_webhook_that_does_not_answer(target: Target) -> None:
    path = f"/api/v1/namespaces/{target.namespace}/configmaps"
    async with hanging_webhook() as (url, ca):
        hooks = [
            configmap_hook(
                target,
                "slow.fail.kubereflector.io",
                url + "/slow",
                ca,
                failurePolicy="Fail",
                timeoutSeconds=1,
                objectSelector={"matchLabels": {"policy": "fail"}},
            ),
            configmap_hook(
                target,
                "slow.ignore.kubereflector.io",
                url + "/slow",
                ca,
                failurePolicy="Ignore",
                timeoutSeconds=1,
                objectSelector={"matchLabels": {"policy": "ignore"}},
            ),
        ]
        async with configured(target, [validating(f"kr-slow-{target.namespace}", hooks)]):

            async def timing_out() -> bool:
                probe = {"metadata": {"name": "probe", "labels": {"policy": "fail"}}}
                try:
                    await target.client.create(path, probe, params={"dryRun": "All"})
                except ApiError as exc:
                    return exc.status == 500
                return False

            await eventually(timing_out, "calling the webhook")
            error = await refused(
                target.client.create(
                    path, {"metadata": {"name": "a", "labels": {"policy": "fail"}}}
                )
            )
            assert error.message.startswith(
                'Internal error occurred: failed calling webhook "slow.fail.kubereflector.io": '
                f'failed to call webhook: Post "{url}/slow?timeout=1s": '
            )
            assert "context deadline exceeded" in error.message
            made = await target.client.create(
                path, {"metadata": {"name": "b", "labels": {"policy": "ignore"}}}
            )
            assert made["metadata"]["name"] == "b"


async def test_mutating_webhooks_are_reinvoked_when_a_later_one_changes_the_object(
    target: Target,
) -> None:
    hooks = Webhooks()
    calls: list[str] = []
    selector = in_namespace(target)

    @hooks.defaulter(
        "configmaps",
        name="first.reinvoke.kubereflector.io",
        path="/first",
        reinvocation_policy="IfNeeded",
        namespace_selector=selector,
    )
    def first(obj: dict[str, Any], request: AdmissionRequest[Any]) -> None:
        calls.append("first")
        data = obj.setdefault("data", {})
        data["seen-by-first"] = ",".join(sorted(k for k in data if k != "seen-by-first"))

    @hooks.defaulter(
        "configmaps",
        name="second.reinvoke.kubereflector.io",
        path="/second",
        namespace_selector=selector,
    )
    def second(obj: dict[str, Any], request: AdmissionRequest[Any]) -> None:
        calls.append("second")
        obj.setdefault("data", {})["second"] = "yes"

    server = WebhookServer(hooks, port=0, host="127.0.0.1")
    await server.start()
    path = f"/api/v1/namespaces/{target.namespace}/configmaps"
    try:
        async with configured(target, server.configurations(f"kr-re-{target.namespace}")):

            async def reinvoked() -> bool:
                made = await target.client.create(
                    path, {"metadata": {"generateName": "probe-"}}, params={"dryRun": "All"}
                )
                return bool((made.get("data") or {}).get("seen-by-first") == "second")

            await eventually(reinvoked, "calling the webhooks")
            calls.clear()
            made = await target.client.create(path, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    finally:
        await server.stop()
    assert calls == ["first", "second", "first"]
    assert made["data"] == {"k": "v", "second": "yes", "seen-by-first": "k,second"}


async def test_configurations_are_defaulted_and_validated_as_kube_does(target: Target) -> None:
    name = f"kr-cfg-{target.namespace}"
    hook = configmap_hook(target, "defaults.cfg.kubereflector.io", "https://127.0.0.1:1/x")
    hook.pop("namespaceSelector")
    hook["objectSelector"] = {"matchLabels": {"never": "matches-anything-kr"}}
    async with configured(target, [validating(name, [hook])]):
        stored = await target.client.get(f"{ADMISSION}/validatingwebhookconfigurations/{name}")
        (webhook,) = stored["webhooks"]
        assert webhook["failurePolicy"] == "Fail"
        assert webhook["matchPolicy"] == "Equivalent"
        assert webhook["namespaceSelector"] == {}
        assert webhook["timeoutSeconds"] == 10
        assert webhook["rules"][0]["scope"] == "*"
        assert stored["metadata"]["generation"] == 1
    bad = configmap_hook(target, "two-segments.io", "http://127.0.0.1:1/x", timeoutSeconds=31)
    del bad["sideEffects"]
    error = await refused(
        target.client.create(
            f"{ADMISSION}/validatingwebhookconfigurations", validating(name + "-bad", [bad])
        )
    )
    assert isinstance(error, InvalidError)
    assert error.details is not None
    fields = {cause["field"]: cause["message"] for cause in error.details["causes"]}
    assert fields == {
        "webhooks[0].name": 'Invalid value: "two-segments.io": should be a domain with at '
        "least three segments separated by dots",
        "webhooks[0].sideEffects": "Required value: must specify one of None, NoneOnDryRun",
        "webhooks[0].timeoutSeconds": "Invalid value: 31: the timeout value must be between 1 "
        "and 30 seconds",
        "webhooks[0].clientConfig.url": "Invalid value: \"http\": 'https' is the only allowed "
        "URL scheme; desired format: https://host[/path]",
    }


# -- conversion ---------------------------------------------------------------------------------


def alpha_to_v1(foo: Any) -> Any:
    spec = foo.get("spec") or {}
    foo["spec"] = {"deploymentName": spec.get("deployment", "")}
    if "replicas" in spec:
        foo["spec"]["replicas"] = spec["replicas"]
    return foo


def v1_to_alpha(foo: Any) -> Any:
    spec = foo.get("spec") or {}
    foo["spec"] = {"deployment": spec.get("deploymentName", "")}
    if "replicas" in spec:
        foo["spec"]["replicas"] = spec["replicas"]
    return foo


async def settled(read: Any) -> Any:
    """``await read()``, or ``None`` while a real server swaps a CRD's handlers after the
    CRD changed (it answers 503 "apiserver is shutting down" meanwhile)."""
    try:
        return await read()
    except ApiError as exc:
        if exc.status == 503:
            return None
        raise


async def test_a_foo_written_as_v1alpha1_is_read_as_v1_and_back(target: Target) -> None:
    foos = Foos.make(target)
    name = f"kr-{foos.group.split('.')[0]}"
    async with foos.served(foos.crd(alpha=True)):
        manager = Manager(
            config_of(target), webhook_port=0, webhook_options=WebhookOptions(install=name)
        )
        manager.converter(foos.v1, foos.v1alpha1, to_hub=alpha_to_v1, from_hub=v1_to_alpha)
        seen = add_foo_webhooks(manager, foos, target)
        client = target.client
        try:
            async with running(manager):

                async def converting() -> bool:
                    probe = foos.foo("probe", "v1alpha1", deployment="web", replicas=1)
                    made = await settled(
                        lambda: client.create(
                            foos.path("v1alpha1"), probe, params={"dryRun": "All"}
                        )
                    )
                    return made is not None and bool(seen)

                await eventually(converting, "converting through the webhook")
                crd = await client.get(f"{CRDS}/{foos.crd_name}")
                assert crd["spec"]["conversion"]["strategy"] == "Webhook"
                seen.clear()
                written = await client.create(
                    foos.path("v1alpha1"), foos.foo("a", "v1alpha1", deployment="web", replicas=2)
                )
                assert written["apiVersion"] == f"{foos.group}/v1alpha1"
                assert written["spec"] == {"deployment": "web", "replicas": 2}
                (request,) = seen  # the validator, for v1, got the object converted
                assert (request.kind.version, request.request_kind.version) == ("v1", "v1alpha1")
                assert request.object["spec"] == {"deploymentName": "web", "replicas": 2}

                hub = await client.get(foos.path("v1", "a"))
                assert hub["apiVersion"] == f"{foos.group}/v1"
                assert hub["spec"] == {"deploymentName": "web", "replicas": 2}
                assert hub["metadata"]["uid"] == written["metadata"]["uid"]
                back = await client.get(foos.path("v1alpha1", "a"))
                assert back["spec"] == written["spec"]
                assert back["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]

                listed = await client.get(foos.path("v1alpha1"), params={"limit": "10"})
                assert listed["apiVersion"] == f"{foos.group}/v1alpha1"
                assert [i["spec"] for i in listed["items"]] == [written["spec"]]
                assert [i["apiVersion"] for i in listed["items"]] == [f"{foos.group}/v1alpha1"]

                updated = await client.patch(foos.path("v1", "a"), {"spec": {"replicas": 3}})
                assert updated["spec"] == {"deploymentName": "web", "replicas": 3}
                again = await client.get(foos.path("v1alpha1", "a"))
                assert again["spec"] == {"deployment": "web", "replicas": 3}
                error = await refused(
                    client.create(
                        foos.path("v1alpha1"), foos.foo("b", "v1alpha1", deployment="Not_OK")
                    )
                )
                assert "denied the request: spec.deploymentName 'Not_OK'" in error.message
        finally:
            await delete_configurations(target, name)


async def test_a_watch_in_another_version_gets_converted_objects(target: Target) -> None:
    foos = Foos.make(target)
    hooks = Webhooks()
    hooks.converter(foos.v1, foos.v1alpha1, to_hub=alpha_to_v1, from_hub=v1_to_alpha)
    server = WebhookServer(hooks, port=0, host="127.0.0.1")
    await server.start()
    crd = foos.crd(alpha=True)
    crd["spec"]["conversion"] = hooks.conversion_stanza(foos.v1, server.endpoint, server.ca_bundle)
    client = target.client
    events: list[tuple[str, dict[str, Any]]] = []
    try:
        async with foos.served(crd):
            created = await client.create(foos.path("v1"), foos.foo("a", deploymentName="web"))

            async def converted() -> bool:
                got = await settled(lambda: client.get(foos.path("v1alpha1", "a")))
                return got is not None and bool(got["spec"].get("deployment") == "web")

            await eventually(converted, "converting through the webhook")
            since = created["metadata"]["resourceVersion"]
            options = ListOptions(resource_version=since, timeout_seconds=WATCH_SECONDS)
            async with client.watch(foos.path("v1alpha1"), options) as stream:
                await client.patch(foos.path("v1", "a"), {"spec": {"replicas": 4}})
                await client.create(foos.path("v1"), foos.foo("b", deploymentName="db"))
                async for event in stream:
                    events.append((event.type, event.object))
                    if len(events) == 2:
                        break
    finally:
        await server.stop()
    assert [(kind, obj["metadata"]["name"]) for kind, obj in events] == [
        ("MODIFIED", "a"),
        ("ADDED", "b"),
    ]
    assert [obj["apiVersion"] for _, obj in events] == [f"{foos.group}/v1alpha1"] * 2
    assert [obj["spec"] for _, obj in events] == [
        {"deployment": "web", "replicas": 4},
        {"deployment": "db"},
    ]


async def test_conversion_without_a_webhook_rewrites_the_api_version(target: Target) -> None:
    foos = Foos.make(target)
    async with foos.served(foos.crd(alpha=True)):
        client = target.client
        written = await client.create(
            foos.path("v1alpha1"), foos.foo("a", "v1alpha1", deployment="web", replicas=2)
        )
        assert written["apiVersion"] == f"{foos.group}/v1alpha1"
        hub = await client.get(foos.path("v1", "a"))
        assert hub["apiVersion"] == f"{foos.group}/v1"
        # stored in v1 as it was written, so pruned by v1's schema: what v1 cannot hold is
        # lost without a conversion webhook, for every version
        assert hub["spec"] == {"replicas": 2}
        back = await client.get(foos.path("v1alpha1", "a"))
        assert back["spec"] == {"replicas": 2}
        listed = await client.get(foos.path("v1"))
        assert [i["apiVersion"] for i in listed["items"]] == [f"{foos.group}/v1"]
        crd = await client.get(f"{CRDS}/{foos.crd_name}")
        assert crd["spec"]["conversion"] == {"strategy": "None"}


async def test_the_conversion_webhook_down_fails_reads_of_other_versions(target: Target) -> None:
    foos = Foos.make(target)
    hooks = Webhooks()
    hooks.converter(foos.v1, foos.v1alpha1, to_hub=alpha_to_v1, from_hub=v1_to_alpha)
    server = WebhookServer(hooks, port=0, host="127.0.0.1")
    await server.start()
    crd = foos.crd(alpha=True)
    crd["spec"]["conversion"] = hooks.conversion_stanza(foos.v1, server.endpoint, server.ca_bundle)
    client = target.client
    async with foos.served(crd):
        await client.create(foos.path("v1"), foos.foo("a", deploymentName="web"))

        async def converted() -> bool:
            got = await settled(lambda: client.get(foos.path("v1alpha1", "a")))
            return got is not None and bool(got["spec"].get("deployment") == "web")

        await eventually(converted, "converting through the webhook")
        await server.stop()
        stored = await client.get(foos.path("v1", "a"))  # the storage version needs none
        assert stored["spec"]["deploymentName"] == "web"
        error = await refused(client.get(foos.path("v1alpha1", "a")))
        assert error.status == 500
        assert error.message.startswith(
            f"conversion webhook for {foos.group}/v1, Kind=Foo failed: "
            f'Post "{server.url}/convert?timeout=30s": '
        )
        assert error.message.endswith("connect: connection refused")


async def test_certificates_rotate_without_a_restart(target: Target, tmp_path: Path) -> None:
    """As cert-manager rotates: the CA bundle trusts the next CA before the server's
    certificate files change; the server loads the new pair without a restart, and the
    API server's calls keep succeeding throughout."""
    first = SelfSignedCertificate.generate(["127.0.0.1"])
    second = SelfSignedCertificate.generate(["127.0.0.1"])  # signed by another CA
    first.write(tmp_path)
    hooks = Webhooks()

    @hooks.validator("configmaps", namespace_selector=in_namespace(target))
    def validate(obj: dict[str, Any], request: AdmissionRequest[Any]) -> None:
        if (obj.get("data") or {}).get("deny"):
            raise Denied("denied by the webhook")

    server = WebhookServer(
        hooks, port=0, host="127.0.0.1", options=WebhookOptions(cert_dir=str(tmp_path))
    )
    await server.start()
    path = f"/api/v1/namespaces/{target.namespace}/configmaps"
    name = f"kr-rot-{target.namespace}"
    bundle = first.ca_pem + second.ca_pem

    async def denied(label: str) -> bool:
        probe = {"metadata": {"name": f"probe-{label}"}, "data": {"deny": label}}
        try:
            await target.client.create(path, probe, params={"dryRun": "All"})
        except ForbiddenError as exc:
            return exc.message.endswith("denied by the webhook")
        return False

    async def served_by(pem: bytes) -> bool:
        context = ssl.create_default_context(cadata=pem.decode())
        try:
            _, writer = await asyncio.open_connection(
                "127.0.0.1", server.port, ssl=context, server_hostname="127.0.0.1"
            )
        except ssl.SSLCertVerificationError:
            return False
        writer.close()
        return True

    try:
        endpoint = WebhookEndpoint.at_url(server.url)
        async with configured(target, hooks.configurations(name, endpoint, bundle)):
            await eventually(lambda: denied("first"), "calling the webhook")
            assert await served_by(first.ca_pem)
            second.write(tmp_path)
            assert server.reload_certificates()
            assert not await served_by(first.ca_pem)  # new connections get the new pair
            assert await served_by(second.ca_pem)
            for label in ("second", "third"):  # no retry: the API server trusts both CAs
                assert await denied(label)
            made = await target.client.create(path, {"metadata": {"name": "a"}, "data": {"k": "v"}})
            assert made["metadata"]["name"] == "a"
            assert server.ready()
    finally:
        await server.stop()


async def test_server_side_apply_and_deletecollection_are_admitted(target: Target) -> None:
    hooks = Webhooks()
    seen: list[tuple[str, str]] = []

    @hooks.defaulter("configmaps", namespace_selector=in_namespace(target))
    def default(obj: dict[str, Any], request: AdmissionRequest[Any]) -> None:
        seen.append(("mutating", request.operation))
        obj.setdefault("data", {})["defaulted"] = "yes"

    @hooks.validator(
        "configmaps",
        operations=["CREATE", "UPDATE", "DELETE"],
        namespace_selector=in_namespace(target),
    )
    def validate(obj: dict[str, Any], request: AdmissionRequest[Any]) -> None:
        seen.append(("validating", request.operation))
        if (obj.get("data") or {}).get("deny"):
            raise Denied("denied")

    server = WebhookServer(hooks, port=0, host="127.0.0.1")
    await server.start()
    path = f"/api/v1/namespaces/{target.namespace}/configmaps"
    client = target.client
    apply = {"content_type": "application/apply-patch+yaml", "params": {"fieldManager": "me"}}
    try:
        async with configured(target, server.configurations(f"kr-ssa-{target.namespace}")):

            async def active() -> bool:
                probe = {"metadata": {"name": "probe"}, "data": {"deny": "1"}}
                try:
                    await client.create(path, probe, params={"dryRun": "All"})
                except ForbiddenError:
                    return True
                return False

            await eventually(active, "calling the webhooks")
            seen.clear()
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
            created = await client.patch(f"{path}/a", {**body, "data": {"k": "v"}}, **apply)
            assert created["data"] == {"k": "v", "defaulted": "yes"}
            assert seen == [("mutating", "CREATE"), ("validating", "CREATE")]
            seen.clear()
            error = await refused(
                client.patch(f"{path}/a", {**body, "data": {"deny": "1"}}, **apply)
            )
            assert isinstance(error, ForbiddenError)
            assert seen == [("mutating", "UPDATE"), ("validating", "UPDATE")]
            await client.create(path, {"metadata": {"name": "b"}})
            seen.clear()
            await client.delete(path)  # deletecollection: each object is admitted
            assert sorted(seen) == [("validating", "DELETE"), ("validating", "DELETE")]
            assert (await client.get(path))["items"] == []
    finally:
        await server.stop()


async def test_match_policy_exact_skips_the_other_versions(target: Target) -> None:
    foos = Foos.make(target)
    hooks = Webhooks()
    exact: list[str] = []
    equivalent: list[str] = []

    @hooks.validator(foos.v1, match_policy="Exact", namespace_selector=in_namespace(target))
    def only_v1(foo: Any, request: AdmissionRequest[Any]) -> None:
        exact.append(request.request_kind.version if request.request_kind else "")

    @hooks.validator(
        foos.v1,
        match_policy="Equivalent",
        path="/equivalent",
        name="equivalent.foos.kr.io",
        namespace_selector=in_namespace(target),
    )
    def any_version(foo: Any, request: AdmissionRequest[Any]) -> None:
        equivalent.append(request.request_kind.version if request.request_kind else "")
        if foo["spec"].get("replicas") == 99:  # a field of both versions (no conversion here)
            raise Denied("probe")

    server = WebhookServer(hooks, port=0, host="127.0.0.1")
    await server.start()
    client = target.client
    try:
        async with (
            foos.served(foos.crd(alpha=True)),
            configured(target, server.configurations(f"kr-{foos.group.split('.')[0]}")),
        ):

            async def active() -> bool:
                probe = foos.foo("probe", "v1alpha1", replicas=99)
                try:
                    await client.create(foos.path("v1alpha1"), probe, params={"dryRun": "All"})
                except ForbiddenError:
                    return True
                return False

            await eventually(active, "calling the webhooks")
            exact.clear()
            equivalent.clear()
            await client.create(foos.path("v1alpha1"), foos.foo("a", "v1alpha1", deployment="x"))
            await client.create(foos.path("v1"), foos.foo("b", deploymentName="y"))
    finally:
        await server.stop()
    assert exact == ["v1"]
    assert equivalent == ["v1alpha1", "v1"]


async def test_a_namespace_selector_leaves_other_namespaces_alone(target: Target) -> None:
    hooks = Webhooks()

    @hooks.validator("configmaps", namespace_selector={"matchLabels": {"kr-webhooks": "on"}})
    def deny_all(obj: dict[str, Any], request: AdmissionRequest[Any]) -> None:
        raise Denied("this namespace is guarded")

    server = WebhookServer(hooks, port=0, host="127.0.0.1")
    await server.start()
    client = target.client
    path = f"/api/v1/namespaces/{target.namespace}/configmaps"
    try:
        async with configured(target, server.configurations(f"kr-ns-{target.namespace}")):
            await client.patch(
                f"/api/v1/namespaces/{target.namespace}",
                {"metadata": {"labels": {"kr-webhooks": "on"}}},
            )

            async def guarded() -> bool:
                try:
                    await client.create(path, {"metadata": {"name": "p"}}, params={"dryRun": "All"})
                except ForbiddenError:
                    return True
                return False

            await eventually(guarded, "calling the webhook")
            await client.patch(
                f"/api/v1/namespaces/{target.namespace}",
                {"metadata": {"labels": {"kr-webhooks": "off"}}},
            )

            async def unguarded() -> bool:
                try:
                    await client.create(path, {"metadata": {"name": "p"}}, params={"dryRun": "All"})
                except ForbiddenError:
                    return False
                return True

            await eventually(unguarded, "leaving the namespace alone")
            assert (await client.create(path, {"metadata": {"name": "a"}}))["metadata"][
                "name"
            ] == "a"
    finally:
        await server.stop()


async def test_the_emulator_calls_a_service_webhook_where_it_is_routed(target: Target) -> None:
    emulator = target.faults()  # a real cluster reaches Services through its own network
    hooks = Webhooks()

    @hooks.validator("configmaps", namespace_selector=in_namespace(target))
    def deny(obj: dict[str, Any], request: AdmissionRequest[Any]) -> None:
        raise Denied("routed")

    server = WebhookServer(hooks, port=0, host="127.0.0.1")
    await server.start()
    path = f"/api/v1/namespaces/{target.namespace}/configmaps"
    endpoint = WebhookEndpoint.service("operators", "hooks", port=8443)
    try:
        async with configured(
            target, hooks.configurations(f"kr-svc-{target.namespace}", endpoint, server.ca_bundle)
        ):
            error = await refused(target.client.create(path, {"metadata": {"name": "a"}}))
            assert error.status == 500
            assert 'service "hooks" in namespace "operators" (port 8443) is not reachable' in (
                error.message
            )
            emulator.route_webhook_service("operators", "hooks", server.url, port=8443)
            error = await refused(target.client.create(path, {"metadata": {"name": "a"}}))
            assert error.message.endswith("denied the request: routed")
            with pytest.raises(ValueError, match="over https"):
                emulator.route_webhook_service("operators", "hooks", "http://x", port=8443)
    finally:
        await server.stop()


async def test_the_manager_reports_its_webhooks_and_takes_them_before_it_runs(
    target: Target,
) -> None:
    foos = Foos.make(target)
    manager = Manager(config_of(target), webhook_port=0, health_port=0, metrics_port=0)
    add_foo_webhooks(manager, foos, target)
    assert manager.webhook_server is not None
    assert [w.name for w in manager.webhooks.admission] == [
        f"mfoo.{foos.group}",
        f"vfoo.{foos.group}",
    ]
    async with running(manager):
        assert manager.health_url is not None
        status, _, _ = await raw_url(manager.health_url + "/readyz?verbose")
        assert status == 200
        with pytest.raises(ManagerError, match="before the manager runs"):
            manager.validator("pods")
        with pytest.raises(ManagerError, match="before the manager runs"):
            manager.converter(foos.v1, foos.v1alpha1, to_hub=alpha_to_v1, from_hub=v1_to_alpha)
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "1",
                "kind": {"group": foos.group, "version": "v1", "kind": "Foo"},
                "resource": {"group": foos.group, "version": "v1", "resource": "foos"},
                "operation": "CREATE",
                "object": foos.foo("a", deploymentName="web"),
            },
        }
        server = manager.webhook_server
        path = manager.webhooks.admission[1].path
        ca = server.ca_bundle
        assert ca is not None
        async with (
            ClientSession() as session,
            session.post(
                server.url + path, json=review, ssl=ssl.create_default_context(cadata=ca.decode())
            ) as response,
        ):
            assert (await response.json())["response"]["allowed"] is True
        assert manager.metrics_url is not None
        _, _, text = await raw_url(manager.metrics_url)
        assert (
            f'controller_runtime_webhook_requests_total{{code="200",webhook="{path}"}} 1.0' in text
        )
    with pytest.raises(ValueError, match="webhook_options without a webhook_port"):
        Manager(config_of(target), webhook_options=WebhookOptions())
    with pytest.raises(ValueError, match="webhook_port must be a port number"):
        Manager(config_of(target), webhook_port=-1)


async def raw_url(url: str) -> tuple[int, str, str]:
    async with ClientSession() as session, session.get(url) as response:
        return response.status, response.headers.get("Content-Type", ""), await response.text()


async def test_the_review_names_who_wrote(target: Target) -> None:
    emulator = target.faults()  # users of its own: the real server here has one token
    token = emulator.add_user("alice", groups=["system:masters", "dev"])
    hooks = Webhooks()
    users: list[AdmissionRequest[Any]] = []

    @hooks.validator("configmaps", namespace_selector=in_namespace(target))
    def record(obj: dict[str, Any], request: AdmissionRequest[Any]) -> None:
        users.append(request)

    server = WebhookServer(hooks, port=0, host="127.0.0.1")
    await server.start()
    config = config_of(target)
    alice = ClientConfig(server=config.server, auth=StaticAuth(token=token))
    try:
        async with (
            configured(target, server.configurations(f"kr-who-{target.namespace}")),
            Client(alice) as client,
        ):
            await client.create(
                f"/api/v1/namespaces/{target.namespace}/configmaps", {"metadata": {"name": "a"}}
            )
    finally:
        await server.stop()
    (request,) = users
    assert request.user_info.username == "alice"
    assert request.user_info.groups == ("system:masters", "dev", "system:authenticated")
