"""Record the same kube-apiserver responses in JSON and in protobuf, as test fixtures.

    .venv/bin/python tools/record_protobuf_fixtures.py --kubeconfig PATH [--out tests/data/protobuf]

What it needs: a real kube-apiserver (the emulator serves no protobuf) and a kubeconfig with
cluster-admin rights. It is written for one WITHOUT controllers, scheduler or kubelet (the
project's ``~/kr-apiserver``): objects stay exactly as written, status included (written through
``/status``), and namespaces are finalized by this tool itself. On a full cluster the controllers
would rewrite what it writes, and the fixtures would be less rich, not wrong.

What it does, in order:

1. deletes what an earlier run left (the namespace ``kr-protobuf-fixtures`` with everything in
   it, and the cluster-scoped objects labelled ``kr-fixture=1``) and waits until it is gone;
2. creates that namespace and, in it and beside it, a handful of rich objects of 28 built-in
   kinds (``_namespaced_objects``, ``_cluster_objects``), all with ``?fieldManager=kr-fixtures``;
   writes statuses through ``/status``; server-side applies one Pod (an ``Apply`` managedFields
   entry); deletes one Pod that has a finalizer (so it keeps a ``deletionTimestamp``);
3. for each of 29 resources (Events through both their APIs), GETs the list of the namespace
   (cluster-scoped ones with ``labelSelector=kr-fixture=1``) as ``Accept: application/json``,
   then as ``Accept: application/vnd.kubernetes.protobuf`` with
   ``resourceVersion=<the JSON list's RV>&resourceVersionMatch=Exact``, so both bodies hold the
   same objects (checked: same names and resourceVersions in the same order), and writes
   ``NAME.json`` and ``NAME.pb``, the raw bodies byte for byte;
4. records Pod watches in both encodings: ``pods.watch`` (from the list's RV, both streams open
   before one Pod is added, modified twice and deleted), ``pods.watchlist``
   (``sendInitialEvents=true``), ``pods.expired`` (a resourceVersion too old for the watch
   cache) and ``pods.error`` (a plain 404 answer); the events other than BOOKMARKs must be the
   same in both encodings (for the watch-list, in any order);
5. writes ``index.json``: per fixture its files, request path and queries, the list's
   apiVersion/kind, each body's HTTP status and Content-Type, and for the watches the events
   seen (type, name, resourceVersion; a Status's code) in each encoding;
6. deletes everything it created (also when a step fails).

Re-running replaces every ``*.json`` and ``*.pb`` of the output folder (the README stays). The
bodies carry this run's uids, timestamps and resourceVersions; what the tool writes itself
(status times, Lease and Event times) is fixed. Only the standard library, aiohttp and
kubereflector's kubeconfig loader are used; the bearer token never leaves the request headers.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import ssl
import struct
import sys
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from kubereflector.client import load_config

NAMESPACE = "kr-protobuf-fixtures"
LABEL = "kr-fixture"
SELECTOR = f"{LABEL}=1"
MANAGER = "kr-fixtures"
JSON = "application/json"
PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
WATCH_SECONDS = 6  # timeoutSeconds of each recorded watch
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "protobuf"

# Times this tool writes (statuses, Leases, Events): fixed, so that only server-set ones vary.
T_START = "2024-05-06T07:00:00Z"
T_READY = "2024-05-06T07:08:09Z"
T_FINISHED = "2024-05-06T07:05:00Z"
T_MICRO = "2024-05-06T07:08:09.123456Z"
T_MICRO_LATER = "2024-05-06T07:09:10.654321Z"

Json = dict[str, Any]


# -- HTTP -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """One HTTP answer: status, Content-Type header (as sent) and the body, byte for byte."""

    status: int
    content_type: str
    body: bytes

    def json(self) -> Json:
        value = json.loads(self.body)
        if not isinstance(value, dict):
            raise SystemExit(f"expected a JSON object, got {self.body[:200]!r}")
        return value


class Api:
    """Requests against one server through one aiohttp session (not thread-safe)."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self._session = session

    async def call(
        self,
        method: str,
        path: str,
        *,
        query: str = "",
        body: Json | None = None,
        content_type: str = JSON,
        accept: str = JSON,
        expect: Sequence[int] = (200, 201),
    ) -> Answer:
        """``method path?query``; raises SystemExit naming the request unless the status is in
        ``expect``."""
        url = f"{path}?{query}" if query else path
        headers = {"Accept": accept}
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
        async with self._session.request(method, url, data=data, headers=headers) as response:
            answer = Answer(
                response.status, response.headers.get("Content-Type", ""), await response.read()
            )
        if answer.status not in expect:
            text = answer.body[:2000].decode(errors="replace")
            raise SystemExit(f"{method} {url}: HTTP {answer.status}: {text}")
        return answer

    async def open_stream(self, path: str, query: str, accept: str) -> aiohttp.ClientResponse:
        """Send a GET and return once its headers are in; the caller reads the body to its end
        (the response must be released by the caller)."""
        return await self._session.get(f"{path}?{query}", headers={"Accept": accept})


def _query(**params: str | int) -> str:
    return urllib.parse.urlencode({key: str(value) for key, value in params.items()})


# -- a wire-format walker: only what the checks and the summary need -------------------------


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, varint value or length-delimited bytes) of each field of a message."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
            yield number, value
        elif wire == 2:
            n, i = _varint(buf, i)
            yield number, buf[i : i + n]
            i += n
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise ValueError(f"wire type {wire} at byte {i}")


def _first(buf: bytes, number: int) -> bytes:
    return next((v for n, v in _fields(buf) if n == number and isinstance(v, bytes)), b"")


def _unknown(envelope: bytes) -> tuple[str, str, bytes]:
    """apiVersion, kind and raw message of a ``k8s\\0``-prefixed runtime.Unknown."""
    if not envelope.startswith(MAGIC):
        raise ValueError(f"no protobuf magic: {envelope[:8]!r}")
    unknown = envelope[len(MAGIC) :]
    type_meta = _first(unknown, 1)
    return _first(type_meta, 1).decode(), _first(type_meta, 2).decode(), _first(unknown, 2)


def _identity(message: bytes) -> tuple[str, str]:
    """Name and resourceVersion of an object (ObjectMeta is field 1 of every built-in kind)."""
    meta = _first(message, 1)
    return _first(meta, 1).decode(), _first(meta, 6).decode()


def _annotations(message: bytes) -> dict[str, str]:
    """The annotations of an object (ObjectMeta field 12: map entries of key 1, value 2)."""
    entries = (v for n, v in _fields(_first(message, 1)) if n == 12 and isinstance(v, bytes))
    return {_first(e, 1).decode(): _first(e, 2).decode() for e in entries}


def _pb_list(body: bytes) -> tuple[str, str, str, list[tuple[str, str]]]:
    """apiVersion, kind, the list's resourceVersion and each item's (name, resourceVersion)."""
    api_version, kind, raw = _unknown(body)
    list_rv = _first(_first(raw, 1), 2).decode()  # ListMeta.resourceVersion
    items = [_identity(v) for n, v in _fields(raw) if n == 2 and isinstance(v, bytes)]
    return api_version, kind, list_rv, items


