"""What the target (the emulator, or a real kube-apiserver) does with a webhook's answer
that is a denial without words, not what it asked for, or an older review version; and
a CRD whose storage version changes under its objects. A raw HTTPS server answers what
each test scripts, so answers kubereflector's own server would never give are tried on
both targets alike."""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import ssl
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from conftest import Target

from kubereflector.errors import ApiError, BadRequestError, NotFoundError
from kubereflector.runtime.webhooks import SelfSignedCertificate
from webhook_targets import CRDS, Foos, configured, eventually, refused

pytestmark = pytest.mark.asyncio

Answer = Callable[[dict[str, Any]], dict[str, Any] | None]
"""From a review's request to the review's response (None: answer the request itself)."""


class Scripted:
    """An HTTPS webhook that answers with ``answer(request)``; records the reviews."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.reviews: list[dict[str, Any]] = []
        self.url = ""
        self.ca = b""

    async def handle(self, http: web.BaseRequest) -> web.Response:
        review = json.loads(await http.read())
        self.reviews.append(review)
        response = self.answer(review["request"])
        body = {"apiVersion": review["apiVersion"], "kind": review["kind"], "response": response}
        return web.json_response(body)


@contextlib.asynccontextmanager
async def scripted(answer: Answer) -> AsyncIterator[Scripted]:
    hook = Scripted(answer)
    certificate = SelfSignedCertificate.generate(["127.0.0.1"])
    folder = Path(tempfile.mkdtemp())
    cert, key = certificate.write(folder)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    runner = web.ServerRunner(web.Server(hook.handle))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    hook.url = f"https://127.0.0.1:{runner.addresses[0][1]}"
    hook.ca = certificate.ca_pem
    try:
        yield hook
    finally:
        await runner.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def configuration(
    target: Target, kind: str, hook: Scripted, *, versions: list[str] | None = None
) -> dict[str, Any]:
    """A configuration of one webhook on ConfigMaps labelled ``answer=scripted`` in the
    test's namespace, failing closed."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": f"{kind}WebhookConfiguration",
        "metadata": {"name": f"kr-answers-{kind.lower()}-{target.namespace}"},
        "webhooks": [
            {
                "name": "scripted.answers.kubereflector.io",
                "clientConfig": {
                    "url": hook.url + "/scripted",
                    "caBundle": base64.b64encode(hook.ca).decode(),
                },
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "DELETE"],
                        "resources": ["configmaps"],
                    }
                ],
                "admissionReviewVersions": versions or ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": target.namespace}
                },
                "objectSelector": {"matchLabels": {"answer": "scripted"}},
            }
        ],
    }


def allowed(request: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"uid": request["uid"], "allowed": True, **more}


async def outcome(
    target: Target, hook: Scripted, kind: str, **options: Any
) -> ApiError | dict[str, Any]:
    """The first create of a scripted ConfigMap once the webhook is called: its error, or
    the created object."""
    path = f"/api/v1/namespaces/{target.namespace}/configmaps"
    result: list[ApiError | dict[str, Any]] = []
    async with configured(target, [configuration(target, kind, hook, **options)]):

        async def called() -> bool:
            hook.reviews.clear()
            body = {"metadata": {"generateName": "scripted-", "labels": {"answer": "scripted"}}}
            try:
                made = await target.client.create(path, body)
            except ApiError as exc:
                result[:] = [exc]
            else:
                result[:] = [made]
            return bool(hook.reviews)

        await eventually(called, "calling the webhook")
    return result[0]


def patch(ops: list[dict[str, Any]]) -> str:
    return base64.b64encode(json.dumps(ops).encode()).decode()


async def test_a_denial_without_words_is_a_400_without_explanation(target: Target) -> None:
    async with scripted(lambda r: {"uid": r["uid"], "allowed": False}) as hook:
        error = await outcome(target, hook, "Validating")
    assert isinstance(error, BadRequestError)
    assert error.message == (
        'admission webhook "scripted.answers.kubereflector.io" denied the request without '
        "explanation"
    )


async def test_a_denial_with_a_reason_and_a_low_code_is_a_400_with_the_reason(
    target: Target,
) -> None:
    def answer(request: dict[str, Any]) -> dict[str, Any]:
        return {"uid": request["uid"], "allowed": False, "status": {"code": 200, "reason": "NoWay"}}

    async with scripted(answer) as hook:
        error = await outcome(target, hook, "Validating")
    assert isinstance(error, ApiError)
    assert error.status == 400
    assert error.reason == "NoWay"
    assert error.message.endswith("denied the request: NoWay")


