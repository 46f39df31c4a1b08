"""load_config / in_cluster_config and the kubeconfig rules (the credentials they
choose for a user included; TokenFileAuth alone is in test_auth.py).

Every test runs with HOME in tmp_path and without KUBECONFIG or the in-cluster
variables (the ``isolated`` fixture), so the real ~/.kube is never read.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest

from config_fixtures import V1, V1BETA1, Plugin, single, token_plugin, write_yaml
from kubereflector.client import (
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
from kubereflector.testing import FakeClock

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX plugin scripts")

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USERPROFILE", str(home))
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    return home


CERT = "-----BEGIN CERTIFICATE-----\nQ0VSVA==\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nS0VZ\n-----END PRIVATE KEY-----\n"
"""PEM-shaped stand-ins: load_config checks the shape, TLS (not run here) the rest."""


def b64(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


async def headers(config: ClientConfig) -> dict[str, str]:
    return dict((await config.auth.authorize()).headers)


# -- the basics ----------------------------------------------------------------


@pytest.mark.asyncio
async def test_token_ca_and_cluster_settings(tmp_path: Path) -> None:
    doc = single(
        server="https://k8s.example:6443/prefix/",
        cluster={
            "certificate-authority-data": b64("CA PEM"),
            "tls-server-name": "api.internal",
            "proxy-url": "http://proxy.example:3128",
        },
        user={"token": "tok"},
        context={"namespace": "team-a"},
    )
    config = load_config(write_yaml(tmp_path / "config", doc))
    assert config.server == "https://k8s.example:6443/prefix"
    assert config.ca_data == b"CA PEM"
    assert config.tls_server_name == "api.internal"
    assert config.proxy_url == "http://proxy.example:3128"
    assert config.insecure_skip_tls_verify is False
    assert config.namespace == "team-a"
    assert config.context == "ctx"
    assert isinstance(config.auth, StaticAuth)
    assert await headers(config) == {"Authorization": "Bearer tok"}


def test_defaults_and_insecure(tmp_path: Path) -> None:
    doc = single(server="k8s.example:6443", cluster={"insecure-skip-tls-verify": True})
    config = load_config(write_yaml(tmp_path / "config", doc))
    assert config.server == "https://k8s.example:6443"
    assert config.insecure_skip_tls_verify is True
    assert config.ca_data is None
    assert config.namespace == "default"
    assert config.tls_server_name is None
    assert config.proxy_url is None


@pytest.mark.asyncio
async def test_context_without_user_is_anonymous(tmp_path: Path) -> None:
    doc = single()
    del doc["contexts"][0]["context"]["user"]
    config = load_config(write_yaml(tmp_path / "config", doc))
    assert await config.auth.authorize() == AuthInfo()


@pytest.mark.asyncio
async def test_basic_auth(tmp_path: Path) -> None:
    doc = single(user={"username": "admin", "password": "pw"})
    config = load_config(write_yaml(tmp_path / "config", doc))
    assert await headers(config) == {"Authorization": "Basic " + b64("admin:pw")}


@pytest.mark.asyncio
async def test_client_certificate_from_data(tmp_path: Path) -> None:
    doc = single(user={"client-certificate-data": b64(CERT), "client-key-data": b64(KEY)})
    info = await load_config(write_yaml(tmp_path / "config", doc)).auth.authorize()
    assert info.client_cert == (CERT.encode(), KEY.encode())
    assert dict(info.headers) == {}


@pytest.mark.asyncio
async def test_data_wins_over_file_and_base64_may_wrap(tmp_path: Path) -> None:
    encoded = b64("CA FROM DATA " * 10)
    wrapped = "\n".join(encoded[i : i + 20] for i in range(0, len(encoded), 20))
    doc = single(
        cluster={"certificate-authority-data": wrapped, "certificate-authority": "missing.crt"}
    )
    config = load_config(write_yaml(tmp_path / "config", doc))
    assert config.ca_data == b"CA FROM DATA " * 10


@pytest.mark.asyncio
async def test_relative_paths_resolve_against_the_kubeconfig_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    confdir = tmp_path / "conf"
    (confdir / "pki").mkdir(parents=True)
    (confdir / "pki" / "ca.crt").write_bytes(b"CA")
    (confdir / "pki" / "me.crt").write_text(CERT)
    (confdir / "pki" / "me.key").write_text(KEY)
    doc = single(
        cluster={"certificate-authority": "pki/ca.crt"},
        user={"client-certificate": "pki/me.crt", "client-key": str(confdir / "pki" / "me.key")},
    )
    path = write_yaml(confdir / "config", doc)
    monkeypatch.chdir(tmp_path)  # not the kubeconfig's directory
    config = load_config(path)
    assert config.ca_data == b"CA"
    assert (await config.auth.authorize()).client_cert == (CERT.encode(), KEY.encode())


def test_explicit_path_expands_user(isolated: Path) -> None:
    write_yaml(isolated / "elsewhere.yaml", single(name="mine"))
    assert load_config("~/elsewhere.yaml").context == "mine"


# -- where the configuration comes from ----------------------------------------


def test_default_location_is_home_kube_config(isolated: Path) -> None:
    write_yaml(isolated / ".kube" / "config", single(name="home"))
    assert load_config().context == "home"


def test_kubeconfig_env_replaces_the_default(
    tmp_path: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_yaml(isolated / ".kube" / "config", single(name="home"))
    other = write_yaml(tmp_path / "other", single(name="other"))
    monkeypatch.setenv("KUBECONFIG", str(other))
    assert load_config().context == "other"


def test_explicit_path_wins_over_kubeconfig_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(write_yaml(tmp_path / "env", single(name="env"))))
    assert load_config(write_yaml(tmp_path / "explicit", single(name="explicit"))).context == (
        "explicit"
    )


def test_kubeconfig_env_merges_first_file_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = {
        "clusters": [{"name": "shared", "cluster": {"server": "https://first"}}],
        "users": [{"name": "u", "user": {"token": "from-first"}}],
        "contexts": [{"name": "a", "context": {"cluster": "shared", "user": "u"}}],
    }  # no current-context here
    second = {
        "current-context": "b",
        "clusters": [
            {"name": "shared", "cluster": {"server": "https://second"}},
            {"name": "own", "cluster": {"server": "https://own"}},
        ],
        "users": [{"name": "u", "user": {"token": "from-second"}}],
        "contexts": [
            {"name": "a", "context": {"cluster": "own", "user": "u"}},
            {"name": "b", "context": {"cluster": "shared", "user": "u", "namespace": "nb"}},
        ],
    }
    third = {"current-context": "a"}
    paths = [
        write_yaml(tmp_path / "one", first),
        tmp_path / "missing",
        write_yaml(tmp_path / "two", second),
        write_yaml(tmp_path / "three", third),
    ]
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(str(p) for p in paths))
    current = load_config()
    assert (current.context, current.server, current.namespace) == ("b", "https://first", "nb")
    a = load_config(context="a")
    assert a.server == "https://first"  # context "a" from the first file
    assert repr(a.auth) == "StaticAuth(bearer)"


@pytest.mark.asyncio
async def test_merged_entries_resolve_paths_against_their_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "ca.crt").write_bytes(b"CA-A")
    (tmp_path / "b" / "token").write_text("tok-b\n")
    one = {
        "current-context": "c",
        "clusters": [
            {"name": "k", "cluster": {"server": "https://k", "certificate-authority": "ca.crt"}}
        ],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }
    two = {"users": [{"name": "u", "user": {"tokenFile": "token"}}]}
    monkeypatch.setenv(
        "KUBECONFIG",
        os.pathsep.join(
            [
                str(write_yaml(tmp_path / "a" / "kc", one)),
                str(write_yaml(tmp_path / "b" / "kc", two)),
            ]
        ),
    )
    config = load_config()
    assert config.ca_data == b"CA-A"
    assert await headers(config) == {"Authorization": "Bearer tok-b"}


def test_nothing_found_says_where_it_looked(isolated: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config()
    text = str(caught.value)
    assert str(isolated / ".kube" / "config") in text
    assert "KUBERNETES_SERVICE_HOST" in text


def test_nothing_found_in_kubeconfig_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'x'}{os.pathsep}{tmp_path / 'y'}")
    with pytest.raises(ConfigError, match="no kubeconfig found") as caught:
        load_config()
    assert f"KUBECONFIG={tmp_path / 'x'}" in str(caught.value)


def test_explicit_path_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be read") as caught:
        load_config(tmp_path / "nope")
    assert str(tmp_path / "nope") in str(caught.value)


def test_empty_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("")
    with pytest.raises(ConfigError, match="defines no contexts"):
        load_config(tmp_path / "empty")


def test_falls_back_to_in_cluster(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    if Path(SA_DIR, "token").exists():  # running inside a pod
        assert load_config().server == "https://10.0.0.1:443"
    else:
        with pytest.raises(ConfigError, match=f"token file '{SA_DIR}/token'"):
            load_config()


def test_asking_for_a_context_does_not_fall_back_to_in_cluster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(ConfigError, match="no kubeconfig found"):
        load_config(context="prod")


# -- contexts ------------------------------------------------------------------


def two_contexts() -> dict[str, Any]:
    doc = single(name="dev")
    prod = single(name="prod", server="https://prod.example")
    for key in ("clusters", "users", "contexts"):
        doc[key] += prod[key]
    return doc


def test_explicit_context_wins_over_current(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "config", two_contexts())
    assert load_config(path).context == "dev"
    prod = load_config(path, context="prod")
    assert (prod.context, prod.server) == ("prod", "https://prod.example")


def test_unknown_context_lists_the_known_ones(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "config", two_contexts())
    with pytest.raises(ConfigError) as caught:
        load_config(path, context="staging")
    assert str(caught.value) == (
        f"context 'staging' not found in {path} (known contexts: 'dev', 'prod')"
    )


def test_no_current_context(tmp_path: Path) -> None:
    doc = two_contexts()
    del doc["current-context"]
    with pytest.raises(ConfigError, match=r"no context selected.*'dev', 'prod'"):
        load_config(write_yaml(tmp_path / "config", doc))


def test_context_with_missing_cluster_or_user(tmp_path: Path) -> None:
    doc = single()
    doc["contexts"][0]["context"]["cluster"] = "gone"
    with pytest.raises(ConfigError, match="refers to cluster 'gone', which is not defined"):
        load_config(write_yaml(tmp_path / "a", doc))
    doc = single()
    doc["contexts"][0]["context"]["user"] = "nobody"
    with pytest.raises(ConfigError, match="refers to user 'nobody', which is not defined"):
        load_config(write_yaml(tmp_path / "b", doc))
    doc = single()
    del doc["contexts"][0]["context"]["cluster"]
    with pytest.raises(ConfigError, match=r"context 'ctx' in .* names no cluster"):
        load_config(write_yaml(tmp_path / "c", doc))


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (single(server=""), "cluster 'ctx-cluster' in .* has no server"),
        (single(server=6443), "cluster 'ctx-cluster' in .*: server must be a string, not int"),
        (single(server="not a url"), "cluster 'ctx-cluster' in .*: server .* is no host name"),
        (single(server="ftp://k8s:21"), "server 'ftp://k8s:21' is not an http or https URL"),
        (single(server="https://k8s:6443#x"), "must not have a query or fragment"),
        (single(user={"token": 12345}), "user 'ctx-user' in .*: token must be a string, not int"),
        (single(user={"username": "u", "password": 1.5}), "password must be a string, not float"),
        (single(context={"namespace": "Bad NS!"}), "context 'ctx' in .*invalid namespace 'Bad NS"),
        # Found by tests/fuzz: a NUL in a path raised ValueError from the file system.
        (single(user={"tokenFile": "a\x00b"}), "cannot be read .the path holds a NUL character"),
        (
            single(cluster={"certificate-authority": "a\x00b"}),
            "cannot read certificate-authority file .*the path holds a NUL character",
        ),
        (
            single(
                cluster={"insecure-skip-tls-verify": True, "certificate-authority-data": b64("x")}
            ),
            "insecure-skip-tls-verify cannot be combined with a certificate-authority",
        ),
        (single(cluster={"insecure-skip-tls-verify": "yes"}), "must be true or false"),
        (
            single(cluster={"certificate-authority-data": "%%%"}),
            "certificate-authority-data is not valid base64",
        ),
        (
            single(cluster={"certificate-authority": "nope.crt"}),
            "cannot read certificate-authority file '.*nope.crt'",
        ),
        (
            single(user={"client-certificate-data": b64(CERT)}),
            "client-certificate but no client-key",
        ),
        (single(user={"client-key-data": b64(KEY)}), "client-key but no client-certificate"),
        (single(user={"token": "t", "username": "u"}), "both a token and a username/password"),
        (
            single(user={"client-certificate-data": b64("C"), "client-key-data": b64(KEY)}),
            "user 'ctx-user' in .*: client-certificate-data is not a PEM certificate",
        ),
        (
            single(user={"client-certificate-data": b64(CERT), "client-key-data": b64(CERT)}),
            "user 'ctx-user' in .*: client-key-data is not a PEM private key",
        ),
        (single(user={"token": ["t"]}), "token must be a string"),
        (
            single(
                user={"exec": {"command": "x", "apiVersion": V1}, "auth-provider": {"name": "oidc"}}
            ),
            "exec and auth-provider cannot be used together",
        ),
        ({"clusters": {"a": 1}}, "clusters must be a list"),
        ({"clusters": [{"cluster": {}}]}, r"clusters\[0\] has no name"),
        ({"users": [{"name": "u", "user": "x"}]}, "user 'u' must be a mapping"),
        (["not", "a", "mapping"], "is not a mapping at the top level"),
    ],
)
def test_invalid_kubeconfigs(tmp_path: Path, doc: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(write_yaml(tmp_path / "config", doc))


def test_invalid_yaml_names_the_line_not_the_content(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("users:\n- name: u\n  user: {token: [unclosed-secret-value\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    text = str(caught.value)
    assert text.startswith(f"kubeconfig '{path}' is not valid YAML (line ")
    assert "unclosed-secret-value" not in "".join(traceback.format_exception(caught.value))


# -- token files ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_token_and_token_file_in_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file")
    doc = single(user={"tokenFile": "token", "token": "static"})
    config = load_config(write_yaml(tmp_path / "config", doc))
    assert isinstance(config.auth, TokenFileAuth)
    assert await headers(config) == {"Authorization": "Bearer from-file"}
    # The file wins while it can be read; the token stands in when it cannot.
    doc = single(user={"tokenFile": "missing-token", "token": "static"})
    config = load_config(write_yaml(tmp_path / "config2", doc))
    assert await headers(config) == {"Authorization": "Bearer static"}


def test_token_file_in_kubeconfig_must_exist(tmp_path: Path) -> None:
    doc = single(user={"tokenFile": "missing-token"})
    with pytest.raises(ConfigError, match=f"token file '{tmp_path / 'missing-token'}'"):
        load_config(write_yaml(tmp_path / "config", doc))


@pytest.mark.asyncio
async def test_token_file_with_client_certificate(tmp_path: Path) -> None:
    clock = FakeClock()
    (tmp_path / "token").write_text("one")
    doc = single(
        user={
            "tokenFile": "token",
            "client-certificate-data": b64(CERT),
            "client-key-data": b64(KEY),
        }
    )
    config = load_config(write_yaml(tmp_path / "config", doc), clock=clock)
    assert repr(config.auth).endswith("+ client-cert")
    first = await config.auth.authorize()
    assert first.headers == {"Authorization": "Bearer one"}
    assert first.client_cert == (CERT.encode(), KEY.encode())
    assert (await config.auth.authorize()) is first
    (tmp_path / "token").write_text("two")
    config.auth.invalidate()
    second = await config.auth.authorize()
    assert second.headers["Authorization"] == "Bearer two"
    assert second.client_cert == (CERT.encode(), KEY.encode())
    (tmp_path / "token").write_text("three")
    clock.step(60)  # the default re-read period
    assert (await headers(config)) == {"Authorization": "Bearer three"}


# -- in-cluster ----------------------------------------------------------------


def service_account(
    directory: Path, *, token: str = "sa-token", namespace: str | None = "ns1"
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_bytes(b"CLUSTER CA")
    if namespace is not None:
        (directory / "namespace").write_text(namespace + "\n")
    return directory


@pytest.mark.asyncio
async def test_in_cluster(tmp_path: Path) -> None:
    clock = FakeClock()
    sa = service_account(tmp_path / "sa")
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    config = in_cluster_config(service_account_dir=sa, environ=env, clock=clock)
    assert config.server == "https://10.96.0.1:443"
    assert config.ca_data == b"CLUSTER CA"
    assert config.namespace == "ns1"
    assert isinstance(config.auth, TokenFileAuth)
    assert await headers(config) == {"Authorization": "Bearer sa-token"}
    (sa / "token").write_text("rotated")  # the kubelet rotates bound tokens in place
    clock.step(60)
    assert await headers(config) == {"Authorization": "Bearer rotated"}


def test_in_cluster_ipv6_and_default_namespace(tmp_path: Path) -> None:
    sa = service_account(tmp_path / "sa", namespace=None)
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"}
    config = in_cluster_config(service_account_dir=sa, environ=env)
    assert config.server == "https://[fd00::1]:6443"
    assert config.namespace == "default"


def test_in_cluster_from_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "k8s.local")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "8443")
    config = in_cluster_config(service_account_dir=service_account(tmp_path / "sa"))
    assert config.server == "https://k8s.local:8443"


def test_credentials_in_the_server_url_are_refused_without_showing_them(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "config", single(server="https://admin:s3cr3t-pw@k8s:6443"))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    text = str(caught.value)
    assert text.startswith(f"cluster 'ctx-cluster' in {path}: server must not hold credentials")
    assert "s3cr3t-pw" not in "".join(traceback.format_exception(caught.value))
    assert "admin" not in text


def test_in_cluster_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not running in a cluster"):
        in_cluster_config(service_account_dir=tmp_path, environ={})
    env = {"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"}
    with pytest.raises(ConfigError, match=f"token file '{tmp_path / 'token'}' cannot be read"):
        in_cluster_config(service_account_dir=tmp_path, environ=env)
    (tmp_path / "token").write_text("")
    with pytest.raises(ConfigError, match="is empty"):
        in_cluster_config(service_account_dir=tmp_path, environ=env)
    (tmp_path / "token").write_text("t")
    bad_port = {**env, "KUBERNETES_SERVICE_PORT": "https"}
    with pytest.raises(ConfigError, match="do not make a URL"):
        in_cluster_config(service_account_dir=tmp_path, environ=bad_port)
    (tmp_path / "namespace").write_text("Bad NS!")
    with pytest.raises(ConfigError, match=r"namespace file .*: invalid namespace 'Bad NS!'"):
        in_cluster_config(service_account_dir=tmp_path, environ=env)


def test_in_cluster_without_ca_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sa = service_account(tmp_path / "sa")
    (sa / "ca.crt").unlink()
    env = {"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"}
    with caplog.at_level(logging.WARNING, logger="kubereflector"):
        config = in_cluster_config(service_account_dir=sa, environ=env)
    assert config.ca_data is None
    assert "ca.crt" in caplog.text


# -- exec plugins through the kubeconfig ----------------------------------------


@posix_only
@pytest.mark.asyncio
async def test_exec_from_kubeconfig(tmp_path: Path) -> None:
    plugins = tmp_path / "conf" / "bin"
    plugins.mkdir(parents=True)
    plugin = token_plugin(plugins, "exec-tok", api_version=V1BETA1)
    doc = single(
        user={
            "exec": {
                "apiVersion": V1BETA1,
                "command": "bin/plugin",  # relative to the kubeconfig's directory
                "args": ["token", "--id", "x"],
                "env": [{"name": "PLUGIN_REGION", "value": "eu"}],
            }
        }
    )
    config = load_config(write_yaml(tmp_path / "conf" / "config", doc))
    assert isinstance(config.auth, ExecAuth)
    assert config.auth.command == str(plugin.path)
    assert await headers(config) == {"Authorization": "Bearer exec-tok-1"}
    run = plugin.runs[0]
    assert run["argv"] == ["token", "--id", "x"]
    assert run["env"] == {"PLUGIN_REGION": "eu"}
    assert json.loads(run["exec_info"])["spec"] == {"interactive": False}


@posix_only
@pytest.mark.asyncio
async def test_exec_provide_cluster_info(tmp_path: Path) -> None:
    plugin = token_plugin(tmp_path)
    doc = single(
        server="https://k8s.example:6443/",
        cluster={
            "certificate-authority-data": b64("CA PEM"),
            "tls-server-name": "api.internal",
            "proxy-url": "socks5://proxy:1080",
            "extensions": [
                {"name": "other", "extension": {"x": 1}},
                {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "k8s"}},
            ],
        },
        user={
            "exec": {
                "apiVersion": V1,
                "command": str(plugin.path),
                "interactiveMode": "Never",
                "provideClusterInfo": True,
            }
        },
    )
    config = load_config(write_yaml(tmp_path / "config", doc))
    await config.auth.authorize()
    info = json.loads(plugin.runs[0]["exec_info"])
    assert info == {
        "kind": "ExecCredential",
        "apiVersion": V1,
        "spec": {
            "interactive": False,
            "cluster": {
                "server": "https://k8s.example:6443/",  # as written, as kubectl sends it
                "certificate-authority-data": b64("CA PEM"),
                "tls-server-name": "api.internal",
                "proxy-url": "socks5://proxy:1080",
                "config": {"audience": "k8s"},
            },
        },
    }


@posix_only
@pytest.mark.asyncio
async def test_exec_with_client_certificate_result_and_expiry(tmp_path: Path) -> None:
    clock = FakeClock()
    body = (
        'emit({"clientCertificateData": "CERT" + str(RUN), "clientKeyData": "KEY",'
        ' "expirationTimestamp": expires_in(600)})'
    )
    plugin = Plugin(tmp_path, body)
    doc = single(
        user={
            "exec": {
                "apiVersion": V1,
                "command": str(plugin.path),
                "interactiveMode": "IfAvailable",
            }
        }
    )
    config = load_config(write_yaml(tmp_path / "config", doc), clock=clock)
    assert (await config.auth.authorize()).client_cert == (b"CERT1", b"KEY")
    clock.step(600)
    assert (await config.auth.authorize()).client_cert == (b"CERT2", b"KEY")


@pytest.mark.parametrize(
    ("exec_section", "message"),
    [
        ({"apiVersion": V1, "command": "p"}, "interactiveMode must be set"),
        ({"apiVersion": V1, "command": "p", "interactiveMode": "Always"}, "needs a terminal"),
        ({"apiVersion": V1, "command": "p", "interactiveMode": "Maybe"}, "interactiveMode 'Maybe'"),
        ({"command": "p"}, "exec needs an apiVersion"),
        ({"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "p"}, "not supported"),
        ({"apiVersion": V1BETA1}, "exec needs a command"),
        ({"apiVersion": V1BETA1, "command": "p", "args": "-x"}, "args must be a list"),
        (
            {"apiVersion": V1BETA1, "command": "p", "env": [{"value": "v"}]},
            "env entries need a name",
        ),
    ],
)
def test_invalid_exec_sections(tmp_path: Path, exec_section: dict[str, Any], message: str) -> None:
    doc = single(user={"exec": exec_section})
    with pytest.raises(ConfigError, match=message):
        load_config(write_yaml(tmp_path / "config", doc))


def test_exec_v1beta1_defaults_to_if_available(tmp_path: Path) -> None:
    doc = single(user={"exec": {"apiVersion": V1BETA1, "command": "p"}})
    assert isinstance(load_config(write_yaml(tmp_path / "config", doc)).auth, ExecAuth)


@posix_only
@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("user", "expected"),
    [
        ({"token": "static"}, {"Authorization": "Bearer static"}),
        ({"username": "u", "password": "p"}, {"Authorization": "Basic " + b64("u:p")}),
        ({"client-certificate-data": b64(CERT), "client-key-data": b64(KEY)}, {}),
    ],
)
async def test_static_credentials_win_over_exec_as_in_kubectl(
    tmp_path: Path, user: dict[str, Any], expected: dict[str, str]
) -> None:
    plugin = token_plugin(tmp_path)
    user = {
        **user,
        "exec": {"apiVersion": V1, "command": str(plugin.path), "interactiveMode": "Never"},
    }
    config = load_config(write_yaml(tmp_path / "config", single(user=user)))
    assert isinstance(config.auth, StaticAuth)
    assert await headers(config) == expected
    assert plugin.runs == []


@posix_only
@pytest.mark.asyncio
async def test_exec_failure_through_the_kubeconfig(tmp_path: Path) -> None:
    plugin = Plugin(tmp_path, "print('token expired, run: login', file=sys.stderr)\nsys.exit(1)")
    doc = single(
        user={"exec": {"apiVersion": V1, "command": str(plugin.path), "interactiveMode": "Never"}}
    )
    config = load_config(write_yaml(tmp_path / "config", doc))
    with pytest.raises(ExecPluginError) as caught:
        await config.auth.authorize()
    assert str(caught.value) == (
        f"exec plugin {str(plugin.path)!r} failed with exit code 1: token expired, run: login"
    )


@posix_only
@pytest.mark.asyncio
async def test_exec_timeout_through_the_kubeconfig(tmp_path: Path) -> None:
    clock = FakeClock()
    plugin = Plugin(tmp_path, "import time\ntime.sleep(600)")
    doc = single(
        user={"exec": {"apiVersion": V1, "command": str(plugin.path), "interactiveMode": "Never"}}
    )
    config = load_config(write_yaml(tmp_path / "config", doc), clock=clock, exec_timeout=2.5)
    task = asyncio.create_task(config.auth.authorize())
    await clock.wait_for_sleepers()  # the plugin runs, its timer is set
    await clock.advance(2.5)
    with pytest.raises(ExecPluginError, match=r"did not finish within 2\.5 s and was killed"):
        await task


# -- legacy auth-providers -----------------------------------------------------


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def jwt(claims: dict[str, Any], signature: str = "c2lnbmF0dXJl") -> str:
    """An unsigned-looking JWT whose payload length suits the kubernetes package."""
    for pad in range(4):
        payload = _b64url(json.dumps({**claims, "pad": "x" * pad}).encode())
        if len(payload) % 4 != 1:
            header = _b64url(b'{"alg":"RS256"}')
            return f"{header}.{payload}.{signature}"
    raise AssertionError("unreachable")


def hide_kubernetes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``import kubernetes`` fail, as when the extra is not installed."""
    for name in list(sys.modules):
        if name == "kubernetes" or name.startswith("kubernetes."):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "kubernetes", None)