def _marks(annotations: dict[str, str]) -> list[str]:
    """What a summary adds for a watch-list's last initial bookmark."""
    return [INITIAL_EVENTS_END] if annotations.get(INITIAL_EVENTS_END) == "true" else []


def _pb_event_summary(object_raw: bytes) -> list[Any]:
    api_version, kind, raw = _unknown(object_raw)
    if kind == "Status":
        code = next((v for n, v in _fields(raw) if n == 6 and isinstance(v, int)), 0)
        return [f"{api_version}/{kind}", code, _first(raw, 4).decode()]
    name, rv = _identity(raw)
    return [f"{api_version}/{kind}", name, rv, *_marks(_annotations(raw))]


def _pb_watch(stream: bytes) -> list[list[Any]]:
    """Each event of a protobuf watch stream: 4-byte big-endian length frames, each one a
    metav1.WatchEvent (type 1, object 2: a RawExtension holding a ``k8s\\0`` Unknown)."""
    events, i = [], 0
    while i < len(stream):
        (n,) = struct.unpack_from(">I", stream, i)
        frame = stream[i + 4 : i + 4 + n]
        i += 4 + n
        event_type = _first(frame, 1).decode()
        events.append([event_type, *_pb_event_summary(_first(_first(frame, 2), 1))])
    return events


def _json_event_summary(obj: Json) -> list[Any]:
    kind = f"{obj.get('apiVersion')}/{obj.get('kind')}"
    if obj.get("kind") == "Status":
        return [kind, obj.get("code"), obj.get("reason", "")]
    meta = obj.get("metadata", {})
    marks = _marks(meta.get("annotations", {}))
    return [kind, meta.get("name", ""), meta.get("resourceVersion", ""), *marks]


def _json_watch(stream: bytes) -> list[list[Any]]:
    """Each event of a JSON watch stream (one JSON object a line)."""
    events = []
    for line in stream.splitlines():
        if line.strip():
            event = json.loads(line)
            events.append([event["type"], *_json_event_summary(event["object"])])
    return events


def _events_of(answer: Answer, encoding: str) -> list[list[Any]]:
    """The events of a watch answer, or (an HTTP error) the single Status it carries."""
    if answer.status != 200:
        if encoding == "json":
            return [["HTTP", *_json_event_summary(answer.json())]]
        return [["HTTP", *_pb_event_summary(answer.body)]]
    return _json_watch(answer.body) if encoding == "json" else _pb_watch(answer.body)


# -- the objects ----------------------------------------------------------------------------


def _meta(name: str, **extra: Any) -> Json:
    return {"name": name, "labels": {LABEL: "1", "app": "fixture"}, **extra}


def _containers() -> list[Json]:
    """Two containers rich in the special types (IntOrString both ways, Quantities, pointers to
    zero and false) and one plain sidecar."""
    return [
        {
            "name": "web",
            "image": "registry.example/web:1.2.3",
            "command": ["/bin/web"],
            "args": ["--port=8080", "--verbose"],
            "workingDir": "/srv",
            "ports": [
                {"name": "http", "containerPort": 8080, "protocol": "TCP"},
                {"containerPort": 9090},
                {"name": "dns", "containerPort": 53, "protocol": "UDP", "hostPort": 5353},
            ],
            "env": [
                {"name": "PLAIN", "value": "value"},
                {"name": "EMPTY", "value": ""},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {
                    "name": "PASSWORD",
                    "valueFrom": {"secretKeyRef": {"name": "kr-fixture-secret", "key": "password"}},
                },
                {
                    "name": "OPTIONAL_SETTING",
                    "valueFrom": {
                        "configMapKeyRef": {
                            "name": "kr-fixture-config",
                            "key": "missing",
                            "optional": True,
                        }
                    },
                },
                {
                    "name": "CPU_LIMIT",
                    "valueFrom": {
                        "resourceFieldRef": {
                            "containerName": "web",
                            "resource": "limits.cpu",
                            "divisor": "1m",
                        }
                    },
                },
            ],
            "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": "kr-fixture-config"}}],
            "resources": {
                "requests": {"cpu": "100m", "memory": "1Gi", "ephemeral-storage": "0.5"},
                "limits": {"cpu": "1500m", "memory": "2Gi"},
            },
            "livenessProbe": {
                "httpGet": {
                    "path": "/healthz",
                    "port": 8080,
                    "scheme": "HTTP",
                    "httpHeaders": [{"name": "X-Probe", "value": "live"}],
                },
                "initialDelaySeconds": 0,
                "periodSeconds": 10,
                "timeoutSeconds": 1,
                "failureThreshold": 3,
                "successThreshold": 1,
                "terminationGracePeriodSeconds": 5,
            },
            "readinessProbe": {
                "httpGet": {"path": "/ready", "port": "http"},
                "periodSeconds": 5,
            },
            "startupProbe": {"tcpSocket": {"port": 8080}, "failureThreshold": 30},
            "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 1"]}}},
            "volumeMounts": [
                {"name": "scratch", "mountPath": "/scratch"},
                {"name": "config", "mountPath": "/etc/web", "readOnly": True},
                {"name": "bundle", "mountPath": "/var/bundle", "readOnly": True},
                {"name": "tls", "mountPath": "/etc/tls", "readOnly": True, "subPath": "tls.crt"},
            ],
            "securityContext": {
                "readOnlyRootFilesystem": True,
                "allowPrivilegeEscalation": False,
                "privileged": False,
                "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
            },
            "imagePullPolicy": "IfNotPresent",
        },
        {
            "name": "sidecar",
            "image": "registry.example/sidecar:0.1",
            "resources": {"requests": {"cpu": "2", "memory": "64Mi"}},
            "livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}},
            "readinessProbe": {"grpc": {"port": 9090}},
            "stdin": False,
            "tty": False,
        },
    ]


