"""Every program in examples/ runs here, against the emulator or the fake source,
so none of them rots. Each runs as a subprocess; the test reads its output lines
with generous bounds (nothing sleeps); a program that hangs fails its test with
its stacks (tests/programs.py)."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio
from examples_run import EXAMPLES, program, read_line

from kubereflector.testing import ApiServerEmulator
from kubereflector.testing.apiserver import sample_pod
from kubereflector.testing.apiserver._seed import cluster_pods
from programs import PROGRAM_TEST_TIMEOUT
from programs import finish as finish_program

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)]


async def finished(proc: asyncio.subprocess.Process) -> tuple[int, str]:
    out, err = await finish_program(proc)
    assert proc.returncode is not None
    return proc.returncode, out + err


async def interrupted_quietly(proc: asyncio.subprocess.Process) -> None:
    """Ctrl-C (SIGINT) ends a program that follows changes: status 0, no traceback."""
    proc.send_signal(signal.SIGINT)
    code, output = await finished(proc)
    assert "Traceback" not in output, output
    assert code == 0, output


@pytest_asyncio.fixture
async def server() -> AsyncIterator[ApiServerEmulator]:
    async with ApiServerEmulator() as emulator:
        emulator.create("pods", sample_pod("web-1", labels={"app": "web"}, node_name="n1"))
        emulator.create("pods", sample_pod("web-2", labels={"app": "web"}, node_name="n2"))
        emulator.create("pods", sample_pod("db-0", labels={"app": "db"}, node_name="n1"))
        yield emulator


async def test_print_pod_names(server: ApiServerEmulator) -> None:
    args = ["--kubeconfig", server.kubeconfig_path, "--every", "0.2", "--rounds", "0"]
    async with program(str(EXAMPLES / "print_pod_names.py"), *args) as proc:
        names = await read_line(proc)
        while "default/web-1" not in names:  # the first print may precede the sync
            names = await read_line(proc)
        assert names == "default/db-0 default/web-1 default/web-2"
        server.delete("pods", "web-2", namespace="default")
        while names != "default/db-0 default/web-1":
            names = await read_line(proc)
        await interrupted_quietly(proc)


async def test_delete_controller() -> None:
    async with program(str(EXAMPLES / "delete_controller.py")) as proc:
        code, output = await finished(proc)
    assert code == 0, output
    assert output.split() == ["a-hello", "b-controller", "c-framework"]


async def test_pods_by_node(server: ApiServerEmulator) -> None:
    args = ["--kubeconfig", server.kubeconfig_path]
    async with program(str(EXAMPLES / "pods_by_node.py"), *args) as proc:
        assert [await read_line(proc), await read_line(proc)] == [
            "n1: 2 pods: db-0, web-1",
            "n2: 1 pods: web-2",
        ]
        # The controller then works through its queue: the initial adds first
        # (a reconcile of every node), then the change below.
        server.create("pods", sample_pod("web-3", node_name="n2"))
        report = await read_line(proc)
        while report != "n2: 2 pods: web-2, web-3":
            assert report in (
                "n1: 2 pods: db-0, web-1",
                "n2: 1 pods: web-2",
                "n2: 2 pods: web-2, web-3",
            )
            report = await read_line(proc)
        await interrupted_quietly(proc)


async def test_pods_by_node_once(server: ApiServerEmulator) -> None:
    args = ["--kubeconfig", server.kubeconfig_path, "--once"]
    async with program(str(EXAMPLES / "pods_by_node.py"), *args) as proc:
        code, output = await finished(proc)
    assert code == 0, output
    assert output.splitlines() == ["n1: 2 pods: db-0, web-1", "n2: 1 pods: web-2"]


async def test_pods_by_node_finds_the_seeded_nodes() -> None:
    """Against the pods `kubereflector emulator --seed-pods` serves, the example finds
    what it looks for: pods by spec.nodeName (the Pending ones have no node)."""
    seeded = list(cluster_pods(30))
    by_node: dict[str, list[str]] = {}
    for pod in seeded:
        if "nodeName" in pod["spec"]:
            by_node.setdefault(pod["spec"]["nodeName"], []).append(pod["metadata"]["name"])
    assert sorted(by_node) == ["node-a", "node-b", "node-c"]
    assert sum(map(len, by_node.values())) < len(seeded)  # some Pending, unscheduled
    async with ApiServerEmulator() as server:
        for pod in seeded:
            server.create("pods", pod)
        args = ["--kubeconfig", server.kubeconfig_path, "--once"]
        async with program(str(EXAMPLES / "pods_by_node.py"), *args) as proc:
            code, output = await finished(proc)
    assert code == 0, output
    assert output.splitlines() == [
        f"{node}: {len(names)} pods: {', '.join(sorted(names))}"
        for node, names in sorted(by_node.items())
    ]


async def test_lister_web(server: ApiServerEmulator) -> None:
    args = ["--kubeconfig", server.kubeconfig_path, "--port", "0"]
    async with program(str(EXAMPLES / "lister_web.py"), *args) as proc:
        banner = await read_line(proc)
        assert banner.startswith("serving on http://127.0.0.1:")
        url = banner.removeprefix("serving on ")
        async with aiohttp.ClientSession() as session:

            async def get(query: str) -> tuple[int, object]:
                async with session.get(f"{url}/pods{query}") as response:
                    text = await response.text()
                    return response.status, json.loads(text) if response.status == 200 else text

            assert await get("") == (200, ["default/db-0", "default/web-1", "default/web-2"])
            assert await get("?selector=app%3Dweb") == (200, ["default/web-1", "default/web-2"])
            assert await get("?namespace=kube-system") == (200, [])
            status, text = await get("?selector=app%20in%20(web")
            assert status == 400
            assert "app in (web" in str(text)
        await interrupted_quietly(proc)