def test_auth_provider_without_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hide_kubernetes(monkeypatch)
    doc = single(user={"auth-provider": {"name": "oidc", "config": {"id-token": jwt({})}}})
    with pytest.raises(ConfigError) as caught:
        load_config(write_yaml(tmp_path / "config", doc))
    assert str(caught.value) == (
        "user 'ctx-user' uses the auth-provider 'oidc', which needs the optional extra: "
        "pip install 'kubereflector[auth-providers]'"
    )


def test_unsupported_auth_provider(tmp_path: Path) -> None:
    doc = single(user={"auth-provider": {"name": "azure", "config": {"access-token": "x"}}})
    with pytest.raises(ConfigError, match="auth-provider 'azure', which is not supported"):
        load_config(write_yaml(tmp_path / "config", doc))


@pytest.mark.asyncio
async def test_oidc_id_token_through_the_kubernetes_package(tmp_path: Path) -> None:
    token = jwt({"iss": "https://issuer.example", "exp": 4102444800})
    provider = {
        "name": "oidc",
        "config": {"id-token": token, "idp-issuer-url": "https://issuer.example", "client-id": "c"},
    }
    config = load_config(write_yaml(tmp_path / "config", single(user={"auth-provider": provider})))
    assert isinstance(config.auth, Auth)
    assert repr(config.auth) == "AuthProviderAuth('oidc', user='ctx-user')"
    assert await headers(config) == {"Authorization": f"Bearer {token}"}
    config.auth.invalidate()
    assert await headers(config) == {"Authorization": f"Bearer {token}"}


