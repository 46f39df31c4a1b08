"""Sample objects: :func:`sample_pod` (one realistic pod) and :func:`cluster_pods` (pods
that look like a small real cluster's, for ``--seed-pods``).

Private to :mod:`kubereflector.testing.apiserver` (which re-exports
:func:`sample_pod`). Deterministic: the same ``count`` gives the same pods (names,
labels, nodes, phases, container statuses), so the quick start and the examples
show the same thing on every run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ._timestamps import timestamp, wall_now

__all__ = ["NODES", "cluster_pods", "sample_pod"]

NODES: Final = ("node-a", "node-b", "node-c")


def sample_pod(
    name: str,
    namespace: str = "default",
    *,
    labels: Mapping[str, str] | None = None,
    node_name: str | None = None,
    annotation_bytes: int = 0,
) -> dict[str, Any]:
    """A realistic pod (about 2.5 KB of JSON; ``annotation_bytes`` adds an annotation
    of that size) for seeding and benchmarks."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": dict(labels) if labels is not None else {"app": "sample", "tier": "web"},
        "annotations": {"kubereflector.example/owner": "emulator"},
    }
    if annotation_bytes > 0:
        meta["annotations"]["kubereflector.example/padding"] = "x" * annotation_bytes
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": "registry.example/app:1.2.3",
                "args": ["--port=8080", "--log-level=info"],
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": f"SETTING_{i}", "value": f"value-{i}"} for i in range(8)],
                "resources": {
                    "requests": {"cpu": "100m", "memory": "128Mi"},
                    "limits": {"cpu": "500m", "memory": "256Mi"},
                },
                "readinessProbe": {
                    "httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"},
                    "periodSeconds": 10,
                },
                "volumeMounts": [{"name": "config", "mountPath": "/etc/app", "readOnly": True}],
                "terminationMessagePath": "/dev/termination-log",
                "imagePullPolicy": "IfNotPresent",
            }
        ],
        "volumes": [{"name": "config", "configMap": {"name": "app-config", "defaultMode": 420}}],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "schedulerName": "default-scheduler",
    }
    if node_name is not None:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


@dataclass(frozen=True, slots=True)
class _App:
    name: str
    namespace: str
    tier: str
    image: str
    containers: int = 1


_APPS: Final = (
    _App("web", "default", "frontend", "registry.example/web:1.4.2"),
    _App("api", "default", "backend", "registry.example/api:2.0.1", containers=2),
    _App("worker", "default", "backend", "registry.example/worker:2.0.1"),
    _App("redis", "default", "cache", "redis:7.2"),
    _App("coredns", "kube-system", "dns", "registry.k8s.io/coredns/coredns:v1.11.1"),
)
# One pod in so many is not Running (a realistic sprinkle of trouble).
_PENDING_EVERY: Final = 11
_CRASHING_EVERY: Final = 17


def _suffix(text: str, length: int) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    digest = hashlib.sha256(text.encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:length])


def cluster_pods(count: int) -> Iterator[dict[str, Any]]:
    """``count`` pods spread over a few apps (Deployment-style names and labels),
    scheduled on :data:`NODES`, mostly ``Running`` and ready, some ``Pending`` and
    some crash-looping with restarts."""
    started = timestamp(wall_now() - 3600)
    for i in range(count):
        app = _APPS[i % len(_APPS)]
        template_hash = _suffix(app.name, 10)
        name = f"{app.name}-{template_hash}-{_suffix(f'{app.name}-{i}', 5)}"
        labels = {"app": app.name, "tier": app.tier, "pod-template-hash": template_hash}
        node = NODES[i % len(NODES)]
        pod = sample_pod(name, app.namespace, labels=labels, node_name=node)
        first = pod["spec"]["containers"][0]
        first["name"], first["image"] = app.name, app.image
        for extra in range(1, app.containers):
            pod["spec"]["containers"].append(
                {"name": f"sidecar-{extra}", "image": "registry.example/proxy:1.0.0"}
            )
        pod["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"{app.name}-{template_hash}",
                "uid": _uid(f"{app.name}-{template_hash}"),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        pod["status"] = _status(i, pod["spec"]["containers"], node, started)
        if pod["status"]["phase"] == "Pending":
            del pod["spec"]["nodeName"]
        yield pod


def _uid(text: str) -> str:
    h = hashlib.sha256(text.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _status(i: int, containers: list[dict[str, Any]], node: str, started: str) -> dict[str, Any]:
    if i % _PENDING_EVERY == _PENDING_EVERY - 1:
        return {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 3 Insufficient cpu.",
                }
            ],
            "qosClass": "Burstable",
        }
    crashing = i % _CRASHING_EVERY == _CRASHING_EVERY - 1
    statuses = []
    for c, container in enumerate(containers):
        status: dict[str, Any] = {
            "name": container["name"],
            "image": container["image"],
            "imageID": f"{container['image']}@sha256:{_suffix(container['image'], 16)}",
            "containerID": f"containerd://{_suffix(f'{i}-{c}', 32)}",
            "started": True,
            "ready": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": started}},
        }
        if crashing and c == 0:
            status.update(
                ready=False,
                started=False,
                restartCount=7,
                state={"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}},
                lastState={"terminated": {"exitCode": 1, "reason": "Error"}},
            )
        statuses.append(status)
    ready = "False" if crashing else "True"
    return {
        "phase": "Running",
        "conditions": [
            {"type": "Initialized", "status": "True"},
            {"type": "Ready", "status": ready},
            {"type": "ContainersReady", "status": ready},
            {"type": "PodScheduled", "status": "True"},
        ],
        "hostIP": f"10.0.0.{NODES.index(node) + 10}",
        "podIP": f"10.244.{NODES.index(node)}.{i % 250 + 2}",
        "podIPs": [{"ip": f"10.244.{NODES.index(node)}.{i % 250 + 2}"}],
        "startTime": started,
        "containerStatuses": statuses,
        "qosClass": "Burstable",
    }