@pytest.mark.parametrize(
    ("kind", "answer", "why"),
    [
        (
            "Validating",
            lambda r: {"uid": "not-" + r["uid"], "allowed": True},
            'expected response.uid="',
        ),
        (
            "Validating",
            lambda r: allowed(r, patchType="JSONPatch", patch=patch([])),
            "validating webhook may not return response.patch",
        ),
        (
            "Mutating",
            lambda r: allowed(r, patch=patch([{"op": "add", "path": "/data", "value": {}}])),
            "webhook returned response.patch but not response.patchType",
        ),
        ("Validating", lambda r: None, "webhook response was absent"),
    ],
)
async def test_an_answer_that_is_not_a_review_fails_closed(
    target: Target, kind: str, answer: Answer, why: str
) -> None:
    async with scripted(answer) as hook:
        error = await outcome(target, hook, kind)
    assert isinstance(error, ApiError)
    assert error.status == 500
    assert error.message.startswith(
        'Internal error occurred: failed calling webhook "scripted.answers.kubereflector.io": '
        f"received invalid webhook response: {why}"
    )


async def test_a_patch_is_applied(target: Target) -> None:
    ops = [{"op": "add", "path": "/data", "value": {"patched": "yes"}}]
    async with scripted(lambda r: allowed(r, patchType="JSONPatch", patch=patch(ops))) as hook:
        made = await outcome(target, hook, "Mutating")
    assert isinstance(made, dict)
    assert made["data"] == {"patched": "yes"}


async def test_an_older_review_version_is_sent_when_it_is_the_only_one(target: Target) -> None:
    async with scripted(lambda r: {"uid": "anything", "allowed": True}) as hook:
        made = await outcome(target, hook, "Validating", versions=["v1beta1"])
        assert isinstance(made, dict)  # v1beta1 answers are not checked for their uid
        assert hook.reviews[-1]["apiVersion"] == "admission.k8s.io/v1beta1"


async def test_a_mutating_webhook_cannot_patch_a_deletion(target: Target) -> None:
    ops = [{"op": "add", "path": "/data", "value": {"x": "y"}}]
    path = f"/api/v1/namespaces/{target.namespace}/configmaps"
    async with scripted(lambda r: allowed(r, patchType="JSONPatch", patch=patch(ops))) as hook:
        made = await outcome(target, hook, "Mutating")
        assert isinstance(made, dict)
        async with configured(target, [configuration(target, "Mutating", hook)]):
            name = made["metadata"]["name"]

            async def refused_deletion() -> bool:
                try:
                    await target.client.delete(f"{path}/{name}", params={"dryRun": "All"})
                except ApiError as exc:
                    return exc.status == 500
                return False

            await eventually(refused_deletion, "calling the webhook on deletions")
            error = await refused(target.client.delete(f"{path}/{name}"))
    assert error.message == (
        'Internal error occurred: admission webhook "scripted.answers.kubereflector.io" '
        "attempted to modify the object, which is not supported for this operation"
    )
    assert await target.client.get(f"{path}/{name}")


async def test_a_new_storage_version_keeps_the_objects(target: Target) -> None:
    foos = Foos.make(target)
    crd = foos.crd(alpha=True)
    client = target.client
    async with foos.served(crd):
        await client.create(foos.path("v1"), foos.foo("a", replicas=2))
        current = await client.get(f"{CRDS}/{foos.crd_name}")
        for version in current["spec"]["versions"]:
            version["storage"] = version["name"] == "v1alpha1"
        await client.update(f"{CRDS}/{foos.crd_name}", current)

        async def stored_in_alpha() -> bool:
            try:
                await client.create(foos.path("v1"), foos.foo("b", replicas=3))
            except ApiError as exc:
                if exc.status == 503:  # a real server swapping the CRD's handlers
                    return False
                raise
            crd_now = await client.get(f"{CRDS}/{foos.crd_name}")
            return "v1alpha1" in crd_now["status"]["storedVersions"]

        await eventually(stored_in_alpha, "storing in v1alpha1")
        for version in ("v1", "v1alpha1"):
            listed = await client.get(foos.path(version))
            assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["a", "b"]
            assert {i["apiVersion"] for i in listed["items"]} == {f"{foos.group}/{version}"}
            got = await client.get(foos.path(version, "a"))
            assert got["spec"] == {"replicas": 2}
        with pytest.raises(NotFoundError):
            await client.get(foos.path("v1", "c"))


async def test_every_served_version_is_discovered_the_preferred_first(target: Target) -> None:
    foos = Foos.make(target)
    crd = foos.crd(alpha=True)
    beta = {**crd["spec"]["versions"][0], "name": "v1beta1"}
    unserved = {**crd["spec"]["versions"][0], "name": "v1beta2", "served": False}
    crd["spec"]["versions"] += [beta, unserved]
    async with foos.served(crd):
        group = await target.client.get(f"/apis/{foos.group}")
        assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1", "v1alpha1"]
        assert group["preferredVersion"]["version"] == "v1"
        resources = await target.client.get(f"/apis/{foos.group}/v1beta1")
        assert [r["name"] for r in resources["resources"]] == ["foos"]
        with pytest.raises(NotFoundError):
            await target.client.get(foos.path("v1beta2"))