def _pod(name: str, replicaset_uid: str, *, node: str | None, finalizer: bool) -> Json:
    meta = _meta(
        name,
        annotations={"kr-fixtures.example.com/note": "a note", "kr-fixtures.example.com/empty": ""},
        ownerReferences=[
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "kr-fixture-rs",
                "uid": replicaset_uid,
                "controller": True,
                "blockOwnerDeletion": False,
            }
        ],
    )
    if finalizer:
        meta["finalizers"] = ["kr-fixtures.example.com/hold"]
    spec: Json = {
        "containers": _containers(),
        "initContainers": [
            {"name": "init", "image": "registry.example/init:1", "command": ["true"]}
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "activeDeadlineSeconds": 3600,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "kr-fixture-sa",
        "automountServiceAccountToken": False,
        "hostNetwork": False,
        "hostPID": False,
        "enableServiceLinks": False,
        "nodeSelector": {"kubernetes.io/os": "linux", "disk": "ssd"},
        "priorityClassName": "kr-fixture-priority",
        "securityContext": {
            "runAsNonRoot": False,
            "runAsUser": 0,
            "runAsGroup": 0,
            "fsGroup": 2000,
            "supplementalGroups": [0, 3000],
            "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"}],
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumes": [
            {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
            {
                "name": "config",
                "configMap": {
                    "name": "kr-fixture-config",
                    "items": [{"key": "app.properties", "path": "app.properties", "mode": 0o400}],
                    "defaultMode": 0o644,
                },
            },
            {
                "name": "bundle",
                "projected": {
                    "defaultMode": 0o440,
                    "sources": [
                        {
                            "serviceAccountToken": {
                                "audience": "kr-fixtures",
                                "expirationSeconds": 3600,
                                "path": "token",
                            }
                        },
                        {"configMap": {"name": "kr-fixture-config", "optional": False}},
                        {
                            "downwardAPI": {
                                "items": [
                                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}
                                ]
                            }
                        },
                    ],
                },
            },
            {"name": "tls", "secret": {"secretName": "kr-fixture-secret", "optional": True}},
            {"name": "claim", "persistentVolumeClaim": {"claimName": "kr-fixture-pvc"}},
        ],
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 0,
            },
            {"key": "dedicated", "operator": "Equal", "value": "fixtures", "effect": "NoSchedule"},
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "disk", "operator": "In", "values": ["ssd", "nvme"]}
                            ]
                        }
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]},
                    }
                ],
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app": "fixture"}},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            },
        },
        "hostAliases": [{"ip": "10.1.2.3", "hostnames": ["fixture.local"]}],
        "dnsConfig": {"nameservers": ["10.0.0.10"], "options": [{"name": "ndots", "value": "2"}]},
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _pod_status(ip: str) -> Json:
    return {
        "status": {
            "phase": "Running",
            "conditions": [
                {
                    "type": "Initialized",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": T_START,
                },
                {
                    "type": "Ready",
                    "status": "False",
                    "lastProbeTime": None,
                    "lastTransitionTime": T_READY,
                    "reason": "ContainersNotReady",
                    "message": "containers with unready status: [web]",
                },
            ],
            "hostIP": "192.168.7.1",
            "podIP": ip,
            "podIPs": [{"ip": ip}, {"ip": "fd00::" + ip.rsplit(".", 1)[1]}],
            "startTime": T_START,
            "initContainerStatuses": [
                {
                    "name": "init",
                    "image": "registry.example/init:1",
                    "imageID": "registry.example/init@sha256:" + "1" * 64,
                    "containerID": "containerd://" + "a" * 64,
                    "ready": True,
                    "restartCount": 0,
                    "started": False,
                    "state": {
                        "terminated": {
                            "exitCode": 0,
                            "reason": "Completed",
                            "startedAt": T_START,
                            "finishedAt": T_START,
                        }
                    },
                    "lastState": {},
                }
            ],
            "containerStatuses": [
                {
                    "name": "web",
                    "image": "registry.example/web:1.2.3",
                    "imageID": "registry.example/web@sha256:" + "2" * 64,
                    "containerID": "containerd://" + "b" * 64,
                    "ready": False,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": T_READY}},
                    "lastState": {
                        "terminated": {
                            "exitCode": 0,
                            "reason": "Completed",
                            "startedAt": T_START,
                            "finishedAt": T_FINISHED,
                            "containerID": "containerd://" + "c" * 64,
                        }
                    },
                },
                {
                    "name": "sidecar",
                    "image": "registry.example/sidecar:0.1",
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                    "lastState": {},
                },
            ],
        }
    }


def _template(app: str, restart: str = "Always") -> Json:
    return {
        "metadata": {"labels": {"app": app}, "annotations": {"kr-fixtures.example.com/t": "1"}},
        "spec": {
            "restartPolicy": restart,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/main:1",
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "resources": {"requests": {"cpu": "250m", "memory": "128Mi"}},
                }
            ],
        },
    }


def _selector(app: str) -> Json:
    return {"matchLabels": {"app": app}}


