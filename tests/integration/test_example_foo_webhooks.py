"""examples/foo_webhooks.py: its conversions round-trip, and the program serves its
webhooks to the emulator (replicas defaulted, a bad or changed deploymentName refused, a Foo
written in one version read in the other), then stops quietly on Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any

import pytest
import pytest_asyncio
from examples_run import EXAMPLES, WAIT, program, read_line
from hypothesis import given, settings
from hypothesis import strategies as st

from kubereflector.client import Client, load_config
from kubereflector.errors import InvalidError
from kubereflector.runtime.webhooks import Conversion
from kubereflector.testing import ApiServerEmulator

PROGRAM_GROUP = "samplecontroller.k8s.io"
"""The group the program serves (its own process)."""


def load_example() -> ModuleType:
    """The example as a module of this process, its Foo in a group of its own: the
    suite's other Foos (the golden one of models.crd's tests) declare
    samplecontroller.k8s.io's versions in this process too."""
    source = (EXAMPLES / "foo_webhooks.py").read_text(encoding="utf-8")
    declared = f'GROUP: Final = "{PROGRAM_GROUP}"'
    assert declared in source
    source = source.replace(declared, 'GROUP: Final = "webhooks.samplecontroller.k8s.io"')
    module = ModuleType("foo_webhooks_under_test")
    module.__file__ = str(EXAMPLES / "foo_webhooks.py")
    sys.modules[module.__name__] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


example = load_example()
GROUP = example.GROUP

names = st.from_regex(r"[a-z]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)
metadata = st.fixed_dictionaries(
    {"name": names, "namespace": names},
    optional={
        # (non-empty: kube drops an empty map, and so may a conversion)
        "annotations": st.dictionaries(
            st.sampled_from(["a", "b/c"]), st.text(max_size=3), min_size=1
        ),
        "labels": st.dictionaries(st.sampled_from(["x", "y"]), names, max_size=2),
    },
)
shared = {"deploymentName": names, "replicas": st.integers(0, 5)}


@settings(max_examples=200, deadline=None)
@given(meta=metadata, spec=st.fixed_dictionaries({}, optional=shared))
def test_v1alpha1_to_the_hub_and_back_is_the_same_foo(meta: Any, spec: Any) -> None:
    conversion = Conversion(example.Foo)
    conversion.spoke(
        example.FooV1alpha1, to_hub=example.v1alpha1_to_v1, from_hub=example.v1_to_v1alpha1
    )
    foo = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "Foo", "metadata": meta, "spec": spec}
    hub = conversion.convert(foo, f"{GROUP}/v1")
    assert conversion.convert(hub, f"{GROUP}/v1alpha1") == foo


@settings(max_examples=200, deadline=None)
@given(
    meta=metadata,
    spec=st.fixed_dictionaries({}, optional={**shared, "paused": st.just(True)}),
)
def test_v1_to_v1alpha1_and_back_keeps_paused(meta: Any, spec: Any) -> None:
    conversion = Conversion(example.Foo)
    conversion.spoke(
        example.FooV1alpha1, to_hub=example.v1alpha1_to_v1, from_hub=example.v1_to_v1alpha1
    )
    foo = {"apiVersion": f"{GROUP}/v1", "kind": "Foo", "metadata": meta, "spec": spec}
    spoke = conversion.convert(foo, f"{GROUP}/v1alpha1")
    assert "paused" not in spoke["spec"]
    assert conversion.convert(spoke, f"{GROUP}/v1") == foo


@pytest_asyncio.fixture
async def server() -> AsyncIterator[ApiServerEmulator]:
    async with ApiServerEmulator() as emulator:
        yield emulator


def foo(name: str, version: str = "v1", group: str = PROGRAM_GROUP, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/{version}",
        "kind": "Foo",
        "metadata": {"name": name},
        "spec": spec,
    }


def path(version: str = "v1", name: str = "", group: str = PROGRAM_GROUP) -> str:
    base = f"/apis/{group}/{version}/namespaces/default/foos"
    return f"{base}/{name}" if name else base


@pytest.mark.asyncio
async def test_the_program_serves_foos_webhooks(server: ApiServerEmulator) -> None:
    args = ["--kubeconfig", server.kubeconfig_path, "--webhook-port", "0", "--install", "foo"]
    async with program(str(EXAMPLES / "foo_webhooks.py"), *args) as proc:
        line = await read_line(proc)
        assert line.startswith("serving Foo webhooks at https://127.0.0.1:")
        async with Client(load_config(server.kubeconfig_path)) as client:
            made = await client.create(path(), foo("a", deploymentName="web"))
            assert made["spec"] == {"deploymentName": "web", "replicas": 1}
            with pytest.raises(InvalidError) as invalid:
                await client.create(path(), foo("b", deploymentName="Web_1"))
            assert invalid.value.message == (
                f'admission webhook "vfoo.{PROGRAM_GROUP}" denied the request: '
                "spec.deploymentName 'Web_1' is not a DNS-1123 label"
            )
            changed = {**made, "spec": {**made["spec"], "deploymentName": "api"}}
            with pytest.raises(InvalidError, match=r"spec\.deploymentName cannot change"):
                await client.update(path("v1", "a"), changed)

            alpha = await client.create(path("v1alpha1"), foo("c", "v1alpha1", deploymentName="db"))
            assert alpha["apiVersion"] == f"{PROGRAM_GROUP}/v1alpha1"
            assert alpha["spec"] == {"deploymentName": "db", "replicas": 1}
            paused = await client.patch(path("v1", "c"), {"spec": {"paused": True}})
            assert paused["spec"] == {"deploymentName": "db", "replicas": 1, "paused": True}
            as_alpha = await client.get(path("v1alpha1", "c"))
            assert as_alpha["spec"] == {"deploymentName": "db", "replicas": 1}
            assert as_alpha["metadata"]["annotations"] == {f"{PROGRAM_GROUP}/paused": "true"}
            stored = server.get(f"foos.{PROGRAM_GROUP}", "c")
            assert stored["apiVersion"] == f"{PROGRAM_GROUP}/v1"
            assert "annotations" not in stored["metadata"]
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), WAIT)
        assert proc.returncode == 0, err.decode()
        assert "Traceback" not in err.decode()


@pytest.mark.asyncio
async def test_without_the_program_nothing_is_defaulted_or_refused(
    server: ApiServerEmulator,
) -> None:
    """The CRD alone: what the program's test sees is its webhooks' doing."""
    async with Client(load_config(server.kubeconfig_path)) as client:
        await client.create(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", example.foo_crd()
        )
        made = await client.create(
            path(group=GROUP), foo("a", group=GROUP, deploymentName="Not_A_Label")
        )
        assert made["spec"] == {"deploymentName": "Not_A_Label"}
