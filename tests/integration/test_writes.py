"""Writes through ResourceClient: against the emulator, or a real cluster.

Every test runs in its own namespace (see conftest.py) and asserts what
kube-apiserver answers, so the same expectations hold both ways: conflicts,
duplicates and invalid objects raise their classes; dry runs store nothing;
status is a subresource; generation moves with the spec; finalizers hold a
deletion; server-side apply records managers and refuses to take their fields.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import Target

from kubereflector import (
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    InvalidError,
    ListOptions,
    NotFoundError,
    WatchEvent,
)
from kubereflector.client import ResourceClient, retry_on_conflict

pytestmark = pytest.mark.asyncio

TIMEOUT = 10.0


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": dict(data)}


def deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]},
            },
        },
    }


def configmaps(target: Target) -> ResourceClient:
    return target.client.resource("configmaps", namespace=target.namespace)


def managers(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """managedFields by (manager, operation): their fieldsV1."""
    return {
        (entry["manager"], entry["operation"]): entry["fieldsV1"]
        for entry in obj["metadata"].get("managedFields") or []
    }


async def next_event(events: AsyncIterator[WatchEvent]) -> WatchEvent:
    return await asyncio.wait_for(anext(events), TIMEOUT)


# -- reads and writes by name --------------------------------------------------------------------


async def test_every_verb_by_any_name_of_the_resource(target: Target) -> None:
    client, ns = target.client, target.namespace
    created = await client.resource("cm", namespace=ns).create(configmap("a", x="1"))
    assert created["metadata"]["namespace"] == ns
    assert created["kind"] == "ConfigMap"
    for name in ("configmaps", "cm", "ConfigMap", "v1/configmaps"):
        got = await client.resource(name, namespace=ns).get("a")
        assert got["metadata"]["uid"] == created["metadata"]["uid"]
    cms = configmaps(target)
    merged = await cms.patch("a", {"data": {"y": "2"}})
    assert merged["data"] == {"x": "1", "y": "2"}
    jsoned = await cms.patch("a", [{"op": "remove", "path": "/data/x"}], type="json")
    assert jsoned["data"] == {"y": "2"}
    strategic = await cms.patch("a", {"data": {"z": "3"}}, type="strategic")
    assert strategic["data"] == {"y": "2", "z": "3"}
    replaced = copy.deepcopy(strategic)
    replaced["data"] = {"only": "this"}
    updated = await cms.update(replaced)
    assert updated["data"] == {"only": "this"}
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    deployments = client.resource("deployments.apps", namespace=ns)
    await deployments.create(deployment("web"))
    assert (await client.resource("apps/v1/deployments", namespace=ns).get("web"))["spec"][
        "replicas"
    ] == 1
    await cms.delete("a")
    with pytest.raises(NotFoundError) as info:
        await cms.get("a")
    assert info.value.name == "a"
    assert f"/namespaces/{ns}/configmaps/a" in str(info.value)


async def test_list_returns_every_page_and_the_list_resource_version(target: Target) -> None:
    cms = configmaps(target)
    for i in range(7):
        await cms.create({"metadata": {"name": f"c{i}", "labels": {"odd": str(i % 2)}}})
    everything = await cms.list(limit=3)
    assert sorted(o["metadata"]["name"] for o in everything.items) == [f"c{i}" for i in range(7)]
    assert all(o["kind"] == "ConfigMap" for o in everything.items)
    assert everything.resource_version
    odd = await cms.list(label_selector="odd=1", limit=2)
    assert sorted(o["metadata"]["name"] for o in odd.items) == ["c1", "c3", "c5"]
    named = await cms.list(field_selector="metadata.name=c4")
    assert [o["metadata"]["name"] for o in named.items] == ["c4"]
    # Across all namespaces when the client has none: ours are among them.
    anywhere = await target.client.resource("configmaps").list(label_selector="odd=0")
    assert {f"{target.namespace}/c{i}" for i in (0, 2, 4, 6)} <= {
        f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in anywhere.items
    }


async def test_watch_from_the_lists_resource_version(target: Target) -> None:
    cms = configmaps(target)
    listed = await cms.list()
    async with cms.watch(ListOptions(resource_version=listed.resource_version)) as events:
        await cms.create(configmap("w", k="v"))
        event = await next_event(events)
        assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "w")


async def test_namespace_rules(target: Target) -> None:
    anywhere = target.client.resource("configmaps")
    with pytest.raises(ValueError, match="namespaced"):
        await anywhere.get("a")
    with pytest.raises(ValueError, match="namespace"):
        await anywhere.create(configmap("a"))
    # A namespace-less client writes where the object says.
    placed = await anywhere.create({"metadata": {"name": "a", "namespace": target.namespace}})
    assert placed["metadata"]["namespace"] == target.namespace
    with pytest.raises(ValueError, match="may not contain"):
        await configmaps(target).get("../secrets")
    with pytest.raises(BadRequestError, match="does not match the namespace"):
        await configmaps(target).create({"metadata": {"name": "b", "namespace": "default"}})


# -- errors -------------------------------------------------------------------------------------


async def test_duplicates_stale_writes_and_invalid_objects_raise_their_classes(
    target: Target,
) -> None:
    cms = configmaps(target)
    original = await cms.create(configmap("a", x="1"))
    with pytest.raises(AlreadyExistsError) as exists:
        await cms.create(configmap("a"))
    assert (exists.value.status, exists.value.reason) == (409, "AlreadyExists")
    assert exists.value.name == "a"
    await cms.patch("a", {"data": {"x": "2"}})
    stale = copy.deepcopy(original)
    stale["data"]["x"] = "3"
    with pytest.raises(ConflictError) as conflict:
        await cms.update(stale)
    assert "the object has been modified" in conflict.value.message
    assert conflict.value.url is not None
    assert conflict.value.url.endswith(f"/namespaces/{target.namespace}/configmaps/a")
    with pytest.raises(ConflictError):  # a resourceVersion in a merge patch is a precondition
        await cms.patch(
            "a", {"metadata": {"resourceVersion": original["metadata"]["resourceVersion"]}}
        )
    with pytest.raises(ConflictError, match="the UID in the precondition"):
        await cms.delete("a", preconditions={"uid": "not-the-uid"})
    with pytest.raises(InvalidError) as missing:
        await cms.create({"metadata": {}})
    assert [(c.field, c.reason) for c in missing.value.causes] == [
        ("metadata.name", "FieldValueRequired")
    ]
    with pytest.raises(InvalidError) as bad:
        await cms.create(configmap("Not_A_Name"))
    assert bad.value.causes[0].field == "metadata.name"
    assert bad.value.name == "Not_A_Name"
    with pytest.raises(BadRequestError):  # a body of another kind
        await cms.create({"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "s"}})
    renamed = copy.deepcopy(await cms.get("a"))
    renamed["metadata"]["name"] = "b"
    with pytest.raises(BadRequestError, match="does not match the name"):
        await target.client.request(
            "PUT",
            f"/api/v1/namespaces/{target.namespace}/configmaps/a",
            json=renamed,
        )


async def test_retry_on_conflict_re_reads_and_re_applies(target: Target) -> None:
    cms = configmaps(target)
    await cms.create(configmap("counter", n="0"))
    attempts = 0

    async def increment() -> dict[str, Any]:
        nonlocal attempts
        attempts += 1
        current = await cms.get("counter")
        if attempts == 1:  # someone else writes between our read and our write
            await cms.patch("counter", {"data": {"other": "writer"}})
        current["data"]["n"] = str(int(current["data"]["n"]) + 1)
        return await cms.update(current)

    result = await retry_on_conflict(increment)
    assert attempts == 2
    assert result["data"] == {"n": "1", "other": "writer"}


# -- dry run ------------------------------------------------------------------------------------


async def test_dry_run_answers_without_storing(target: Target) -> None:
    cms = configmaps(target)
    answer = await cms.create(configmap("ghost", k="v"), dry_run=True)
    assert answer["metadata"]["name"] == "ghost"
    assert answer["metadata"]["uid"]
    assert "resourceVersion" not in answer["metadata"]
    with pytest.raises(NotFoundError):
        await cms.get("ghost")
    real = await cms.create(configmap("real", k="v"))
    changed = copy.deepcopy(real)
    changed["data"]["k"] = "changed"
    dry = await cms.update(changed, dry_run=True)
    assert dry["data"]["k"] == "changed"
    assert dry["metadata"]["resourceVersion"] == real["metadata"]["resourceVersion"]
    patched = await cms.patch("real", {"data": {"k": "patched"}}, dry_run=True)
    assert patched["data"]["k"] == "patched"
    await cms.delete("real", dry_run=True)
    applied = await cms.apply(
        {"metadata": {"name": "real"}, "data": {"k": "applied"}},
        field_manager="dry",
        force=True,
        dry_run=True,
    )
    assert applied["data"]["k"] == "applied"
    assert (await cms.get("real"))["data"] == {"k": "v"}


# -- status, generation, finalizers -------------------------------------------------------------


async def test_status_is_a_subresource_and_generation_follows_the_spec(target: Target) -> None:
    deployments = target.client.resource("deployments.apps", namespace=target.namespace)
    with_status = {**deployment("web"), "status": {"replicas": 5}}
    created = await deployments.create(with_status)
    assert created["metadata"]["generation"] == 1
    assert not (created.get("status") or {}).get("replicas")  # status is not written on create
    labelled = await deployments.patch("web", {"metadata": {"labels": {"tier": "fe"}}})
    assert labelled["metadata"]["generation"] == 1  # metadata is not the spec
    scaled = await deployments.patch("web", {"spec": {"replicas": 2}})
    assert scaled["metadata"]["generation"] == 2
    through_main = copy.deepcopy(scaled)
    through_main["status"] = {"replicas": 7}
    ignored = await deployments.update(through_main)
    assert not (ignored.get("status") or {}).get("replicas")
    assert ignored["metadata"]["resourceVersion"] == scaled["metadata"]["resourceVersion"]
    status_write = copy.deepcopy(ignored)
    status_write["status"] = {"replicas": 7, "observedGeneration": 2}
    status_write["spec"]["replicas"] = 9
    via_status = await deployments.update_status(status_write)
    assert via_status["status"]["replicas"] == 7
    assert via_status["spec"]["replicas"] == 2  # the status subresource writes only status
    assert via_status["metadata"]["generation"] == 2
    patched = await deployments.patch(
        "web", {"status": {"updatedReplicas": 1}}, subresource="status"
    )
    assert patched["status"]["updatedReplicas"] == 1
    stale = copy.deepcopy(status_write)
    stale["status"]["replicas"] = 1
    with pytest.raises(ConflictError):
        await deployments.update_status(stale)


async def test_finalizers_hold_a_deletion_until_they_are_gone(target: Target) -> None:
    cms = configmaps(target)
    created = await cms.create(
        {"metadata": {"name": "held", "finalizers": ["example.com/cleanup"]}, "data": {"k": "v"}}
    )
    async with cms.watch(
        ListOptions(
            resource_version=created["metadata"]["resourceVersion"],
            field_selector="metadata.name=held",
        )
    ) as events:
        marked = await cms.delete("held")
        assert marked["metadata"]["deletionTimestamp"]
        assert marked["metadata"]["finalizers"] == ["example.com/cleanup"]
        again = await cms.delete("held")  # deleting again changes nothing
        assert again["metadata"]["resourceVersion"] == marked["metadata"]["resourceVersion"]
        assert (await cms.get("held"))["metadata"]["deletionTimestamp"]
        modified = await next_event(events)
        assert modified.type == "MODIFIED"
        assert modified.object["metadata"]["deletionTimestamp"]
        with pytest.raises(InvalidError, match="no new finalizers"):
            await cms.patch("held", {"metadata": {"finalizers": ["example.com/cleanup", "x/y"]}})
        answer = await cms.patch("held", {"metadata": {"finalizers": None}})
        assert not answer["metadata"].get("finalizers")
        deleted = await next_event(events)
        assert deleted.type == "DELETED"
        assert int(deleted.object["metadata"]["resourceVersion"]) > int(
            modified.object["metadata"]["resourceVersion"]
        )
    with pytest.raises(NotFoundError):
        await cms.get("held")


# -- server-side apply ----------------------------------------------------------------------------


async def test_apply_creates_then_records_each_manager(target: Target) -> None:
    cms = configmaps(target)
    created = await cms.apply(
        {"metadata": {"name": "app", "labels": {"l": "1"}}, "data": {"x": "1", "y": "2"}},
        field_manager="mgr-a",
    )
    assert created["data"] == {"x": "1", "y": "2"}
    assert managers(created) == {
        ("mgr-a", "Apply"): {
            "f:data": {"f:x": {}, "f:y": {}},
            "f:metadata": {"f:labels": {"f:l": {}}},
        }
    }
    both = await cms.apply(
        {"metadata": {"name": "app"}, "data": {"x": "1", "z": "3"}}, field_manager="mgr-b"
    )  # the same value of a shared field is no conflict
    assert both["data"] == {"x": "1", "y": "2", "z": "3"}
    assert managers(both)[("mgr-b", "Apply")] == {"f:data": {"f:x": {}, "f:z": {}}}


async def test_apply_conflicts_name_the_fields_and_force_takes_them(target: Target) -> None:
    cms = configmaps(target)
    await cms.apply(
        {"metadata": {"name": "app", "labels": {"l": "1"}}, "data": {"x": "1", "y": "2"}},
        field_manager="mgr-a",
    )
    await cms.patch("app", {"data": {"w": "4"}}, field_manager="editor")
    change = {"metadata": {"name": "app", "labels": {"l": "2"}}, "data": {"x": "9", "w": "5"}}
    with pytest.raises(ConflictError) as info:
        await cms.apply(change, field_manager="mgr-b")
    err = info.value
    assert err.message.startswith("Apply failed with 3 conflicts:")
    assert sorted((c.field, c.message, c.reason) for c in err.causes) == [
        (".data.w", 'conflict with "editor" using v1', "FieldManagerConflict"),
        (".data.x", 'conflict with "mgr-a"', "FieldManagerConflict"),
        (".metadata.labels.l", 'conflict with "mgr-a"', "FieldManagerConflict"),
    ]
    assert (await cms.get("app"))["data"]["x"] == "1"  # nothing written
    forced = await cms.apply(change, field_manager="mgr-b", force=True)
    assert forced["data"] == {"x": "9", "y": "2", "w": "5"}
    owners = managers(forced)
    assert owners[("mgr-a", "Apply")] == {"f:data": {"f:y": {}}}
    assert ("editor", "Update") not in owners  # its only field changed hands
    assert owners[("mgr-b", "Apply")] == {
        "f:data": {"f:w": {}, "f:x": {}},
        "f:metadata": {"f:labels": {"f:l": {}}},
    }


async def test_apply_removes_what_its_manager_no_longer_applies(target: Target) -> None:
    cms = configmaps(target)
    await cms.apply(
        {"metadata": {"name": "app"}, "data": {"keep": "1", "drop": "2", "shared": "3"}},
        field_manager="mine",
    )
    await cms.apply({"metadata": {"name": "app"}, "data": {"shared": "3"}}, field_manager="theirs")
    pruned = await cms.apply(
        {"metadata": {"name": "app"}, "data": {"keep": "1"}}, field_manager="mine"
    )
    assert pruned["data"] == {"keep": "1", "shared": "3"}  # "shared" is still theirs


async def test_apply_lists_merge_by_key_and_status_applies_separately(target: Target) -> None:
    deployments = target.client.resource("deployments", namespace=target.namespace)
    base = deployment("web")
    await deployments.apply(base, field_manager="owner")
    sidecar = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "sidecar", "image": "registry.k8s.io/pause:3.9"}]}
            }
        },
    }
    merged = await deployments.apply(sidecar, field_manager="injector")
    names = [c["name"] for c in merged["spec"]["template"]["spec"]["containers"]]
    assert names == ["c", "sidecar"]  # containers are keyed by name: merged, not replaced
    assert managers(merged)[("injector", "Apply")] == {
        "f:spec": {
            "f:template": {
                "f:spec": {
                    "f:containers": {'k:{"name":"sidecar"}': {".": {}, "f:image": {}, "f:name": {}}}
                }
            }
        }
    }
    status = await deployments.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "status": {"observedGeneration": 1},
        },
        field_manager="status-writer",
        subresource="status",
    )
    assert status["status"]["observedGeneration"] == 1
    entry = next(e for e in status["metadata"]["managedFields"] if e["manager"] == "status-writer")
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {"f:status": {"f:observedGeneration": {}}}


async def test_apply_refuses_what_kube_refuses(target: Target) -> None:
    cms = configmaps(target)
    with pytest.raises(ValueError, match="field_manager"):
        await cms.apply(configmap("a"), field_manager="")
    with pytest.raises(InvalidError) as info:  # fieldManager is required by the server too
        await target.client.patch(
            f"/api/v1/namespaces/{target.namespace}/configmaps/a",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
            content_type="application/apply-patch+yaml",
        )
    assert info.value.causes[0].field == "fieldManager"
    with pytest.raises(InvalidError) as forced:  # force is only for apply
        await target.client.patch(
            f"/api/v1/namespaces/{target.namespace}/configmaps/a",
            {"data": {}},
            params={"force": True},
        )
    assert forced.value.causes[0].field == "force"
    await cms.apply(configmap("a", k="v"), field_manager="m")
    stale = {**configmap("a", k="w"), "metadata": {"name": "a", "resourceVersion": "1"}}
    with pytest.raises(ConflictError, match="has been modified"):
        await cms.apply(stale, field_manager="m")


# -- leases ---------------------------------------------------------------------------------------


async def test_leases_for_leader_election(target: Target) -> None:
    leases = target.client.resource("leases.coordination.k8s.io", namespace=target.namespace)
    lease = await leases.create(
        {
            "metadata": {"name": "controller"},
            "spec": {
                "holderIdentity": "a",
                "leaseDurationSeconds": 15,
                "acquireTime": "2026-01-01T00:00:00.000000Z",
                "renewTime": "2026-01-01T00:00:00.000000Z",
                "leaseTransitions": 0,
            },
        }
    )
    assert lease["kind"] == "Lease"
    assert "generation" not in lease["metadata"]
    renewed = copy.deepcopy(lease)
    renewed["spec"]["renewTime"] = "2026-01-01T00:00:10.000000Z"
    await leases.update(renewed)
    taken = copy.deepcopy(lease)  # a rival that read before the renewal
    taken["spec"]["holderIdentity"] = "b"
    with pytest.raises(ConflictError):
        await leases.update(taken)
    with pytest.raises(InvalidError) as info:
        await leases.patch("controller", {"spec": {"leaseDurationSeconds": 0}})
    assert info.value.causes[0].field == "spec.leaseDurationSeconds"