def _namespaced_objects(replicaset_uid: str) -> list[tuple[str, Json]]:
    """(collection path, object) of everything created in the namespace after the ReplicaSet
    (whose uid the Pods' ownerReferences name), Pods last."""
    ns = NAMESPACE
    core, apps = f"/api/v1/namespaces/{ns}", f"/apis/apps/v1/namespaces/{ns}"
    return [
        (
            f"{core}/serviceaccounts",
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": _meta("kr-fixture-sa"),
                "automountServiceAccountToken": False,
                "imagePullSecrets": [{"name": "kr-fixture-pull"}],
                "secrets": [{"name": "kr-fixture-secret"}],
            },
        ),
        (
            f"{core}/configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": _meta("kr-fixture-config"),
                "data": {
                    "app.properties": "a=1\nb=2\n",
                    "empty": "",
                    "unicode": "h\u00e9llo \u2713",
                },
                "binaryData": {"blob.bin": base64.b64encode(bytes(range(16))).decode()},
            },
        ),
        (
            f"{core}/configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": _meta("kr-fixture-immutable"),
                "immutable": True,
                "data": {"k": "v"},
            },
        ),
        (
            f"{core}/secrets",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": _meta("kr-fixture-secret"),
                "type": "Opaque",
                "data": {"password": base64.b64encode(b"not-a-real-password").decode()},
                "stringData": {"username": "fixture-user"},
            },
        ),
        (
            f"{core}/services",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": _meta("kr-fixture-svc"),
                "spec": {
                    "type": "NodePort",
                    "selector": {"app": "fixture"},
                    "ports": [
                        {"name": "http", "port": 80, "targetPort": 8080, "nodePort": 31777},
                        {"name": "metrics", "port": 9090, "targetPort": "metrics"},
                        {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 5353},
                    ],
                    "sessionAffinity": "ClientIP",
                    "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}},
                    "externalTrafficPolicy": "Local",
                    "publishNotReadyAddresses": False,
                },
            },
        ),
        (
            f"{core}/services",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": _meta("kr-fixture-headless"),
                "spec": {"clusterIP": "None", "ports": [{"port": 5432, "targetPort": 5432}]},
            },
        ),
        (
            f"{core}/endpoints",
            {
                "apiVersion": "v1",
                "kind": "Endpoints",
                "metadata": _meta("kr-fixture-svc"),
                "subsets": [
                    {
                        "addresses": [
                            {
                                "ip": "10.244.1.10",
                                "nodeName": "kr-fixture-node",
                                "targetRef": {
                                    "kind": "Pod",
                                    "namespace": ns,
                                    "name": "kr-fixture-pod-a",
                                },
                            }
                        ],
                        "notReadyAddresses": [{"ip": "10.244.1.11", "hostname": "b"}],
                        "ports": [
                            {"name": "http", "port": 8080, "protocol": "TCP"},
                            {"name": "dns", "port": 5353, "protocol": "UDP"},
                        ],
                    }
                ],
            },
        ),
        (
            f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": _meta(
                    "kr-fixture-svc-abcde",
                    labels={LABEL: "1", "kubernetes.io/service-name": "kr-fixture-svc"},
                ),
                "addressType": "IPv4",
                "endpoints": [
                    {
                        "addresses": ["10.244.1.10"],
                        "conditions": {"ready": True, "serving": True, "terminating": False},
                        "nodeName": "kr-fixture-node",
                        "zone": "zone-a",
                        "hints": {"forZones": [{"name": "zone-a"}]},
                        "targetRef": {"kind": "Pod", "namespace": ns, "name": "kr-fixture-pod-a"},
                    },
                    {"addresses": ["10.244.1.11"], "conditions": {"ready": False}},
                ],
                "ports": [
                    {"name": "http", "port": 8080, "protocol": "TCP", "appProtocol": "http"},
                    {"name": "", "port": 9090},
                ],
            },
        ),
        (
            f"{core}/persistentvolumeclaims",
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": _meta("kr-fixture-pvc"),
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "kr-fixture-sc",
                    "volumeMode": "Filesystem",
                    "resources": {"requests": {"storage": "1Gi"}, "limits": {"storage": "2Gi"}},
                    "selector": {
                        "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]
                    },
                },
            },
        ),
        (
            f"{apps}/deployments",
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": _meta("kr-fixture-deploy"),
                "spec": {
                    "replicas": 0,
                    "revisionHistoryLimit": 3,
                    "progressDeadlineSeconds": 600,
                    "minReadySeconds": 0,
                    "paused": False,
                    "selector": _selector("deploy"),
                    "strategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1},
                    },
                    "template": _template("deploy"),
                },
            },
        ),
        (
            f"{apps}/deployments",
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": _meta("kr-fixture-recreate"),
                "spec": {
                    "replicas": 2,
                    "selector": _selector("recreate"),
                    "strategy": {"type": "Recreate"},
                    "template": _template("recreate"),
                },
            },
        ),
        (
            f"{apps}/statefulsets",
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": _meta("kr-fixture-sts"),
                "spec": {
                    "replicas": 1,
                    "serviceName": "kr-fixture-headless",
                    "selector": _selector("sts"),
                    "podManagementPolicy": "Parallel",
                    "updateStrategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"partition": 0, "maxUnavailable": "50%"},
                    },
                    "persistentVolumeClaimRetentionPolicy": {
                        "whenDeleted": "Retain",
                        "whenScaled": "Delete",
                    },
                    "template": _template("sts"),
                    "volumeClaimTemplates": [
                        {
                            "metadata": {"name": "data", "labels": {"app": "sts"}},
                            "spec": {
                                "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "10Gi"}},
                            },
                        }
                    ],
                },
            },
        ),
        (
            f"{apps}/daemonsets",
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": _meta("kr-fixture-ds"),
                "spec": {
                    "selector": _selector("ds"),
                    "updateStrategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"maxUnavailable": "10%", "maxSurge": 0},
                    },
                    "template": _template("ds"),
                },
            },
        ),
        (
            f"{apps}/controllerrevisions",
            {
                "apiVersion": "apps/v1",
                "kind": "ControllerRevision",
                "metadata": _meta("kr-fixture-sts-7d9f8"),
                "revision": 1,
                "data": {
                    "spec": {
                        "template": {
                            "$patch": "replace",
                            "metadata": {"labels": {"app": "sts"}},
                            "spec": {"containers": [{"name": "main", "image": "main:1"}]},
                        },
                        "list": [1, 2.5, None, True, "x"],
                    }
                },
            },
        ),
        (
            f"/apis/batch/v1/namespaces/{ns}/jobs",
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": _meta("kr-fixture-job"),
                "spec": {
                    "parallelism": 0,
                    "backoffLimit": 2,
                    "activeDeadlineSeconds": 600,
                    "ttlSecondsAfterFinished": 0,
                    "completionMode": "NonIndexed",
                    "template": _template("job", restart="Never"),
                },
            },
        ),
        (
            f"/apis/batch/v1/namespaces/{ns}/cronjobs",
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "metadata": _meta("kr-fixture-cron"),
                "spec": {
                    "schedule": "*/5 * * * *",
                    "timeZone": "Etc/UTC",
                    "concurrencyPolicy": "Forbid",
                    "suspend": True,
                    "startingDeadlineSeconds": 60,
                    "successfulJobsHistoryLimit": 0,
                    "failedJobsHistoryLimit": 1,
                    "jobTemplate": {
                        "metadata": {"labels": {"app": "cron"}},
                        "spec": {
                            "backoffLimit": 0,
                            "template": _template("cron", restart="OnFailure"),
                        },
                    },
                },
            },
        ),
        (
            f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers",
            {
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": _meta("kr-fixture-hpa"),
                "spec": {
                    "scaleTargetRef": {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": "kr-fixture-deploy",
                    },
                    "minReplicas": 1,
                    "maxReplicas": 5,
                    "metrics": [
                        {
                            "type": "Resource",
                            "resource": {
                                "name": "cpu",
                                "target": {"type": "Utilization", "averageUtilization": 60},
                            },
                        },
                        {
                            "type": "Pods",
                            "pods": {
                                "metric": {
                                    "name": "packets-per-second",
                                    "selector": {"matchLabels": {"verb": "GET"}},
                                },
                                "target": {"type": "AverageValue", "averageValue": "1k"},
                            },
                        },
                    ],
                    "behavior": {
                        "scaleDown": {
                            "stabilizationWindowSeconds": 0,
                            "selectPolicy": "Min",
                            "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}],
                        }
                    },
                },
            },
        ),
        (
            f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": _meta("kr-fixture-pdb"),
                "spec": {
                    "minAvailable": "50%",
                    "selector": {"matchLabels": {"app": "fixture"}},
                    "unhealthyPodEvictionPolicy": "AlwaysAllow",
                },
            },
        ),
        (
            f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": _meta("kr-fixture-netpol"),
                "spec": {
                    "podSelector": {},
                    "policyTypes": ["Ingress", "Egress"],
                    "ingress": [
                        {
                            "from": [
                                {"podSelector": {"matchLabels": {"role": "client"}}},
                                {"namespaceSelector": {"matchLabels": {"team": "a"}}},
                                {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}},
                            ],
                            "ports": [
                                {"protocol": "TCP", "port": 80},
                                {"protocol": "TCP", "port": "http"},
                                {"protocol": "TCP", "port": 32000, "endPort": 32768},
                            ],
                        }
                    ],
                    "egress": [{}],
                },
            },
        ),
        (
            f"/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses",
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": _meta("kr-fixture-ingress"),
                "spec": {
                    "ingressClassName": "nginx",
                    "tls": [{"hosts": ["fixture.example.com"], "secretName": "kr-fixture-tls"}],
                    "defaultBackend": {
                        "service": {"name": "kr-fixture-svc", "port": {"number": 80}}
                    },
                    "rules": [
                        {
                            "host": "fixture.example.com",
                            "http": {
                                "paths": [
                                    {
                                        "path": "/",
                                        "pathType": "Prefix",
                                        "backend": {
                                            "service": {
                                                "name": "kr-fixture-svc",
                                                "port": {"number": 80},
                                            }
                                        },
                                    },
                                    {
                                        "path": "/api",
                                        "pathType": "Exact",
                                        "backend": {
                                            "service": {
                                                "name": "kr-fixture-svc",
                                                "port": {"name": "http"},
                                            }
                                        },
                                    },
                                ]
                            },
                        }
                    ],
                },
            },
        ),
        (
            f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": _meta("kr-fixture-lease"),
                "spec": {
                    "holderIdentity": "kr-fixtures-holder_1234",
                    "leaseDurationSeconds": 15,
                    "acquireTime": T_MICRO,
                    "renewTime": T_MICRO_LATER,
                    "leaseTransitions": 0,
                },
            },
        ),
        (
            f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": _meta("kr-fixture-lease-empty"),
                "spec": {},
            },
        ),
        (
            f"{core}/events",
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": _meta("kr-fixture-pod-a.17c9a1b2c3d4e5f6"),
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "namespace": ns,
                    "name": "kr-fixture-pod-a",
                    "fieldPath": "spec.containers{web}",
                },
                "reason": "BackOff",
                "message": "Back-off restarting failed container",
                "source": {"component": "kubelet", "host": "kr-fixture-node"},
                "firstTimestamp": T_START,
                "lastTimestamp": T_READY,
                "count": 7,
                "type": "Warning",
            },
        ),
        (
            f"{core}/events",
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": _meta("kr-fixture-pod-b.17c9a1b2c3d4e5f7"),
                "involvedObject": {"kind": "Pod", "namespace": ns, "name": "kr-fixture-pod-b"},
                "reason": "Pulled",
                "message": "Container image already present",
                "eventTime": T_MICRO,
                "series": {"count": 2, "lastObservedTime": T_MICRO_LATER},
                "reportingComponent": "kr-fixtures.example.com/recorder",
                "reportingInstance": "recorder-1",
                "action": "Pull",
                "type": "Normal",
                "count": 0,
            },
        ),
        (
            f"/apis/events.k8s.io/v1/namespaces/{ns}/events",
            {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": _meta("kr-fixture-deploy.17c9a1b2c3d4e5f8"),
                "eventTime": T_MICRO,
                "series": {"count": 3, "lastObservedTime": T_MICRO_LATER},
                "reportingController": "kr-fixtures.example.com/controller",
                "reportingInstance": "controller-0",
                "action": "Scale",
                "reason": "ScalingReplicaSet",
                "regarding": {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "namespace": ns,
                    "name": "kr-fixture-deploy",
                },
                "related": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "kr-fixture-rs"},
                "note": "Scaled up replica set kr-fixture-rs to 2",
                "type": "Normal",
            },
        ),
        (
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": _meta("kr-fixture-role"),
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["pods", "pods/log"],
                        "verbs": ["get", "list"],
                    },
                    {
                        "apiGroups": ["apps"],
                        "resources": ["deployments"],
                        "resourceNames": ["kr-fixture-deploy"],
                        "verbs": ["get", "patch"],
                    },
                ],
            },
        ),
        (
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": _meta("kr-fixture-binding"),
                "subjects": [
                    {"kind": "ServiceAccount", "name": "kr-fixture-sa", "namespace": ns},
                    {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
                    {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"},
                ],
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "kr-fixture-role",
                },
            },
        ),
        (
            f"{core}/pods",
            _pod("kr-fixture-pod-a", replicaset_uid, node="kr-fixture-node", finalizer=False),
        ),
        (f"{core}/pods", _pod("kr-fixture-pod-b", replicaset_uid, node=None, finalizer=False)),
        (
            f"{core}/pods",
            _pod("kr-fixture-pod-deleting", replicaset_uid, node=None, finalizer=True),
        ),
    ]


