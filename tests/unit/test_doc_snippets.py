"""The code of the README and of the documentation site runs, so it cannot rot.

Every Python block compiles (and passes ``mypy --strict``: tests/typecheck); the
blocks below are also executed and their results checked. The programs that
follow a cluster until Ctrl-C are run in tests/integration/test_doc_programs.py.
"""

from __future__ import annotations

import asyncio

import pytest

from doc_snippets import DOCUMENTS, README, snippet, snippets
from kubereflector.testing import FakeClock


def test_every_python_block_compiles() -> None:
    blocks = snippets()
    assert len(blocks) >= 15
    documents = {s.document for s in blocks}
    assert README in documents
    assert len(documents & set(DOCUMENTS[1:])) >= 8  # the docs pages, not only the README
    for block in blocks:
        compile(block.code, block.name, "exec")


def test_store_and_indexer_example() -> None:
    namespace = snippet("docs/building-blocks.md", "The cache: Store and Indexer").execute()
    assert len(namespace["pods"].list()) == 2


def test_delta_fifo_example() -> None:
    namespace = snippet("docs/building-blocks.md", "The queues: DeltaFIFO and RealFIFO").execute()
    assert len(namespace["seen"]) == 4


@pytest.mark.asyncio
async def test_reflector_example_prints_pod_names_every_period(
    capsys: pytest.CaptureFixture[str],
) -> None:
    namespace = snippet("docs/building-blocks.md", "The Reflector").execute()
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
async def test_writing_to_the_cluster_example() -> None:
    from kubereflector.client import Client, load_config
    from kubereflector.testing import ApiServerEmulator

    namespace = snippet("docs/how-to/writes.md", "Write to the cluster").execute()
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

    factory = snippet("docs/how-to/recovery.md", "Tune recovery").execute()["tuned_factory"](
        ClientConfig(server="https://kube.example:6443")
    )
    try:
        assert factory._reflector_options == ReflectorOptions(idle_timeout=45, backoff_cap=120)
        assert factory._custom_options["events"].page_size == 200
    finally:
        asyncio.run(factory.shutdown())


def test_work_queue_example() -> None:
    namespace = snippet(
        "docs/how-to/controller.md", "By hand: an informer, a work queue and workers"
    ).execute()
    queue = namespace["queue"]
    assert len(queue) == 0
    queue.done(namespace["key"])


def test_transform_examples() -> None:
    from kubereflector import DeletedFinalStateUnknown

    only_scheduling = snippet("docs/how-to/memory.md", "Keep only what you read").execute()[
        "only_scheduling"
    ]
    pod = {"metadata": {"name": "a"}, "spec": {"nodeName": "n1", "containers": [{}]}}
    assert only_scheduling(pod) == {"metadata": {"name": "a"}, "spec": {"nodeName": "n1"}}
    tombstone = DeletedFinalStateUnknown("default/a", pod)
    assert only_scheduling(tombstone) is tombstone


@pytest.mark.asyncio
async def test_webhooks_testing_example() -> None:
    """The docs' test of webhooks against the emulator passes as written."""
    block = snippet("docs/how-to/webhooks.md", "Test your webhooks without a cluster")
    namespace = block.execute()
    await namespace["test_a_bar_is_defaulted_and_a_bad_one_refused"]()