@pytest.mark.asyncio
async def test_oidc_that_is_not_a_jwt(tmp_path: Path) -> None:
    provider = {"name": "oidc", "config": {"id-token": "not-a-jwt"}}
    config = load_config(write_yaml(tmp_path / "config", single(user={"auth-provider": provider})))
    with pytest.raises(ConfigError, match="gave no token"):
        await config.auth.authorize()


@pytest.mark.asyncio
async def test_gcp_access_token_with_client_certificate(tmp_path: Path) -> None:
    provider = {
        "name": "gcp",
        "config": {"access-token": "ya29.token", "expiry": "2999-01-01T00:00:00Z"},
    }
    user = {
        "auth-provider": provider,
        "client-certificate-data": b64(CERT),
        "client-key-data": b64(KEY),
    }
    config = load_config(write_yaml(tmp_path / "config", single(user=user)))
    info = await config.auth.authorize()
    assert info.headers == {"Authorization": "Bearer ya29.token"}
    assert info.client_cert == (CERT.encode(), KEY.encode())


@posix_only
@pytest.mark.asyncio
async def test_gcp_cmd_path_is_refreshed_when_expired(tmp_path: Path) -> None:
    # A gcloud stand-in: a token that expires within the package's 5-minute skew,
    # so every load refreshes it.
    helper = Plugin(
        tmp_path,
        'print(json.dumps({"credential": {"access_token": "gcp-" + str(RUN),'
        ' "token_expiry": expires_in(120)}}))',
        name="gcloud",
    )
    provider = {
        "name": "gcp",
        "config": {"cmd-path": str(helper.path), "cmd-args": "config config-helper --format=json"},
    }
    config = load_config(
        write_yaml(tmp_path / "config", single(user={"auth-provider": provider})), clock=FakeClock()
    )
    assert await headers(config) == {"Authorization": "Bearer gcp-1"}
    assert await headers(config) == {"Authorization": "Bearer gcp-2"}
    assert helper.runs[0]["argv"] == ["config", "config-helper", "--format=json"]