def _replicaset() -> Json:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": _meta(
            "kr-fixture-rs",
            annotations={"deployment.kubernetes.io/revision": "1"},
        ),
        "spec": {
            "replicas": 2,
            "minReadySeconds": 5,
            "selector": {
                "matchLabels": {"app": "fixture"},
                "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}],
            },
            "template": {
                "metadata": {"labels": {"app": "fixture"}},
                "spec": _template("x")["spec"],
            },
        },
    }


def _cluster_objects() -> list[tuple[str, Json]]:
    """(collection path, object) of the cluster-scoped objects, each labelled kr-fixture=1."""
    return [
        (
            "/api/v1/nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": _meta(
                    "kr-fixture-node",
                    labels={LABEL: "1", "kubernetes.io/os": "linux", "disk": "ssd"},
                ),
                "spec": {
                    "podCIDR": "10.244.1.0/24",
                    "podCIDRs": ["10.244.1.0/24"],
                    "providerID": "fixture://kr-fixture-node",
                    "unschedulable": True,
                    "taints": [
                        {"key": "dedicated", "value": "fixtures", "effect": "NoSchedule"},
                        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                    ],
                },
            },
        ),
        (
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": _meta("kr-fixture-priority"),
                "value": 1000,
                "globalDefault": False,
                "preemptionPolicy": "Never",
                "description": "fixtures for the protobuf decoder",
            },
        ),
        (
            "/apis/storage.k8s.io/v1/storageclasses",
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": _meta("kr-fixture-sc"),
                "provisioner": "kr-fixtures.example.com/fake",
                "parameters": {"type": "fast", "iopsPerGB": "10", "empty": ""},
                "reclaimPolicy": "Retain",
                "allowVolumeExpansion": False,
                "volumeBindingMode": "WaitForFirstConsumer",
                "mountOptions": ["noatime"],
                "allowedTopologies": [
                    {
                        "matchLabelExpressions": [
                            {"key": "topology.kubernetes.io/zone", "values": ["zone-a"]}
                        ]
                    }
                ],
            },
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": _meta("kr-fixture-webhook"),
                "webhooks": [
                    {
                        # Nothing is ever sent to it: its one rule names a group no server
                        # serves, the selector matches no object, and it fails open.
                        "name": "never-called.kr-fixtures.example.com",
                        "clientConfig": {"url": "https://127.0.0.1:1/never-called"},
                        "rules": [
                            {
                                "apiGroups": ["kr-fixtures.example.com"],
                                "apiVersions": ["v1"],
                                "operations": ["CREATE", "UPDATE"],
                                "resources": ["nothings"],
                                "scope": "Namespaced",
                            }
                        ],
                        "objectSelector": {"matchLabels": {"kr-fixture-never": "true"}},
                        "failurePolicy": "Ignore",
                        "matchPolicy": "Exact",
                        "sideEffects": "None",
                        "timeoutSeconds": 1,
                        "admissionReviewVersions": ["v1"],
                    }
                ],
            },
        ),
    ]


