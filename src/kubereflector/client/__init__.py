"""Talking to real API servers: configuration, the REST client, discovery, and
``ResourceListWatch``, the HTTP ListerWatcher."""

from __future__ import annotations

from .config import (
    Auth,
    AuthInfo,
    ClientConfig,
    ConfigError,
    ExecAuth,
    ExecPluginError,
    StaticAuth,
    TokenFileAuth,
    in_cluster_config,
    load_config,
)
from .discovery import Discovery, ResourceInfo, UnknownResourceError
from .listwatch import ResourceListWatch
from .rest import Client, JsonValue

__all__ = [
    "Auth",
    "AuthInfo",
    "Client",
    "ClientConfig",
    "ConfigError",
    "Discovery",
    "ExecAuth",
    "ExecPluginError",
    "JsonValue",
    "ResourceInfo",
    "ResourceListWatch",
    "StaticAuth",
    "TokenFileAuth",
    "UnknownResourceError",
    "in_cluster_config",
    "load_config",
]
