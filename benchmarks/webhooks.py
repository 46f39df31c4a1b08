"""Admission reviews per second and latency of the webhook server, against a bare aiohttp
handler doing the same JSON round trip.

    .venv/bin/python benchmarks/webhooks.py [--requests 5000] [--concurrency 8] [--repeat 3]

Each server runs in a process of its own, over HTTPS with keep-alive, and answers the
AdmissionReview of a Pod (about 2 KB) that a client in this process POSTs, ``concurrency``
requests at a time on as many kept-alive connections:

- **bare aiohttp**: a low-level ``aiohttp.web.Server`` handler that reads the body,
  decodes it (msgspec), and answers ``allowed: true`` with the request's uid: the floor;
- **WebhookServer, async**: kubereflector's server with a no-op coroutine validator
  (the review checked, the request typed, the handler called under its timeout, the
  metrics counted);
- **WebhookServer, plain**: the same with a no-op plain-function validator, which runs
  on a worker thread.

Reported: reviews per second, the median and the 99th percentile of the request
latency (seen by the client), and each server's rate over the bare handler's (the target
for the async validator is >= 0.8). Best of ``repeat`` runs, the servers taking turns;
nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import multiprocessing
import ssl
import statistics
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp
import msgspec
from _measure import machine
from aiohttp import web

from kubereflector.metrics import Metrics
from kubereflector.runtime.webhooks import (
    AdmissionRequest,
    SelfSignedCertificate,
    WebhookOptions,
    Webhooks,
    WebhookServer,
)

PATH = "/validate-core-v1-pod"
SERVERS = ("bare aiohttp", "WebhookServer, async", "WebhookServer, plain")


def pod_review(uid: str) -> bytes:
    """An AdmissionReview of a Pod's creation, as kube-apiserver sends it."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "web-",
            "namespace": "default",
            "labels": {"app": "web", "tier": "frontend", "pod-template-hash": "5d4f8c7b9"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2024-01-01T00:00:00Z"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-5d4f8c7b9",
                    "uid": "7c2f0d4e-8a6b-4a39-9d0f-1b2c3d4e5f60",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "web",
                    "image": "registry.example.com/web:1.2.3",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "env": [{"name": f"VAR_{i}", "value": f"value-{i}"} for i in range(8)],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"cpu": "500m", "memory": "256Mi"},
                    },
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
                }
            ],
            "restartPolicy": "Always",
            "serviceAccountName": "web",
            "nodeSelector": {"kubernetes.io/os": "linux"},
        },
    }
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "groups": ["system:serviceaccounts", "system:authenticated"],
            },
            "object": pod,
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }
    return json.dumps(review).encode()


# -- the servers, each in a process of its own ---------------------------------------------


async def bare(folder: str, ready: Connection) -> None:
    decode = msgspec.json.decode
    encode = msgspec.json.Encoder().encode

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        review = decode(await request.read())
        answer = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True},
        }
        return web.Response(body=encode(answer), content_type="application/json")

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(f"{folder}/tls.crt", f"{folder}/tls.key")
    runner = web.ServerRunner(web.Server(handle, access_log=None))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    ready.send(f"https://127.0.0.1:{runner.addresses[0][1]}")
    await asyncio.Event().wait()


async def kubereflector(folder: str, flavour: str, ready: Connection) -> None:
    hooks = Webhooks()
    if flavour == "async":

        async def allow(obj: dict[str, Any], request: AdmissionRequest[dict[str, Any]]) -> None:
            return None

        hooks.validator("pods", path=PATH)(allow)
    else:

        def allow_plain(obj: dict[str, Any], request: AdmissionRequest[dict[str, Any]]) -> None:
            return None

        hooks.validator("pods", path=PATH)(allow_plain)
    server = WebhookServer(
        hooks,
        port=0,
        host="127.0.0.1",
        options=WebhookOptions(cert_dir=folder),
        metrics=Metrics(process=False).webhooks(),
    )
    await server.start()
    ready.send(server.url)
    await asyncio.Event().wait()


def serve(which: str, folder: str, ready: Connection) -> None:
    if which == SERVERS[0]:
        asyncio.run(bare(folder, ready))
    else:
        asyncio.run(kubereflector(folder, "async" if which == SERVERS[1] else "plain", ready))


# -- the client ------------------------------------------------------------------------------


async def load(url: str, ca: bytes, requests: int, concurrency: int) -> tuple[float, list[float]]:
    """Seconds for ``requests`` reviews, ``concurrency`` at a time, and each one's latency."""
    context = ssl.create_default_context(cadata=ca.decode())
    bodies = [pod_review(f"uid-{i}") for i in range(requests)]
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(limit=concurrency)
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(body: bytes) -> None:
            started = time.perf_counter()
            async with session.post(url + PATH, data=body, headers=headers, ssl=context) as r:
                answer = await r.read()
            latencies.append(time.perf_counter() - started)
            if r.status != 200 or b'"allowed":true' not in answer:
                raise RuntimeError(f"unexpected answer {r.status}: {answer[:200]!r}")

        async def worker(mine: list[bytes]) -> None:
            for body in mine:
                await one(body)

        await asyncio.gather(*(one(bodies[i]) for i in range(min(concurrency, requests))))
        latencies.clear()  # the connections are open: measure from here
        start = time.perf_counter()
        await asyncio.gather(*(worker(bodies[i::concurrency]) for i in range(concurrency)))
        elapsed = time.perf_counter() - start
    return elapsed, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    certificate = SelfSignedCertificate.generate(["127.0.0.1"])
    with tempfile.TemporaryDirectory(prefix="kubereflector-bench-") as folder:
        certificate.write(folder)
        processes, urls = [], {}
        spawn = multiprocessing.get_context("spawn")
        try:
            for which in SERVERS:
                mine, theirs = spawn.Pipe()
                process = spawn.Process(target=serve, args=(which, folder, theirs), daemon=True)
                process.start()
                processes.append(process)
                urls[which] = mine.recv()
            best: dict[str, tuple[float, list[float]]] = {}
            for _ in range(args.repeat):
                for which in SERVERS:
                    result = asyncio.run(
                        load(urls[which], certificate.ca_pem, args.requests, args.concurrency)
                    )
                    if which not in best or result[0] < best[which][0]:
                        best[which] = result
        finally:
            for process in processes:
                process.kill()
                process.join()
    floor = args.requests / best[SERVERS[0]][0]
    print("| server | reviews/s | p50 ms | p99 ms | / bare aiohttp |")
    print("|---|---|---|---|---|")
    for which in SERVERS:
        elapsed, latencies = best[which]
        rate = args.requests / elapsed
        cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
        print(
            f"| {which} | {rate:,.0f} | {cuts[49] * 1000:.2f} | {cuts[98] * 1000:.2f} "
            f"| {rate / floor:.2f} |"
        )
    today = datetime.date.today().isoformat()
    print(
        f"\n{today}; {machine()}; {args.requests:,} reviews of a Pod, {args.concurrency} "
        f"at a time over HTTPS with keep-alive; best of {args.repeat} runs."
    )


if __name__ == "__main__":
    main()