# Status written through /status (merge patches): (object path, patch).
def _statuses() -> list[tuple[str, Json]]:
    ns = NAMESPACE
    return [
        (f"/api/v1/namespaces/{ns}/pods/kr-fixture-pod-a", _pod_status("10.244.1.10")),
        (f"/api/v1/namespaces/{ns}/pods/kr-fixture-pod-b", _pod_status("10.244.1.11")),
        (
            "/api/v1/nodes/kr-fixture-node",
            {
                "status": {
                    "capacity": {
                        "cpu": "4",
                        "memory": "16Gi",
                        "pods": "110",
                        "ephemeral-storage": "100Gi",
                        "hugepages-2Mi": "0",
                    },
                    "allocatable": {
                        "cpu": "3800m",
                        "memory": "15.5Gi",
                        "pods": "110",
                        "ephemeral-storage": "92Gi",
                        "hugepages-2Mi": "0",
                    },
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "lastHeartbeatTime": T_READY,
                            "lastTransitionTime": T_START,
                            "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                        },
                        {
                            "type": "MemoryPressure",
                            "status": "False",
                            "lastHeartbeatTime": T_READY,
                            "lastTransitionTime": T_START,
                            "reason": "KubeletHasSufficientMemory",
                            "message": "kubelet has sufficient memory available",
                        },
                    ],
                    "addresses": [
                        {"type": "InternalIP", "address": "192.168.7.1"},
                        {"type": "Hostname", "address": "kr-fixture-node"},
                    ],
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                    "nodeInfo": {
                        "machineID": "0" * 32,
                        "systemUUID": "00000000-0000-0000-0000-000000000000",
                        "bootID": "11111111-1111-1111-1111-111111111111",
                        "kernelVersion": "6.1.0",
                        "osImage": "Fixture Linux",
                        "containerRuntimeVersion": "containerd://1.7.0",
                        "kubeletVersion": "v1.28.7",
                        "kubeProxyVersion": "v1.28.7",
                        "operatingSystem": "linux",
                        "architecture": "amd64",
                    },
                    "images": [
                        {"names": ["registry.example/web:1.2.3"], "sizeBytes": 123456789},
                        {"names": ["registry.example/sidecar:0.1"], "sizeBytes": 0},
                    ],
                }
            },
        ),
        (
            f"/apis/apps/v1/namespaces/{ns}/deployments/kr-fixture-deploy",
            {
                "status": {
                    "observedGeneration": 1,
                    "replicas": 0,
                    "conditions": [
                        {
                            "type": "Available",
                            "status": "True",
                            "lastUpdateTime": T_READY,
                            "lastTransitionTime": T_START,
                            "reason": "MinimumReplicasAvailable",
                            "message": "Deployment has minimum availability.",
                        }
                    ],
                }
            },
        ),
        (
            f"/api/v1/namespaces/{ns}/persistentvolumeclaims/kr-fixture-pvc",
            {
                "status": {
                    "phase": "Bound",
                    "accessModes": ["ReadWriteOnce"],
                    "capacity": {"storage": "1Gi"},
                }
            },
        ),
        (
            f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers/kr-fixture-hpa",
            {
                "status": {
                    "currentReplicas": 1,
                    "desiredReplicas": 1,
                    "lastScaleTime": T_READY,
                    "currentMetrics": [
                        {
                            "type": "Resource",
                            "resource": {
                                "name": "cpu",
                                "current": {"averageUtilization": 0, "averageValue": "1m"},
                            },
                        }
                    ],
                    "conditions": [
                        {
                            "type": "AbleToScale",
                            "status": "True",
                            "lastTransitionTime": T_START,
                            "reason": "ReadyForNewScale",
                        }
                    ],
                }
            },
        ),
        (
            f"/apis/batch/v1/namespaces/{ns}/jobs/kr-fixture-job",
            {"status": {"startTime": T_START, "active": 0, "ready": 0, "failed": 1}},
        ),
    ]


# Lists recorded: (fixture name, collection path, cluster-scoped).
def _lists() -> list[tuple[str, str, bool]]:
    ns = NAMESPACE
    core = f"/api/v1/namespaces/{ns}"
    namespaced = [
        ("pods", f"{core}/pods"),
        ("services", f"{core}/services"),
        ("configmaps", f"{core}/configmaps"),
        ("secrets", f"{core}/secrets"),
        ("serviceaccounts", f"{core}/serviceaccounts"),
        ("events", f"{core}/events"),
        ("endpoints", f"{core}/endpoints"),
        ("persistentvolumeclaims", f"{core}/persistentvolumeclaims"),
        ("deployments.apps", f"/apis/apps/v1/namespaces/{ns}/deployments"),
        ("statefulsets.apps", f"/apis/apps/v1/namespaces/{ns}/statefulsets"),
        ("daemonsets.apps", f"/apis/apps/v1/namespaces/{ns}/daemonsets"),
        ("replicasets.apps", f"/apis/apps/v1/namespaces/{ns}/replicasets"),
        ("controllerrevisions.apps", f"/apis/apps/v1/namespaces/{ns}/controllerrevisions"),
        ("jobs.batch", f"/apis/batch/v1/namespaces/{ns}/jobs"),
        ("cronjobs.batch", f"/apis/batch/v1/namespaces/{ns}/cronjobs"),
        (
            "horizontalpodautoscalers.autoscaling",
            f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers",
        ),
        ("poddisruptionbudgets.policy", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"),
        (
            "networkpolicies.networking.k8s.io",
            f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
        ),
        ("ingresses.networking.k8s.io", f"/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses"),
        (
            "endpointslices.discovery.k8s.io",
            f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
        ),
        ("leases.coordination.k8s.io", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"),
        ("events.events.k8s.io", f"/apis/events.k8s.io/v1/namespaces/{ns}/events"),
        (
            "roles.rbac.authorization.k8s.io",
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
        ),
        (
            "rolebindings.rbac.authorization.k8s.io",
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
        ),
    ]
    cluster = [
        ("namespaces", "/api/v1/namespaces"),
        ("nodes", "/api/v1/nodes"),
        ("priorityclasses.scheduling.k8s.io", "/apis/scheduling.k8s.io/v1/priorityclasses"),
        ("storageclasses.storage.k8s.io", "/apis/storage.k8s.io/v1/storageclasses"),
        (
            "validatingwebhookconfigurations.admissionregistration.k8s.io",
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        ),
    ]
    return [(n, p, False) for n, p in namespaced] + [(n, p, True) for n, p in cluster]


# -- setup and teardown ---------------------------------------------------------------------


async def _delete_item(api: Api, item_path: str, finalizers: bool) -> None:
    """Delete one object for good, as no controller will finish it: drop its finalizers (if it
    has any), then delete it without grace and without an orphan finalizer (404s are fine)."""
    if finalizers:
        await api.call(
            "PATCH",
            item_path,
            body={"metadata": {"finalizers": None}},
            content_type="application/merge-patch+json",
            expect=(200, 404),
        )
    await api.call(
        "DELETE",
        item_path,
        query=_query(gracePeriodSeconds=0, propagationPolicy="Background"),
        expect=(200, 202, 404),
    )


async def _items(api: Api, collection: str, selector: str = "") -> list[tuple[str, bool]]:
    """(name, has finalizers) of each object of a collection."""
    query = _query(labelSelector=selector) if selector else ""
    answer = await api.call("GET", collection, query=query, expect=(200, 404))
    if answer.status == 404:
        return []
    return [
        (item["metadata"]["name"], bool(item["metadata"].get("finalizers")))
        for item in answer.json()["items"]
    ]


async def _remove_all(api: Api) -> None:
    """Delete the namespace with everything in it and the labelled cluster-scoped objects; return
    once they are gone. Namespaced objects go first: with no garbage collector, an object left in
    a deleted namespace would reappear in the next run's namespace of the same name."""
    ns_path = f"/api/v1/namespaces/{NAMESPACE}"
    exists = (await api.call("GET", ns_path, expect=(200, 404))).status == 200
    if exists:
        for _, collection, cluster in _lists():
            if not cluster:
                for name, finalizers in await _items(api, collection):
                    await _delete_item(api, f"{collection}/{name}", finalizers)
        await api.call("DELETE", ns_path, expect=(200, 202, 404))
        # No namespace controller: empty spec.finalizers ourselves, then delete again.
        namespace = (await api.call("GET", ns_path, expect=(200, 404))).json()
        if "metadata" in namespace:
            namespace["spec"] = {"finalizers": []}
            await api.call("PUT", f"{ns_path}/finalize", body=namespace, expect=(200, 404, 409))
            await api.call("DELETE", ns_path, expect=(200, 202, 404, 409))
    for _, collection, cluster in _lists():
        if cluster and not collection.endswith("/namespaces"):
            for name, finalizers in await _items(api, collection, SELECTOR):
                await _delete_item(api, f"{collection}/{name}", finalizers)
    deadline = time.monotonic() + 60
    while (await api.call("GET", ns_path, expect=(200, 404))).status != 404:
        if time.monotonic() > deadline:
            raise SystemExit(f"namespace {NAMESPACE} still exists after 60 s")
        await asyncio.sleep(0.2)


async def _create(api: Api, collection: str, obj: Json) -> Json:
    answer = await api.call("POST", collection, query=_query(fieldManager=MANAGER), body=obj)
    return answer.json()


async def _populate(api: Api) -> None:
    """Create every object, write the statuses, apply one Pod, delete the finalized Pod."""
    ns = NAMESPACE
    await _create(
        api,
        "/api/v1/namespaces",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": _meta(ns, annotations={"kr-fixtures.example.com/purpose": "protobuf"}),
        },
    )
    for collection, obj in _cluster_objects():
        await _create(api, collection, obj)
    rs = await _create(api, f"/apis/apps/v1/namespaces/{ns}/replicasets", _replicaset())
    for collection, obj in _namespaced_objects(rs["metadata"]["uid"]):
        await _create(api, collection, obj)
    for path, patch in _statuses():
        await api.call(
            "PATCH",
            f"{path}/status",
            query=_query(fieldManager=f"{MANAGER}-status"),
            body=patch,
            content_type="application/merge-patch+json",
        )
    # Server-side apply: an Apply entry in managedFields beside the Update ones.
    await api.call(
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/kr-fixture-pod-a",
        query=_query(fieldManager=f"{MANAGER}-apply", force="true"),
        body={
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "kr-fixture-pod-a",
                "labels": {"applied": "yes"},
                "annotations": {"kr-fixtures.example.com/applied": "true"},
            },
        },
        content_type="application/apply-patch+yaml",
    )
    # Deleted while it has a finalizer: it stays, with deletionTimestamp and
    # deletionGracePeriodSeconds (0: it was never scheduled).
    await api.call(
        "DELETE", f"/api/v1/namespaces/{ns}/pods/kr-fixture-pod-deleting", expect=(200, 202)
    )


