"""A user's objects typed with the generated models: built as dict literals, read field
by field, handed to the client and the key functions as they are. Type-checked by
test_typecheck.py, never run. The mistakes these types catch are in user_mistakes.py."""

from __future__ import annotations

import yaml
from typing_extensions import assert_type

from kubereflector import meta_namespace_key_func
from kubereflector.client import ResourceClient
from kubereflector.models import (
    ApiResource,
    ConfigMap,
    Deployment,
    Event,
    HorizontalPodAutoscaler,
    JSONValue,
    Pod,
    events_v1,
    resource_of,
)
from kubereflector.models.apiextensions_v1 import JSONSchemaProps
from kubereflector.models.autoscaling_v2 import MetricSpec
from kubereflector.models.core_v1 import Container, PodSpec
from kubereflector.models.meta_v1 import ListMeta, ObjectMeta, Quantity

WEB: Container = {
    "name": "web",
    "image": "nginx:1.27",
    "ports": [{"containerPort": 80, "name": "http"}],
    "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": 1}},
    "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}},
}

POD: Pod = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
    "spec": {"containers": [WEB], "nodeName": "node-1", "restartPolicy": "Always"},
}

DEPLOYMENT: Deployment = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [WEB]}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}},
    },
}

CONFIG: ConfigMap = {"metadata": {"name": "settings"}, "data": {"mode": "fast"}}


def read_a_pod(pod: Pod) -> None:
    spec = pod["spec"]
    assert_type(spec, PodSpec)
    assert_type(spec["containers"][0]["name"], str)
    assert_type(spec.get("nodeName"), str | None)
    assert_type(pod["metadata"].get("labels", {}), dict[str, str])
    limits = spec["containers"][0].get("resources", {}).get("limits", {})
    assert_type(limits.get("cpu"), Quantity | None)
    for status in pod.get("status", {}).get("containerStatuses", []):
        assert_type(status["ready"], bool)
        assert_type(status["restartCount"], int)


def read_a_deployment(deployment: Deployment) -> int:
    spec = deployment["spec"]
    assert_type(spec["template"]["spec"]["containers"][0], Container)
    surge = spec.get("strategy", {}).get("rollingUpdate", {}).get("maxSurge")
    assert_type(surge, int | str | None)
    return deployment.get("status", {}).get("readyReplicas", 0)


def keywords_and_odd_keys(meta: ListMeta, schema: JSONSchemaProps) -> None:
    assert_type(meta.get("continue"), str | None)
    assert_type(schema.get("x-kubernetes-list-type"), str | None)
    assert_type(schema.get("$ref"), str | None)
    assert_type(schema.get("default"), JSONValue)


def preferred_versions(event: Event, newer: events_v1.Event, hpa: HorizontalPodAutoscaler) -> None:
    assert_type(event["involvedObject"].get("name"), str | None)  # core/v1's Event
    assert_type(newer["eventTime"], str)  # events.k8s.io/v1's, from its module
    assert_type(hpa["spec"].get("metrics", []), list[MetricSpec])  # autoscaling/v2's


def metadata_of(obj: Pod | Deployment) -> ObjectMeta:
    return obj.get("metadata", {})


def a_manifest_from_yaml(text: str) -> Pod:
    pod: Pod = yaml.safe_load(text)
    return pod


async def written_as_they_are(pods: ResourceClient) -> None:
    await pods.create(POD)
    print(meta_namespace_key_func(POD))
    assert_type(resource_of(Pod), ApiResource)
    assert_type(resource_of(Pod).plural, str)
