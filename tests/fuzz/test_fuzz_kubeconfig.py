"""Fuzzing the kubeconfig loader: whatever a kubeconfig file holds (bytes, YAML,
plausible documents with any value in any field), ``load_config`` returns a
ClientConfig or raises ConfigError, never anything else; and nothing it raises
or returns shows a secret that was in the file."""

from __future__ import annotations

import base64
import tempfile
import traceback
from pathlib import Path
from typing import Any

import yaml
from fuzzing import FUZZ, json_values
from hypothesis import given
from hypothesis import strategies as st

from kubereflector.client import ClientConfig, ConfigError, load_config

SECRET = "fuzz-secret-0123456789abcdef"

_dir = tempfile.TemporaryDirectory(prefix="kubereflector-fuzz-")
DIR = Path(_dir.name)
(DIR / "token").write_text(SECRET)
(DIR / "empty").write_text("")
PEM_CERT = "-----BEGIN CERTIFICATE-----\nQ0VSVA==\n-----END CERTIFICATE-----\n"
PEM_KEY = f"-----BEGIN PRIVATE KEY-----\n{SECRET}\n-----END PRIVATE KEY-----\n"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def value(*plausible: Any) -> st.SearchStrategy[Any]:
    """A field's value: mostly one of ``plausible`` (valid or nearly so, so that the
    loader gets past it to the next field), sometimes anything at all."""
    if not plausible:
        return json_values
    return st.one_of(*[st.sampled_from(plausible)] * 4, json_values)


cluster = st.fixed_dictionaries(
    {},
    optional={
        "server": value(
            "https://k8s:6443",
            "k8s:6443",
            "http://127.0.0.1:1",
            6443,
            "not a url",
            f"https://admin:{SECRET}@k8s",
            "ftp://k8s",
            "https://k8s:99999",
            "https://[::1",
        ),
        "certificate-authority-data": value(b64("CA"), "%%%", ""),
        "certificate-authority": value("token", "missing", "a\x00b", str(DIR)),
        "insecure-skip-tls-verify": value(True, False, "yes"),
        "tls-server-name": value("k8s", ""),
        "proxy-url": value("http://proxy:3128"),
        "extensions": value([{"name": "client.authentication.k8s.io/exec", "extension": {}}]),
    },
)
exec_section = st.fixed_dictionaries(
    {},
    optional={
        "command": value("plugin", "./plugin", "", "a\x00b"),
        "apiVersion": value(
            "client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"
        ),
        "args": value(["--token", SECRET], [SECRET, 1]),
        "env": value([{"name": "TOKEN", "value": SECRET}], [{"name": 1}], {"a": "b"}),
        "interactiveMode": value("Never", "IfAvailable", "Always", "Sometimes"),
        "provideClusterInfo": value(True, "true"),
        "installHint": value("install it"),
    },
)
user = st.fixed_dictionaries(
    {},
    optional={
        "token": value(SECRET, 12345, ""),
        "tokenFile": value("token", "empty", "missing", "a\x00b", str(DIR)),
        "username": value("admin", SECRET),
        "password": value(SECRET, 1.5),
        "client-certificate-data": value(b64(PEM_CERT), b64(SECRET), SECRET + "!"),
        "client-key-data": value(b64(PEM_KEY), b64(SECRET), SECRET + "!"),
        "client-certificate": value("token", "missing", "a\x00b"),
        "client-key": value("token", "missing"),
        "exec": exec_section | json_values,
        "auth-provider": value(
            {"name": "oidc", "config": {"id-token": SECRET}},
            {"name": "gcp", "config": {"access-token": SECRET, "expiry": "soon"}},
            {"name": "azure"},
        ),
    },
)
context = st.fixed_dictionaries(
    {},
    optional={
        "cluster": value("c", "other"),
        "user": value("u", "other"),
        "namespace": value("default", "Bad NS!", "../kube-system", 7),
    },
)


def entries(kind: str, body: st.SearchStrategy[Any], name: str) -> st.SearchStrategy[Any]:
    entry = st.fixed_dictionaries({"name": value(name, "")}, optional={kind: body | json_values})
    return st.lists(entry, max_size=2) | json_values


free_form = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": value("v1"),
        "kind": value("Config"),
        "current-context": value("x", "missing"),
        "clusters": entries("cluster", cluster, "c"),
        "users": entries("user", user, "u"),
        "contexts": entries("context", context, "x"),
    },
)
# A context that resolves to a cluster with a good server, so that every other
# field of the cluster and of the user is reached.
resolving = st.builds(
    lambda cluster, server, user, namespace: {
        "current-context": "x",
        "clusters": [{"name": "c", "cluster": {**cluster, "server": server}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", **namespace}}],
    },
    cluster,
    st.sampled_from(["https://k8s:6443", "k8s:6443", "http://127.0.0.1:1"]),
    user,
    st.fixed_dictionaries({}, optional={"namespace": value("default", "Bad NS!", 7)}),
)
documents = resolving | free_form


def load(content: bytes) -> None:
    """Write ``content`` as the kubeconfig and load it: a ClientConfig or ConfigError,
    and the file's secret in neither."""
    path = DIR / "config"
    path.write_bytes(content)
    try:
        config = load_config(path)
    except ConfigError as err:
        shown = "".join(traceback.format_exception(err))
        assert SECRET not in shown
        return
    assert isinstance(config, ClientConfig)
    assert SECRET not in repr(config)


@FUZZ
@given(doc=documents)
def test_plausible_documents(doc: Any) -> None:
    load(yaml.safe_dump(doc).encode())


@FUZZ
@given(doc=json_values)
def test_any_yaml(doc: Any) -> None:
    load(yaml.safe_dump(doc).encode())


@FUZZ
@given(raw=st.binary(max_size=512) | st.text(max_size=512).map(str.encode))
def test_any_bytes(raw: bytes) -> None:
    load(raw)
