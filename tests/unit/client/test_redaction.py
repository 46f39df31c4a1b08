"""The client's own credentials never come back out of what a server echoes.

Servers and proxies may echo a request's Authorization header in an error page,
a Status message, an HTTP reason phrase or a watch ERROR event: whatever the
client puts into an exception message has them replaced with ``<redacted>``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiohttp import web

from fake_http import FakeServer, serve, stream_lines
from kubereflector import ApiError, ListOptions
from kubereflector.client import AuthInfo, Client, ClientConfig, StaticAuth
from kubereflector.client._redact import REDACTED, Redactor, secrets_of
from kubereflector.errors import failure_status

# A service-account token is a JWT of about a kilobyte: longer than any excerpt.
TOKEN = "eyJhbGciOiJSUzI1NiJ9." + "QmVhcmVyVG9rZW5Cb2R5" * 50 + ".c2lnbmF0dXJl"
PASSWORD = "correct-horse-battery-staple"
KEY_LINE = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
KEY = f"-----BEGIN PRIVATE KEY-----\n{KEY_LINE}\n{KEY_LINE[::-1]}\n-----END PRIVATE KEY-----\n"


# -- the Redactor ------------------------------------------------------------------


def test_secrets_of_a_bearer_token() -> None:
    secrets = secrets_of(AuthInfo({"Authorization": f"Bearer {TOKEN}"}))
    assert secrets == {f"Bearer {TOKEN}", TOKEN}


def test_secrets_of_basic_auth_include_the_password() -> None:
    header = "Basic " + base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
    secrets = secrets_of(AuthInfo({"Authorization": header}))
    assert {PASSWORD, f"admin:{PASSWORD}", header, header[6:]} <= secrets


def test_secrets_of_a_client_key_include_each_line() -> None:
    secrets = secrets_of(AuthInfo(client_cert=(b"cert", KEY.encode())))
    assert {KEY.strip(), KEY_LINE, KEY_LINE[::-1]} <= secrets
    assert not any(s.startswith("-----") for s in secrets if s != KEY.strip())


def test_short_strings_are_not_secrets() -> None:
    assert secrets_of(AuthInfo({"Authorization": "Bearer abc"})) == {"Bearer abc"}


def test_a_redactor_replaces_longest_first_and_remembers_rotated_credentials() -> None:
    redactor = Redactor()
    assert redactor.text(f"x {TOKEN}") == f"x {TOKEN}"  # nothing learned yet
    redactor.learn(AuthInfo({"Authorization": f"Bearer {TOKEN}"}))
    redactor.learn(AuthInfo({"Authorization": "Bearer rotated-token-2"}))
    text = f"Authorization: Bearer {TOKEN}; then rotated-token-2"
    assert redactor.text(text) == f"Authorization: {REDACTED}; then {REDACTED}"


def test_a_redactor_cleans_nested_values_without_changing_them() -> None:
    redactor = Redactor()
    redactor.learn(AuthInfo({"Authorization": f"Bearer {TOKEN}"}))
    status = {"message": TOKEN, "details": {"causes": [{"message": f"a {TOKEN}"}]}, "code": 500}
    cleaned = redactor.value(status)
    assert cleaned == {
        "message": REDACTED,
        "details": {"causes": [{"message": f"a {REDACTED}"}]},
        "code": 500,
    }
    assert status["message"] == TOKEN
    deep: object = TOKEN
    for _ in range(100):
        deep = [deep]
    assert TOKEN not in json.dumps(redactor.value(deep))


# -- through the client ----------------------------------------------------------------


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with serve() as s:
        yield s


def echo_page(request: web.Request) -> str:
    """An error page that shows the request's headers, as some proxies do."""
    headers = "\n".join(f"{k}: {v}" for k, v in request.headers.items())
    return f"<html><body><h1>Bad gateway</h1><pre>{headers}</pre></body></html>"


async def html_echo(request: web.Request) -> web.StreamResponse:
    return web.Response(text=echo_page(request), status=502, content_type="text/html")


async def status_echo(request: web.Request) -> web.StreamResponse:
    message = f"rejected {request.headers['Authorization']}"
    details = {"causes": [{"message": request.headers["Authorization"]}]}
    return web.json_response(failure_status(400, "BadRequest", message, details), status=400)


async def reason_echo(request: web.Request) -> web.StreamResponse:
    return web.Response(status=500, reason=f"Bad {request.headers['Authorization']}")


async def list_status_echo(request: web.Request) -> web.StreamResponse:
    # A Failure Status with HTTP 200, echoing the credentials.
    message = f"denied for {request.headers['Authorization']}"
    return web.json_response(failure_status(403, "Forbidden", message))


async def watch_error_echo(request: web.Request) -> web.StreamResponse:
    status = failure_status(500, "InternalError", f"echo {request.headers['Authorization']}")
    line = json.dumps({"type": "ERROR", "object": status}).encode() + b"\n"
    return await stream_lines(request, line)


def basic_header() -> str:
    return "Basic " + base64.b64encode(f"admin:{PASSWORD}".encode()).decode()


@pytest.mark.parametrize(
    "auth",
    [
        StaticAuth(token=TOKEN),
        StaticAuth(username="admin", password=PASSWORD),
    ],
    ids=["bearer", "basic"],
)
@pytest.mark.parametrize(
    "handler", [html_echo, status_echo, reason_echo, list_status_echo], ids=lambda h: h.__name__
)
@pytest.mark.asyncio
async def test_echoed_credentials_never_reach_an_error(
    server: FakeServer, auth: StaticAuth, handler: object
) -> None:
    server.route("GET", "/api/v1/pods", handler)  # type: ignore[arg-type]
    async with Client(ClientConfig(server=server.url, auth=auth)) as client:
        with pytest.raises(ApiError) as info:
            await client.list("/api/v1/pods", ListOptions())
    err = info.value
    shown = " ".join([str(err), repr(err), repr(err.details), err.reason, err.message])
    for secret in (TOKEN, PASSWORD, basic_header()[6:], TOKEN[:40], TOKEN[-40:]):
        assert secret not in shown
    assert REDACTED in shown
    assert err.url == f"{server.url}/api/v1/pods"


@pytest.mark.asyncio
async def test_a_watch_error_event_echoing_the_token_is_redacted(server: FakeServer) -> None:
    server.route("GET", "/api/v1/pods", watch_error_echo)
    config = ClientConfig(server=server.url, auth=StaticAuth(token=TOKEN))
    async with Client(config) as client, client.watch("/api/v1/pods", ListOptions()) as events:
        (event,) = [e async for e in events]
    assert event.type == "ERROR"
    assert event.object["message"] == f"echo {REDACTED}"
    assert TOKEN not in json.dumps(event.object)


def test_the_client_key_is_redacted_too() -> None:
    redactor = Redactor()
    redactor.learn(AuthInfo(client_cert=(b"cert", KEY.encode())))
    assert KEY_LINE not in redactor.text(f"got a key: {' '.join(KEY.split())}")
