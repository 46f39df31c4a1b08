"""The README's examples run, so they cannot rot."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from kubereflector.testing import FakeClock

README = Path(__file__).resolve().parents[2] / "README.md"


def _python_blocks() -> dict[str, str]:
    """README python blocks by the heading they sit under."""
    blocks: dict[str, str] = {}
    heading = ""
    for match in re.finditer(
        r"^#{2,4} ([^\n]+)$|^```python\n(.*?)^```", README.read_text(), re.M | re.S
    ):
        if match.group(1):
            heading = match.group(1).strip()
        else:
            blocks[heading] = match.group(2)
    return blocks


def _run(heading: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(_python_blocks()[heading], f"README.md ({heading})", "exec"), namespace)
    return namespace


def test_every_python_block_compiles() -> None:
    text = README.read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)
    assert len(blocks) >= 5
    for number, block in enumerate(blocks):
        compile(block, f"README.md (python block {number})", "exec")


def test_the_readme_has_the_examples() -> None:
    assert set(_python_blocks()) >= {
        "Writing to the cluster",
        "The cache: Store and Indexer",
        "The queues: DeltaFIFO and RealFIFO",
        "The Reflector",
    }


def test_store_and_indexer_example() -> None:
    namespace = _run("The cache: Store and Indexer")
    assert len(namespace["pods"].list()) == 2


def test_delta_fifo_example() -> None:
    namespace = _run("The queues: DeltaFIFO and RealFIFO")
    assert len(namespace["seen"]) == 4


@pytest.mark.asyncio
async def test_reflector_example_prints_pod_names_every_period(
    capsys: pytest.CaptureFixture[str],
) -> None:
    namespace = _run("The Reflector")
    source = namespace["source"]
    clock = FakeClock()
    task = asyncio.create_task(namespace["print_pod_names"](source, clock=clock, rounds=2))
    await clock.advance(30)
    source.delete(source.get("default/web-2"))
    await clock.advance(30)
    await task
    assert capsys.readouterr().out.splitlines() == [
        "default/db-0 default/web-1 default/web-2",
        "default/db-0 default/web-1",
    ]


@pytest.mark.asyncio
async def test_testing_your_own_controller_example() -> None:
    namespace = _run("Testing your own controller")
    await namespace["test_a_missed_delete_reaches_the_handler_as_a_tombstone"]()


@pytest.mark.asyncio
async def test_writing_to_the_cluster_example() -> None:
    from kubereflector.client import Client, load_config
    from kubereflector.testing import ApiServerEmulator

    namespace = _run("Writing to the cluster")
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {}, "template": {"spec": {"containers": []}}},
    }
    async with ApiServerEmulator() as server, Client(load_config(server.kubeconfig_path)) as client:
        server.create("namespaces", {"metadata": {"name": "shop"}})
        server.create("deployments.apps", deployment, namespace="shop")
        scaled = await namespace["scale"](client, "shop", "web", 3)
        assert scaled["spec"]["replicas"] == 3
        assert scaled["metadata"]["generation"] == 2
        settings = await namespace["ensure_settings"](client, "shop")
        assert settings["data"] == {"currency": "EUR"}
        (entry,) = settings["metadata"]["managedFields"]
        assert (entry["manager"], entry["operation"]) == ("shop-controller", "Apply")
        await namespace["announce"](client, scaled)
        (event,) = server.objects("events.events.k8s.io", namespace="shop")
        assert (event["reason"], event["regarding"]["name"]) == ("Scaled", "web")


def test_reflector_options_example() -> None:
    from kubereflector import ReflectorOptions
    from kubereflector.client import ClientConfig

    factory = _run("Tuning recovery: ReflectorOptions")["tuned_factory"](
        ClientConfig(server="https://kube.example:6443")
    )
    try:
        assert factory._reflector_options == ReflectorOptions(idle_timeout=45, backoff_cap=120)
        assert factory._custom_options["events"].page_size == 200
    finally:
        asyncio.run(factory.shutdown())


def test_work_queue_example() -> None:
    namespace = _run("Controllers: the work queue")
    queue = namespace["queue"]
    assert len(queue) == 0
    queue.done(namespace["key"])
