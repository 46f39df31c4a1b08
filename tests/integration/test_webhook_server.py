"""The webhook server over HTTPS (kubereflector.runtime.webhooks.server), without an API
server: reviews answered over keep-alive connections, bad requests answered clearly while
the server keeps serving (a malformed or non-v1 review, another content type or method, an
oversized or slow body, a slow handler), metrics, readiness, and certificates loaded again
when their files change, without a restart.

Timeouts and certificate checks run on a FakeClock the tests move on."""

from __future__ import annotations

import asyncio
import datetime
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypedDict

import aiohttp
import pytest
import pytest_asyncio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from prometheus_client.parser import text_string_to_metric_families

from kubereflector.metrics import Metrics
from kubereflector.models import ApiResource, register
from kubereflector.runtime.webhooks import (
    AdmissionRequest,
    Denied,
    SelfSignedCertificate,
    WebhookOptions,
    Webhooks,
    WebhookServer,
)
from kubereflector.testing import FakeClock

pytestmark = pytest.mark.asyncio

GROUP = "server.test.example.com"


class Doohickey(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: dict[str, Any]
    spec: dict[str, Any]


class DoohickeyV1alpha1(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: dict[str, Any]
    spec: dict[str, Any]


register(Doohickey, ApiResource(GROUP, "v1", "Doohickey", "doohickeys", True))
register(DoohickeyV1alpha1, ApiResource(GROUP, "v1alpha1", "Doohickey", "doohickeys", True))

VALIDATE = "/validate-server-test-example-com-v1-doohickey"
MUTATE = "/mutate-server-test-example-com-v1-doohickey"


def admission_review(spec: dict[str, Any], uid: str = "u-1") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": GROUP, "version": "v1", "kind": "Doohickey"},
            "resource": {"group": GROUP, "version": "v1", "resource": "doohickeys"},
            "operation": "CREATE",
            "namespace": "ns",
            "name": "d",
            "object": {
                "apiVersion": f"{GROUP}/v1",
                "kind": "Doohickey",
                "metadata": {"name": "d", "namespace": "ns"},
                "spec": spec,
            },
        },
    }


