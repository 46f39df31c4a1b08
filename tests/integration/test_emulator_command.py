"""The emulator's command line in-process: serve() from parsed options until its stop
event, and main()'s one-line errors. (The subprocess run, stopped by SIGTERM, is in
test_emulator.py.)

Emulator-only: these tests start their own emulator whatever the suite's target.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from kubereflector.testing.apiserver import main
from kubereflector.testing.apiserver._command import add_arguments, serve
from kubereflector.testing.apiserver._seed import cluster_pods

WAIT = 5.0
PODS = "/api/v1/namespaces/default/pods"


class Lines:
    """What serve() writes to one stream; ``first`` waits for the first line."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._written = asyncio.Event()

    def __call__(self, text: str) -> None:
        self.lines.append(text)
        self._written.set()

    async def first(self) -> str:
        await asyncio.wait_for(self._written.wait(), WAIT)
        return self.lines[0]


@asynccontextmanager
async def serving(*argv: str) -> AsyncIterator[tuple[str, Lines, Lines]]:
    """serve() with ``argv`` until the block ends: the URL, stdout's and stderr's lines."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out, err = Lines(), Lines()
    stop = asyncio.Event()
    task = asyncio.create_task(serve(parser.parse_args(argv), stop, out=out, err=err))
    try:
        url = await out.first()
        yield url, out, err
    finally:
        stop.set()
        await asyncio.wait_for(task, WAIT)


def load_yaml(path: str | Path) -> Any:
    return yaml.safe_load(Path(path).read_text())


def exists(path: str) -> bool:
    return Path(path).exists()


async def get(url: str, token: str | None = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession(headers=headers) as session, session.get(url) as response:
        return response.status, json.loads(await response.read())


@pytest.mark.asyncio
async def test_serves_seeded_pods_until_stopped(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc.yaml"
    argv = ("--no-tls", "--no-auth", "--seed-pods", "3", "--write-kubeconfig", str(kubeconfig))
    async with serving(*argv) as (url, out, err):
        status, body = await get(url + PODS)
        assert status == 200
        names = sorted(p["metadata"]["name"] for p in body["items"])
        assert names == sorted(p["metadata"]["name"] for p in cluster_pods(3))
        config = load_yaml(kubeconfig)
        assert config["clusters"][0]["cluster"] == {"server": url}
        assert config["users"][0]["user"] == {}
    assert out.lines == [url]
    assert err.lines == [f"kubeconfig: {kubeconfig}", "serving 3 pods; stop with Ctrl-C"]
    with pytest.raises(aiohttp.ClientConnectionError):  # stopped with the event
        await get(url + PODS)


@pytest.mark.asyncio
async def test_a_token_over_plain_http_comes_with_a_note() -> None:
    async with serving("--no-tls", "--token", "s3cret") as (url, _, err):
        kubeconfig = err.lines[0].removeprefix("kubeconfig: ")  # the emulator's own
        config = load_yaml(kubeconfig)
        assert config["users"][0]["user"] == {"token": "s3cret"}
        assert (await get(url + PODS))[0] == 401
        assert (await get(url + PODS, "s3cret"))[0] == 200
    assert err.lines[1] == (
        "note: kubectl sends no token over plain HTTP; use it with --no-auth, "
        "or serve HTTPS (the default)"
    )
    assert not exists(kubeconfig)  # removed when the emulator stops


@pytest.mark.asyncio
@pytest.mark.parametrize(("history_limit", "first_event"), [("0", "ERROR"), ("10", "ADDED")])
async def test_history_limit_reaches_the_emulator(history_limit: str, first_event: str) -> None:
    async with serving("--no-tls", "--no-auth", "--history-limit", history_limit) as (url, _, _):
        status, listed = await get(url + PODS)
        assert status == 200
        before = listed["metadata"]["resourceVersion"]
        pod = {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
        async with aiohttp.ClientSession() as session:
            async with session.post(url + PODS, json=pod) as response:
                assert response.status == 201
            watch = f"{url}{PODS}?watch=1&resourceVersion={before}"
            async with session.get(watch) as response:
                line = await asyncio.wait_for(response.content.readline(), WAIT)
        event = json.loads(line)
        assert event["type"] == first_event  # no history kept: too old (410)
        if first_event == "ERROR":
            assert event["object"]["code"] == 410


def test_main_without_the_tls_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "trustme", None)  # as if not installed
    assert main(["--port", "0"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("python -m kubereflector.testing.apiserver: error: ")
    assert "pip install 'kubereflector[emulator]'" in captured.err
    assert "--no-tls" in captured.err


def test_main_on_a_port_in_use_fails_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["--no-tls", "--port", str(port)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "python -m kubereflector.testing.apiserver: error: " in captured.err
    assert str(port) in captured.err