# -- recording ------------------------------------------------------------------------------


@dataclass
class Fixture:
    """One entry of index.json."""

    name: str
    kind: str  # list | watch | watchlist | expired | error
    path: str
    bodies: dict[str, Json] = field(default_factory=dict)  # "json" / "protobuf" -> details
    extra: Json = field(default_factory=dict)

    def as_json(self) -> Json:
        return {
            "name": self.name,
            "type": self.kind,
            "path": self.path,
            **self.extra,
            **self.bodies,
        }


def _body_entry(name: str, suffix: str, query: str, answer: Answer) -> Json:
    return {
        "file": f"{name}.{suffix}",
        "query": query,
        "status": answer.status,
        "contentType": answer.content_type,
        "bytes": len(answer.body),
    }


class Recorder:
    """Writes fixture files into ``out`` and collects their index entries."""

    def __init__(self, api: Api, out: Path) -> None:
        self.api = api
        self.out = out
        self.fixtures: list[Fixture] = []

    def _write(self, name: str, json_q: str, json_a: Answer, pb_q: str, pb_a: Answer) -> Json:
        (self.out / f"{name}.json").write_bytes(json_a.body)
        (self.out / f"{name}.pb").write_bytes(pb_a.body)
        return {
            "json": _body_entry(name, "json", json_q, json_a),
            "protobuf": _body_entry(name, "pb", pb_q, pb_a),
        }

    async def record_list(self, name: str, path: str, cluster: bool) -> str:
        """Record one list in both encodings; return its resourceVersion."""
        json_q = _query(labelSelector=SELECTOR) if cluster else ""
        json_a = await self.api.call("GET", path, query=json_q, accept=JSON)
        doc = json_a.json()
        rv = doc["metadata"]["resourceVersion"]
        extra = {"resourceVersionMatch": "Exact"}
        pb_params = {"labelSelector": SELECTOR} if cluster else {}
        pb_q = _query(**pb_params, resourceVersion=rv, **extra)
        pb_a = await self.api.call("GET", path, query=pb_q, accept=PROTOBUF)
        if not pb_a.content_type.startswith(PROTOBUF):
            print(f"  {name}: the protobuf request was answered in {pb_a.content_type}")
        api_version, kind, pb_rv, pb_items = _pb_list(pb_a.body)
        json_items = [
            (i["metadata"]["name"], i["metadata"]["resourceVersion"]) for i in doc["items"]
        ]
        if (api_version, kind, pb_rv, pb_items) != (
            doc["apiVersion"],
            doc["kind"],
            rv,
            json_items,
        ):
            raise SystemExit(
                f"{name}: the two lists differ: JSON {doc['apiVersion']} {doc['kind']} {rv} "
                f"{json_items}, protobuf {api_version} {kind} {pb_rv} {pb_items}"
            )
        if not json_items:
            raise SystemExit(f"{name}: the list is empty")
        fixture = Fixture(
            name,
            "list",
            path,
            self._write(name, json_q, json_a, pb_q, pb_a),
            {"apiVersion": doc["apiVersion"], "kind": doc["kind"], "items": len(json_items)},
        )
        self.fixtures.append(fixture)
        print(f"  {name}: {len(json_items)} {doc['kind']} items")
        return str(rv)

    def _add_watch(self, name: str, kind: str, path: str, bodies: Json, answers: Json) -> None:
        """Index a watch fixture. Its events other than BOOKMARKs (whose number and timing are
        the server's) must be the same in both encodings: in the same order, except for a
        watch-list, whose initial events come in the watch cache's (unsorted) store order."""
        events = {enc: _events_of(answers[enc], enc) for enc in ("json", "protobuf")}
        kept = {enc: [e for e in events[enc] if e[0] != "BOOKMARK"] for enc in events}
        same = events["json"] == events["protobuf"]
        any_order = sorted(map(json.dumps, kept["json"])) == sorted(
            map(json.dumps, kept["protobuf"])
        )
        if not (any_order if kind == "watchlist" else kept["json"] == kept["protobuf"]):
            raise SystemExit(f"{name}: the encodings saw different events: {events}")
        fixture = Fixture(
            name,
            kind,
            path,
            bodies,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "sameEvents": same,
                "sameEventsInAnyOrder": sorted(map(json.dumps, events["json"]))
                == sorted(map(json.dumps, events["protobuf"])),
                "events": events,
            },
        )
        self.fixtures.append(fixture)
        summary = ", ".join(str(e[0]) for e in events["json"])
        print(f"  {name}: json [{summary}]; same events in both encodings, in order: {same}")

    async def _watch_pair(self, path: str, query: str) -> tuple[Answer, Answer]:
        """Open the watch in both encodings, then return both once the server ends them."""
        responses = [await self.api.open_stream(path, query, accept) for accept in (JSON, PROTOBUF)]
        try:
            return await self._finish(responses[0]), await self._finish(responses[1])
        finally:
            for response in responses:
                response.release()

    @staticmethod
    async def _finish(response: aiohttp.ClientResponse) -> Answer:
        return Answer(
            response.status, response.headers.get("Content-Type", ""), await response.read()
        )

    async def record_watch(self, pods_rv: str) -> None:
        """pods.watch: both streams open from the list's RV before a Pod is added, modified
        twice and deleted; read until the server ends them."""
        name, path = "pods.watch", f"/api/v1/namespaces/{NAMESPACE}/pods"
        query = _query(
            watch="true",
            resourceVersion=pods_rv,
            allowWatchBookmarks="true",
            timeoutSeconds=WATCH_SECONDS,
        )
        responses = [await self.api.open_stream(path, query, accept) for accept in (JSON, PROTOBUF)]
        try:
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "kr-fixture-watched", "labels": {"step": "added"}},
                "spec": {"containers": [{"name": "c", "image": "registry.example/c:1"}]},
            }
            item = f"{path}/kr-fixture-watched"
            await self.api.call("POST", path, query=_query(fieldManager=MANAGER), body=pod)
            merge = "application/merge-patch+json"
            await self.api.call(
                "PATCH",
                item,
                query=_query(fieldManager=MANAGER),
                body={"metadata": {"labels": {"step": "modified"}}},
                content_type=merge,
            )
            await self.api.call(
                "PATCH",
                f"{item}/status",
                query=_query(fieldManager=f"{MANAGER}-status"),
                body={"status": {"phase": "Running", "podIP": "10.244.1.99"}},
                content_type=merge,
            )
            await self.api.call("DELETE", item, expect=(200, 202))
            answers = {"json": await self._finish(responses[0])}
            answers["protobuf"] = await self._finish(responses[1])
        finally:
            for response in responses:
                response.release()
        bodies = self._write(name, query, answers["json"], query, answers["protobuf"])
        self._add_watch(name, "watch", path, bodies, answers)

    async def record_watchlist(self) -> None:
        name, path = "pods.watchlist", f"/api/v1/namespaces/{NAMESPACE}/pods"
        query = _query(
            watch="true",
            sendInitialEvents="true",
            resourceVersionMatch="NotOlderThan",
            allowWatchBookmarks="true",
            timeoutSeconds=WATCH_SECONDS,
        )
        json_a, pb_a = await self._watch_pair(path, query)
        bodies = self._write(name, query, json_a, query, pb_a)
        self._add_watch(name, "watchlist", path, bodies, {"json": json_a, "protobuf": pb_a})

    async def record_expired(self) -> None:
        """A watch from resourceVersions older than the watch cache holds; the first one that
        the server refuses (with an ERROR event or an HTTP error) is recorded."""
        name, path = "pods.expired", f"/api/v1/namespaces/{NAMESPACE}/pods"
        tried = []
        for rv in ("1", "2", "100"):
            query = _query(
                watch="true", resourceVersion=rv, allowWatchBookmarks="true", timeoutSeconds=2
            )
            json_a, pb_a = await self._watch_pair(path, query)
            events = _events_of(json_a, "json")
            tried.append({"resourceVersion": rv, "status": json_a.status, "events": events})
            if json_a.status != 200 or any(e[0] == "ERROR" for e in events):
                bodies = self._write(name, query, json_a, query, pb_a)
                self._add_watch(name, "expired", path, bodies, {"json": json_a, "protobuf": pb_a})
                self.fixtures[-1].extra["tried"] = tried
                return
        raise SystemExit(f"no old resourceVersion was refused: {tried}")

    async def record_error(self) -> None:
        name = "pods.error"
        path = f"/api/v1/namespaces/{NAMESPACE}/pods/kr-fixture-does-not-exist"
        json_a = await self.api.call("GET", path, accept=JSON, expect=(404,))
        pb_a = await self.api.call("GET", path, accept=PROTOBUF, expect=(404,))
        api_version, kind, raw = _unknown(pb_a.body)
        code = next((v for n, v in _fields(raw) if n == 6 and isinstance(v, int)), 0)
        doc = json_a.json()
        if (api_version, kind, code) != (doc["apiVersion"], doc["kind"], doc["code"]):
            raise SystemExit(f"{name}: JSON {doc}, protobuf {api_version} {kind} {code}")
        fixture = Fixture(
            name,
            "error",
            path,
            self._write(name, "", json_a, "", pb_a),
            {"apiVersion": doc["apiVersion"], "kind": doc["kind"], "code": doc["code"]},
        )
        self.fixtures.append(fixture)
        print(f"  {name}: HTTP {json_a.status}, {pb_a.content_type}")