@posix_only
@pytest.mark.asyncio
async def test_gcp_cmd_path_token_is_cached_until_expiry(tmp_path: Path) -> None:
    clock = FakeClock()
    helper = Plugin(
        tmp_path,
        'print(json.dumps({"credential": {"access_token": "gcp-" + str(RUN),'
        ' "token_expiry": expires_in(3600)}}))',
        name="gcloud",
    )
    provider = {"name": "gcp", "config": {"cmd-path": str(helper.path)}}
    config = load_config(
        write_yaml(tmp_path / "config", single(user={"auth-provider": provider})), clock=clock
    )
    assert await headers(config) == {"Authorization": "Bearer gcp-1"}
    assert await headers(config) == {"Authorization": "Bearer gcp-1"}
    assert len(helper.runs) == 1
    clock.step(3600)  # past expiry (less the 5-minute skew) on our clock...
    # ...but the kubernetes package judges expiry on the wall clock: same token.
    assert await headers(config) == {"Authorization": "Bearer gcp-1"}


@posix_only
@pytest.mark.asyncio
async def test_auth_provider_failure_hides_the_helper_output(tmp_path: Path) -> None:
    helper = Plugin(
        tmp_path, "print('helper-stderr-detail', file=sys.stderr)\nsys.exit(2)", name="gcloud"
    )
    provider = {"name": "gcp", "config": {"cmd-path": str(helper.path)}}
    config = load_config(write_yaml(tmp_path / "config", single(user={"auth-provider": provider})))
    with pytest.raises(ConfigError) as caught:
        await config.auth.authorize()
    assert str(caught.value) == "user 'ctx-user': the auth-provider 'gcp' failed (ConfigException)"
    assert "helper-stderr-detail" not in "".join(traceback.format_exception(caught.value))


