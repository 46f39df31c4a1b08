"""Realistic Pod objects for the benchmarks: ~5-6 KB of JSON each, managedFields included.

Deterministic (seeded), so every run and every peer sees the same bytes.
"""

from __future__ import annotations

import random
from typing import Any

import msgspec


def make_pod(i: int, *, namespace: str = "bench", rv: int = 1) -> dict[str, Any]:
    """A Pod like a Deployment's replica on a busy cluster (about 5.5 KB of JSON)."""
    rnd = random.Random(i)
    app = f"svc-{i % 40}"
    name = f"{app}-{rnd.getrandbits(40):010x}-{rnd.getrandbits(20):05x}"
    uid = "-".join(f"{rnd.getrandbits(b):0{b // 4}x}" for b in (32, 16, 16, 16, 48))
    node = f"node-{i % 97:03d}.europe-west4-b.compute.internal"
    ip = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
    ts = "2026-11-01T10:00:00Z"
    container = {
        "name": app,
        "image": f"registry.example.com/team/{app}:v1.{i % 17}.{i % 5}",
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": [
            {"name": "LOG_LEVEL", "value": "info"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ],
        "resources": {
            "limits": {"cpu": "500m", "memory": "512Mi"},
            "requests": {"cpu": "100m", "memory": "128Mi"},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/app"},
            {
                "name": "kube-api-access",
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            },
        ],
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "timeoutSeconds": 1,
            "periodSeconds": 10,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"},
            "timeoutSeconds": 1,
            "periodSeconds": 5,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    managed_fields = [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": ts,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:generateName": {},
                    "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                    "f:ownerReferences": {".": {}, f'k:{{"uid":"{uid}"}}': {}},
                },
                "f:spec": {
                    "f:containers": {
                        f'k:{{"name":"{app}"}}': {
                            ".": {},
                            "f:env": {".": {}, 'k:{"name":"LOG_LEVEL"}': {".": {}, "f:name": {}}},
                            "f:image": {},
                            "f:imagePullPolicy": {},
                            "f:livenessProbe": {".": {}, "f:httpGet": {".": {}}},
                            "f:name": {},
                            "f:ports": {".": {}, 'k:{"containerPort":8080}': {".": {}}},
                            "f:readinessProbe": {".": {}, "f:httpGet": {".": {}}},
                            "f:resources": {".": {}, "f:limits": {}, "f:requests": {}},
                            "f:volumeMounts": {".": {}, 'k:{"mountPath":"/etc/app"}': {}},
                        }
                    },
                    "f:dnsPolicy": {},
                    "f:enableServiceLinks": {},
                    "f:restartPolicy": {},
                    "f:schedulerName": {},
                    "f:securityContext": {},
                    "f:terminationGracePeriodSeconds": {},
                    "f:volumes": {".": {}, 'k:{"name":"config"}': {".": {}, "f:name": {}}},
                },
            },
        },
        {
            "manager": "kubelet",
            "operation": "Update",
            "apiVersion": "v1",
            "time": ts,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:status": {
                    "f:conditions": {
                        'k:{"type":"ContainersReady"}': {".": {}, "f:status": {}, "f:type": {}},
                        'k:{"type":"Initialized"}': {".": {}, "f:status": {}, "f:type": {}},
                        'k:{"type":"Ready"}': {".": {}, "f:status": {}, "f:type": {}},
                    },
                    "f:containerStatuses": {},
                    "f:hostIP": {},
                    "f:phase": {},
                    "f:podIP": {},
                    "f:podIPs": {".": {}, f'k:{{"ip":"{ip}"}}': {".": {}, "f:ip": {}}},
                    "f:startTime": {},
                }
            },
            "subresource": "status",
        },
    ]
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "generateName": f"{app}-{rnd.getrandbits(40):010x}-",
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": str(rv),
            "creationTimestamp": ts,
            "labels": {"app": app, "pod-template-hash": f"{rnd.getrandbits(40):010x}"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": ts},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-{rnd.getrandbits(40):010x}",
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": managed_fields,
        },
        "spec": {
            "volumes": [
                {"name": "config", "configMap": {"name": f"{app}-config", "defaultMode": 420}},
                {
                    "name": "kube-api-access",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                        ],
                        "defaultMode": 420,
                    },
                },
            ],
            "containers": [container],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "nodeName": node,
            "securityContext": {},
            "schedulerName": "default-scheduler",
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
                    "tolerationSeconds": 300,
                },
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": ts}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "hostIP": f"10.128.{i % 97}.{i % 250}",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": ts,
            "containerStatuses": [
                {
                    "name": app,
                    "state": {"running": {"startedAt": ts}},
                    "lastState": {},
                    "ready": True,
                    "restartCount": i % 3,
                    "image": container["image"],
                    "imageID": f"{container['image']}@sha256:{rnd.getrandbits(256):064x}",
                    "containerID": f"containerd://{rnd.getrandbits(256):064x}",
                    "started": True,
                }
            ],
            "qosClass": "Burstable",
        },
    }


def pod_json_size() -> int:
    return len(msgspec.json.encode(make_pod(1)))