class Slow:
    """Holds the validator of a ``{"slow": true}`` object until released."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()


class Served:
    """A running server and a client session trusting it."""

    def __init__(
        self,
        server: WebhookServer,
        session: aiohttp.ClientSession,
        clock: FakeClock,
        slow: Slow | None = None,
    ) -> None:
        self.server = server
        self.session = session
        self.clock = clock
        self.slow = slow or Slow()

    def context(self) -> ssl.SSLContext:
        bundle = self.server.ca_bundle
        assert bundle is not None
        return ssl.create_default_context(cadata=bundle.decode())

    async def post(
        self, path: str, body: Any, *, content_type: str = "application/json", **params: str
    ) -> tuple[int, dict[str, Any]]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with self.session.post(
            self.server.url + path,
            data=data,
            params=params,
            headers={"Content-Type": content_type},
            ssl=self.context(),
        ) as response:
            return response.status, await response.json()


def build(
    clock: FakeClock, slow: Slow | None = None, **options: Any
) -> tuple[WebhookServer, Metrics]:
    hooks = Webhooks()
    metrics = Metrics(process=False)
    held = slow or Slow()

    @hooks.validator(Doohickey)
    async def check(obj: Doohickey, request: AdmissionRequest[Doohickey]) -> list[str]:
        if obj["spec"].get("slow"):
            held.started.set()
            await held.release.wait()
        if obj["spec"].get("size", 0) > 3:
            raise Denied("size is at most 3")
        return ["checked"]

    @hooks.defaulter(Doohickey)
    def default(obj: Doohickey, request: AdmissionRequest[Doohickey]) -> None:
        obj["spec"].setdefault("size", 1)

    hooks.converter(
        Doohickey,
        DoohickeyV1alpha1,
        to_hub=lambda o: {**o, "spec": {"size": o["spec"]["count"]}},  # type: ignore[typeddict-item]
        from_hub=lambda o: {**o, "spec": {"count": o["spec"]["size"]}},  # type: ignore[typeddict-item]
    )
    server = WebhookServer(
        hooks,
        port=0,
        host="127.0.0.1",
        options=WebhookOptions(**options),
        metrics=metrics.webhooks(),
        clock=clock,
    )
    return server, metrics


@pytest_asyncio.fixture
async def served() -> AsyncIterator[Served]:
    clock = FakeClock()
    slow = Slow()
    server, _ = build(clock, slow)
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            yield Served(server, session, clock, slow)
    finally:
        slow.release.set()
        await server.stop()


async def test_reviews_are_answered_over_one_kept_alive_connection(served: Served) -> None:
    opened: list[object] = []
    tracing = aiohttp.TraceConfig()

    async def connected(*_: object) -> None:
        opened.append(_)

    tracing.on_connection_create_end.append(connected)
    context = served.context()
    async with aiohttp.ClientSession(trace_configs=[tracing]) as session:
        answers = []
        for size in (1, 9):
            async with session.post(
                served.server.url + VALIDATE, json=admission_review({"size": size}), ssl=context
            ) as response:
                answers.append((response.status, (await response.json())["response"]))
    assert len(opened) == 1  # one connection, kept alive
    assert answers[0] == (200, {"uid": "u-1", "allowed": True, "warnings": ["checked"]})
    status, denied = answers[1]
    assert status == 200
    assert denied["allowed"] is False
    assert denied["status"]["message"] == "size is at most 3"


async def test_a_defaulter_answers_a_patch(served: Served) -> None:
    status, answer = await served.post(MUTATE, admission_review({}))
    assert status == 200
    assert answer["response"]["patchType"] == "JSONPatch"


async def test_conversions_are_served_at_convert(served: Served) -> None:
    review = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "c-1",
            "desiredAPIVersion": f"{GROUP}/v1alpha1",
            "objects": [admission_review({"size": 2})["request"]["object"]],
        },
    }
    status, answer = await served.post("/convert", review)
    assert status == 200
    assert answer["response"]["result"] == {"status": "Success"}
    assert answer["response"]["convertedObjects"][0]["spec"] == {"count": 2}
    assert answer["response"]["convertedObjects"][0]["apiVersion"] == f"{GROUP}/v1alpha1"


@pytest.mark.parametrize(
    ("path", "body", "content_type", "status", "message"),
    [
        ("/nowhere", {}, "application/json", 404, "no webhook is served at /nowhere"),
        (VALIDATE, b"{", "application/json", 400, "the request body is not JSON"),
        (
            VALIDATE,
            {**admission_review({}), "apiVersion": "admission.k8s.io/v1beta1"},
            "application/json",
            400,
            "only admission.k8s.io/v1 is served",
        ),
        (VALIDATE, b"{}", "text/plain", 415, "must be application/json, not text/plain"),
        ("/convert", {"kind": "ConversionReview"}, "application/json", 400, "expected a"),
    ],
)
async def test_bad_requests_get_a_clear_status_and_the_server_keeps_serving(
    served: Served, path: str, body: Any, content_type: str, status: int, message: str
) -> None:
    got, answer = await served.post(path, body, content_type=content_type)
    assert got == status
    assert answer["kind"] == "Status"
    assert answer["code"] == status
    assert message in answer["message"]
    assert (await served.post(VALIDATE, admission_review({"size": 1})))[0] == 200


async def test_another_method_is_not_allowed(served: Served) -> None:
    async with served.session.get(served.server.url + VALIDATE, ssl=served.context()) as response:
        assert response.status == 405
        assert "POST a review" in (await response.json())["message"]


async def test_an_oversized_body_is_refused_unread() -> None:
    clock = FakeClock()
    server, _ = build(clock, max_request_bytes=1024)
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            served = Served(server, session, clock)
            big = json.dumps(admission_review({"pad": "x" * 2000})).encode()
            status, answer = await served.post(VALIDATE, big)
            assert status == 413
            assert answer["message"] == (
                f"the body of {len(big)} bytes is larger than the limit of 1024 bytes"
            )

            async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as read
                for _ in range(4):
                    yield b" " * 400

            async with session.post(
                server.url + VALIDATE,
                data=chunks(),
                headers={"Content-Type": "application/json"},
                ssl=served.context(),
            ) as response:
                assert response.status == 413
            assert (await served.post(VALIDATE, admission_review({"size": 1})))[0] == 200
    finally:
        await server.stop()


async def test_a_slow_handler_is_denied_when_its_time_is_up(served: Served) -> None:
    answer = asyncio.create_task(served.post(VALIDATE, admission_review({"slow": True})))
    await served.slow.started.wait()
    await served.clock.advance(9.0)  # handler_timeout
    status, body = await answer
    assert status == 200
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["message"] == "the webhook handler did not answer in time"


async def test_the_api_servers_timeout_shortens_the_handlers(served: Served) -> None:
    answer = asyncio.create_task(
        served.post(VALIDATE, admission_review({"slow": True}), timeout="2s")
    )
    await served.slow.started.wait()
    await served.clock.advance(1.7)
    assert not answer.done()
    await served.clock.advance(0.2)  # 0.9 of the 2 s kube-apiserver waits
    _status, body = await answer
    assert body["response"]["status"]["message"] == "the webhook handler did not answer in time"


async def test_a_body_that_does_not_arrive_is_dropped(served: Served) -> None:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", served.server.port, ssl=served.context(), server_hostname="127.0.0.1"
    )
    try:
        writer.write(
            f"POST {VALIDATE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 100\r\n\r\n{".encode()
        )
        await writer.drain()
        await served.clock.wait_for_sleepers()
        await served.clock.advance(10.0)  # read_timeout
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408")
    finally:
        writer.close()
    assert (await served.post(VALIDATE, admission_review({"size": 1})))[0] == 200


async def test_metrics_under_controller_runtimes_names() -> None:
    clock = FakeClock()
    server, metrics = build(clock)
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            served = Served(server, session, clock)
            await served.post(VALIDATE, admission_review({"size": 1}))
            await served.post(VALIDATE, b"{")
            await served.post("/nowhere", {})
    finally:
        await server.stop()
    families = {f.name: f for f in text_string_to_metric_families(metrics.exposition().decode())}
    totals = {
        (s.labels["webhook"], s.labels["code"]): s.value
        for s in families["controller_runtime_webhook_requests"].samples
    }
    assert totals == {(VALIDATE, "200"): 1.0, (VALIDATE, "400"): 1.0}
    latency = families["controller_runtime_webhook_latency_seconds"].samples
    assert any(
        s.name.endswith("_count") and s.labels == {"webhook": VALIDATE} and s.value == 2
        for s in latency
    )
    in_flight = families["controller_runtime_webhook_requests_in_flight"].samples
    assert [(s.labels, s.value) for s in in_flight] == [({"webhook": VALIDATE}, 0.0)]


async def test_ready_once_listening_with_a_certificate_until_stopped() -> None:
    server, _ = build(FakeClock())
    assert not server.ready()
    await server.start()
    try:
        assert server.ready()
    finally:
        await server.stop()
    assert not server.ready()


def expired(folder: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=2))
        .not_valid_after(now - datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "tls.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


async def test_an_expired_certificate_is_not_ready(tmp_path: Path) -> None:
    expired(tmp_path)
    server, _ = build(FakeClock(), cert_dir=str(tmp_path))
    await server.start()
    try:
        assert not server.ready()
        assert server.ca_bundle is None
    finally:
        await server.stop()


async def serial_seen(server: WebhookServer, ca: bytes) -> int:
    context = ssl.create_default_context(cadata=ca.decode())
    _, writer = await asyncio.open_connection(
        "127.0.0.1", server.port, ssl=context, server_hostname="127.0.0.1"
    )
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return int(x509.load_der_x509_certificate(der).serial_number)
    finally:
        writer.close()


async def test_rotated_certificate_files_are_served_without_a_restart(tmp_path: Path) -> None:
    first = SelfSignedCertificate.generate(["127.0.0.1"])
    first.write(tmp_path)
    (tmp_path / "ca.crt").write_bytes(first.ca_pem)
    clock = FakeClock()
    server, _ = build(clock, cert_dir=str(tmp_path), cert_check_interval=5.0)
    await server.start()
    try:
        assert server.ca_bundle == first.ca_pem
        before = await serial_seen(server, first.ca_pem)
        assert before == x509.load_pem_x509_certificate(first.cert_pem).serial_number
        second = SelfSignedCertificate.generate(["127.0.0.1"])
        second.write(tmp_path)
        await clock.advance(5.0)  # the next check loads it
        after = await serial_seen(server, second.ca_pem)
        assert after == x509.load_pem_x509_certificate(second.cert_pem).serial_number
        assert not server.reload_certificates()  # unchanged since
        assert server.ready()
        async with aiohttp.ClientSession() as session:
            served = Served(server, session, clock)
            (tmp_path / "ca.crt").write_bytes(second.ca_pem)
            assert (await served.post(VALIDATE, admission_review({"size": 1})))[0] == 200
    finally:
        await server.stop()


async def test_a_broken_rotation_keeps_the_certificate_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = SelfSignedCertificate.generate(["127.0.0.1"])
    first.write(tmp_path)
    clock = FakeClock()
    server, _ = build(clock, cert_dir=str(tmp_path), cert_check_interval=5.0)
    await server.start()
    try:
        (tmp_path / "tls.crt").write_bytes(b"not a certificate")
        await clock.advance(5.0)
        assert "keeping the webhook certificate" in caplog.text
        assert await serial_seen(server, first.ca_pem) == (
            x509.load_pem_x509_certificate(first.cert_pem).serial_number
        )
        assert server.ready()
    finally:
        await server.stop()


async def test_options_and_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="max_request_bytes must be a positive number"):
        WebhookOptions(max_request_bytes=0)
    with pytest.raises(TypeError, match="hosts is a tuple"):
        WebhookOptions(hosts="localhost")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="port must be a port number"):
        WebhookServer(Webhooks(), port=70000)
    with pytest.raises(ValueError, match="needs the client="):
        WebhookServer(Webhooks(), options=WebhookOptions(install="hooks"))
    with pytest.raises(RuntimeError, match="has not started"):
        WebhookServer(Webhooks()).reload_certificates()