@pytest.mark.asyncio
async def test_static_token_wins_over_auth_provider(tmp_path: Path) -> None:
    user = {"token": "static", "auth-provider": {"name": "oidc", "config": {"id-token": "x"}}}
    config = load_config(write_yaml(tmp_path / "config", single(user=user)))
    assert await headers(config) == {"Authorization": "Bearer static"}


# -- reprs ---------------------------------------------------------------------


def test_reprs(tmp_path: Path) -> None:
    doc = single(
        cluster={"certificate-authority-data": b64("CA")},
        user={"token": "tok", "client-certificate-data": b64(CERT), "client-key-data": b64(KEY)},
    )
    config = load_config(write_yaml(tmp_path / "config", doc))
    assert repr(config) == (
        "ClientConfig(server='https://k8s.example:6443', context='ctx', namespace='default', "
        "auth=StaticAuth(bearer, client-cert), ca=<set>, insecure_skip_tls_verify=False, "
        "tls_server_name=None)"
    )
    assert repr(TokenFileAuth("/t", reread_after=30)) == "TokenFileAuth('/t', reread_after=30)"


# -- no secret anywhere --------------------------------------------------------

SECRETS = {
    "token": "SECRET-token-4f1a",
    "password": "SECRET-password-9b2c",
    "key": "SECRET-clientkey-77d0",
    "file": "SECRET-tokenfile-31e5",
    "exec": "SECRET-exectoken-c0de",
    "arg": "SECRET-execarg-aa11",
    "env": "SECRET-execenv-bb22",
    "oidc": "SECRETxoidcxsig5e5e",
    "gcp": "SECRET-gcp-helper-dd44",
    "yaml": "SECRET-in-bad-yaml-ee55",
    "b64": "SECRET-in-bad-base64-ff66",
}


