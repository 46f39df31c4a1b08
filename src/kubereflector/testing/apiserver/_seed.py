"""Pods that look like a small real cluster's, for ``kubereflector emulator --seed-pods``.

Private to :mod:`kubereflector.testing`. Deterministic: the same ``count`` gives the
same pods (names, labels, nodes, phases, container statuses), so the quick start
and the examples show the same thing on every run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from . import sample_pod
from ._timestamps import timestamp, wall_now

__all__ = ["NODES", "cluster_pods"]

NODES: Final = ("node-a", "node-b", "node-c")


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
