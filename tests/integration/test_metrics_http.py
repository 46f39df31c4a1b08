"""The metrics and probe server over HTTP, and the REST client's request metrics
against the target (the emulator, or a real cluster)."""

from __future__ import annotations

import aiohttp
import pytest
from conftest import Target
from prometheus_client.parser import text_string_to_metric_families

from kubereflector.client import Client
from kubereflector.metrics import Metrics, MetricsServer

pytestmark = pytest.mark.asyncio


async def fetch(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), await resp.text()


async def test_metrics_and_probes_are_served() -> None:
    metrics = Metrics(process=False)
    metrics.controller("demo").reconciled("success", 0.01)
    ready = {"informers": False}
    server = MetricsServer(
        host="127.0.0.1",
        metrics=metrics,
        healthz={"ping": lambda: True},
        readyz={"ping": lambda: True, "informers": lambda: ready["informers"]},
    )
    await server.start()
    try:
        assert server.paths() == ["/metrics", "/healthz", "/readyz"]
        status, content_type, body = await fetch(server.url + "/metrics")
        assert status == 200
        assert content_type.startswith("text/plain")
        families = {f.name: f for f in text_string_to_metric_families(body)}
        reconciles = families["controller_runtime_reconcile"].samples
        assert any(s.labels == {"controller": "demo", "result": "success"} for s in reconciles)

        assert await fetch(server.url + "/healthz") == (200, "text/plain; charset=utf-8", "ok")
        status, _, body = await fetch(server.url + "/readyz")
        assert status == 500
        assert body == "[-]informers failed\nreadyz check failed\n"
        status, _, body = await fetch(server.url + "/readyz?verbose")
        assert body.splitlines()[:2] == ["[+]ping ok", "[-]informers failed"]
        ready["informers"] = True
        status, _, body = await fetch(server.url + "/readyz?verbose")
        assert status == 200
        assert body == "[+]ping ok\n[+]informers ok\nreadyz check passed\n"
        assert (await fetch(server.url + "/nothing"))[0] == 404
    finally:
        await server.stop()
    with pytest.raises(aiohttp.ClientConnectionError):
        await fetch(server.url + "/healthz")


async def test_a_check_that_raises_fails() -> None:
    def broken() -> bool:
        raise RuntimeError("boom")

    server = MetricsServer(host="127.0.0.1", healthz={"broken": broken})
    await server.start()
    try:
        assert server.paths() == ["/healthz"]
        assert (await fetch(server.url + "/healthz"))[0] == 500
        assert (await fetch(server.url + "/metrics"))[0] == 404
    finally:
        await server.stop()


async def test_rest_client_requests_are_counted(target: Target) -> None:
    metrics = Metrics(process=False)
    client: Client = target.client
    client.request_metrics = metrics.rest_client()
    try:
        await client.get(f"/api/v1/namespaces/{target.namespace}/configmaps")
        with pytest.raises(Exception, match="404"):
            await client.get(f"/api/v1/namespaces/{target.namespace}/configmaps/missing")
    finally:
        client.request_metrics = None
    counts = {
        (s.labels["method"], s.labels["code"]): s.value
        for f in text_string_to_metric_families(metrics.exposition().decode())
        if f.name == "rest_client_requests"
        for s in f.samples
        if s.name.endswith("_total")
    }
    assert counts == {("GET", "200"): 1, ("GET", "404"): 1}