@posix_only
@pytest.mark.asyncio
async def test_no_secret_in_reprs_errors_or_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    seen: list[str] = []  # credentials that did reach a request (sanity check)

    def show(obj: object) -> None:
        texts.extend([repr(obj), str(obj)])
        if isinstance(obj, BaseException):
            texts.append("".join(traceback.format_exception(obj)))
            # Every exception in the chain, even a suppressed __context__.
            chained: BaseException | None = obj
            while chained is not None:
                texts.extend([repr(chained), str(chained), repr(chained.args)])
                texts.extend(repr(value) for value in vars(chained).values())
                chained = chained.__cause__ or chained.__context__

    def load(name: str, doc: Any, **kwargs: Any) -> ClientConfig:
        config = load_config(write_yaml(tmp_path / name, doc), **kwargs)
        show(config)
        show(config.auth)
        return config

    async def authorize(config: ClientConfig) -> None:
        info = await config.auth.authorize()
        show(info)
        seen.append(json.dumps(dict(info.headers)) + repr(info.client_cert))

    def expect_error(name: str, doc: Any) -> None:
        with pytest.raises(ConfigError) as caught:
            load(name, doc)
        show(caught.value)

    async def expect_auth_error(config: ClientConfig) -> None:
        with pytest.raises(ConfigError) as caught:
            await config.auth.authorize()
        show(caught.value)

    key_pem = f"-----BEGIN PRIVATE KEY-----\n{SECRETS['key']}\n-----END PRIVATE KEY-----\n"
    cert = {"client-certificate-data": b64(CERT), "client-key-data": b64(key_pem)}

    # Static credentials of every kind.
    await authorize(load("token", single(user={"token": SECRETS["token"], **cert})))
    await authorize(
        load("basic", single(user={"username": "admin", "password": SECRETS["password"]}))
    )
    (tmp_path / "tokenfile").write_text(SECRETS["file"])
    await authorize(load("tokenfile", single(user={"tokenFile": "tokenfile", **cert})))

    # Errors raised while loading, from configs full of secrets.
    expect_error("both", single(user={"token": SECRETS["token"], "password": SECRETS["password"]}))
    expect_error("nokey", single(user={"client-certificate-data": b64(key_pem)}))
    expect_error(
        "badb64",
        single(
            user={
                "token": SECRETS["token"],
                "client-key-data": SECRETS["b64"] + "!",
                "client-certificate-data": b64(CERT),
            }
        ),
    )
    expect_error("ctx", {**single(user={"token": SECRETS["token"]}), "current-context": "nope"})
    bad_yaml = tmp_path / "badyaml"
    bad_yaml.write_text(f"users:\n- name: u\n  user: {{token: [{SECRETS['yaml']}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(bad_yaml)
    show(caught.value)
    expect_error(
        "always",
        single(
            user={
                "exec": {
                    "apiVersion": V1,
                    "command": "p",
                    "interactiveMode": "Always",
                    "args": [SECRETS["arg"]],
                    "env": [{"name": "E", "value": SECRETS["env"]}],
                }
            }
        ),
    )

    # Exec plugins: a working one, then every way one can fail with secrets at hand.
    def exec_user(body: str, name: str) -> dict[str, Any]:
        plugin = Plugin(tmp_path, body, name=name)
        return {
            "exec": {
                "apiVersion": V1,
                "command": str(plugin.path),
                "interactiveMode": "Never",
                "args": ["--secret", SECRETS["arg"]],
                "env": [{"name": "PLUGIN_SECRET", "value": SECRETS["env"]}],
            }
        }

    good = load(
        "exec-good",
        single(
            user=exec_user(
                f"emit({{'token': {SECRETS['exec']!r}, 'expirationTimestamp': expires_in(3600)}})",
                "good",
            )
        ),
    )
    await authorize(good)
    good.auth.invalidate()
    await authorize(good)
    failing = {
        "nonjson": f"print({SECRETS['exec']!r})",
        "kind": f"emit({{'token': {SECRETS['exec']!r}}}, kind={SECRETS['exec']!r} * 3)",
        "version": f"emit({{'token': {SECRETS['exec']!r}}}, api_version={SECRETS['exec']!r})",
        "halfcert": f"emit({{'clientKeyData': {SECRETS['exec']!r}}})",
        "exit": (
            f"print({SECRETS['exec']!r})\nprint('login required', file=sys.stderr)\nsys.exit(4)"
        ),
        "badexpiry": f"emit({{'token': 't', 'expirationTimestamp': {SECRETS['exec']!r}}})",
    }
    for name, body in failing.items():
        await expect_auth_error(load(f"exec-{name}", single(user=exec_user(body, name))))
    missing = single(user=exec_user("", "unused"))
    missing["users"][0]["user"]["exec"]["command"] = str(tmp_path / "no-such-plugin")
    await expect_auth_error(load("exec-missing", missing))

    # Auth-providers: a working oidc token, and a failing gcp helper.
    oidc_token = jwt({"exp": 4102444800}, signature=SECRETS["oidc"])
    oidc = {
        "name": "oidc",
        "config": {
            "id-token": oidc_token,
            "client-secret": SECRETS["password"],
            "refresh-token": SECRETS["token"],
        },
    }
    await authorize(load("oidc", single(user={"auth-provider": oidc, **cert})))
    gcp_helper = Plugin(
        tmp_path,
        f"print({SECRETS['gcp']!r}, file=sys.stderr)\nprint({SECRETS['gcp']!r})\nsys.exit(3)",
        name="gcloud",
    )
    gcp = {
        "name": "gcp",
        "config": {"cmd-path": str(gcp_helper.path), "cmd-args": f"--x {SECRETS['gcp']}"},
    }
    await expect_auth_error(load("gcp", single(user={"auth-provider": gcp})))

    # In-cluster and token files.
    sa = service_account(tmp_path / "sa", token=SECRETS["file"])
    in_cluster = in_cluster_config(
        service_account_dir=sa,
        environ={"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"},
    )
    show(in_cluster)
    await authorize(in_cluster)
    (sa / "token").unlink()
    in_cluster.auth.invalidate()
    await authorize(in_cluster)  # keeps the old token, logs a warning

    texts.append(caplog.text)
    texts.extend(record.getMessage() for record in caplog.records)
    everything = "\n".join(texts)

    # The check is not vacuous: errors, logs and credentials are all there...
    for expected in (
        "exit code 4",
        "login required",
        "not JSON",
        "kind",
        "apiVersion",
        "was not found",
        "gcp",
        "not valid YAML",
        "not valid base64",
        "keeping the token in use",
        "running exec plugin",
        "Always",
    ):
        assert expected in everything, expected
    reached = "\n".join(seen)
    for name in ("token", "password", "file", "exec", "oidc"):
        if name != "password":
            assert SECRETS[name] in reached, name
    assert b64(f"admin:{SECRETS['password']}") in reached
    # ...and no secret is in any repr, message, traceback or log line.
    leaked = sorted(name for name, secret in SECRETS.items() if secret in everything)
    assert not leaked, f"secrets leaked: {leaked}"
    assert b64(key_pem) not in everything