def _clear(out: Path) -> None:
    """Make ``out`` and remove the fixtures of an earlier run (the README stays)."""
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("*.json"), *out.glob("*.pb")]:
        old.unlink()


def _write_index(out: Path, index: Json) -> int:
    """Write index.json; return the folder's size in bytes."""
    (out / "index.json").write_text(json.dumps(index, indent=1, ensure_ascii=False) + "\n")
    return sum(p.stat().st_size for p in out.iterdir() if p.is_file())


async def _record(api: Api, out: Path) -> None:
    version = (await api.call("GET", "/version")).json()
    print(f"server {version.get('gitVersion')}; removing what an earlier run left")
    await _remove_all(api)
    try:
        print(f"creating the objects in {NAMESPACE}")
        await _populate(api)
        _clear(out)
        recorder = Recorder(api, out)
        print("recording the lists")
        pods_rv = ""
        for name, path, cluster in _lists():
            rv = await recorder.record_list(name, path, cluster)
            if name == "pods":
                pods_rv = rv
        print(f"recording the watches (timeoutSeconds={WATCH_SECONDS})")
        await recorder.record_watch(pods_rv)
        await recorder.record_watchlist()
        await recorder.record_expired()
        await recorder.record_error()
        index = {
            "server": {k: version.get(k) for k in ("gitVersion", "gitCommit", "platform")},
            "namespace": NAMESPACE,
            "recordedBy": "tools/record_protobuf_fixtures.py",
            "fixtures": [fixture.as_json() for fixture in recorder.fixtures],
        }
        total = _write_index(out, index)
        print(f"wrote {len(recorder.fixtures)} fixtures to {out} ({total / 1024:.0f} KiB)")
    except BaseException:
        print("deleting what this run created")
        try:
            await _remove_all(api)
        except (SystemExit, Exception) as err:
            print(f"and the cleanup failed: {err}", file=sys.stderr)
        raise
    print("deleting what this run created")
    await _remove_all(api)


async def _main(kubeconfig: str, out: Path) -> None:
    config = load_config(kubeconfig)
    context = ssl.create_default_context()
    if config.insecure_skip_tls_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif config.ca_data:
        context.load_verify_locations(cadata=config.ca_data.decode())
    auth = await config.auth.authorize()
    headers = {
        **auth.headers,
        "User-Agent": "kubereflector-record-protobuf-fixtures",
        "Accept-Encoding": "identity",  # the bodies as the server wrote them, not gzipped
    }
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=60)
    connector = aiohttp.TCPConnector(ssl=context)
    async with aiohttp.ClientSession(
        base_url=config.server,
        connector=connector,
        headers=headers,
        timeout=timeout,
        auto_decompress=False,
    ) as session:
        await _record(Api(session), out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Record kube-apiserver responses in JSON and protobuf."
    )
    parser.add_argument("--kubeconfig", required=True, help="a kubeconfig with admin rights")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    args = parser.parse_args(argv)
    asyncio.run(_main(args.kubeconfig, args.out))


if __name__ == "__main__":
    main()
