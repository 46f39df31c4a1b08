"""Talking to real API servers: configuration and credentials, the REST client
and its per-resource ``ResourceClient`` (with ``SyncClient`` for plain threads),
discovery, ``ResourceListWatch`` (the HTTP ListerWatcher), ``retry_on_conflict`` and the
``EventRecorder``."""

from __future__ import annotations

from .auth import Auth, AuthInfo, ExecAuth, ExecPluginError, StaticAuth, TokenFileAuth
from .config import ClientConfig, ConfigError, in_cluster_config, load_config
from .discovery import Discovery, ResourceInfo, UnknownResourceError
from .events import EVENTS_RESOURCE, EventRecorder, EventType
from .listwatch import ResourceListWatch
from .resource import (
    APPLY_PATCH_CONTENT_TYPE,
    PATCH_CONTENT_TYPES,
    PatchType,
    PropagationPolicy,
    ResourceClient,
    WriteObserver,
)
from .rest import Client, JsonValue, RequestMetrics
from .retry import (
    DEFAULT_BACKOFF,
    DEFAULT_RETRY,
    RetryBackoff,
    retry_on_conflict,
    retry_on_error,
)
from .sync import SyncClient, SyncResourceClient

__all__ = [
    "APPLY_PATCH_CONTENT_TYPE",
    "DEFAULT_BACKOFF",
    "DEFAULT_RETRY",
    "EVENTS_RESOURCE",
    "PATCH_CONTENT_TYPES",
    "Auth",
    "AuthInfo",
    "Client",
    "ClientConfig",
    "ConfigError",
    "Discovery",
    "EventRecorder",
    "EventType",
    "ExecAuth",
    "ExecPluginError",
    "JsonValue",
    "PatchType",
    "PropagationPolicy",
    "RequestMetrics",
    "ResourceClient",
    "ResourceInfo",
    "ResourceListWatch",
    "RetryBackoff",
    "StaticAuth",
    "SyncClient",
    "SyncResourceClient",
    "TokenFileAuth",
    "UnknownResourceError",
    "WriteObserver",
    "in_cluster_config",
    "load_config",
    "retry_on_conflict",
    "retry_on_error",
]
