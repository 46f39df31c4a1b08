"""The "Typed objects and CRDs" page's code does what the page says it does: its blocks
run (their groups made this test's own: declarations are global) and print what their
comments claim; the refusal it shows is the one raised."""

from __future__ import annotations

import linecache
import sys
import types
from typing import Any

import pytest
from typing_extensions import TypedDict

from crd_models import declare, field_schema
from doc_snippets import ROOT, Snippet, snippet
from kubereflector.models import ApiResource, resource_of
from kubereflector.models.crd import StructuralSchemaError

PAGE = "docs/how-to/typed-objects.md"


def run(block: Snippet, *replace: tuple[str, str]) -> dict[str, Any]:
    """Run ``block`` as a module of its own (in ``sys.modules``: the schema resolves the
    classes' annotations in their module), after the replacements."""
    code = block.code
    for old, new in replace:
        assert old in code
        code = code.replace(old, new)
    module = types.ModuleType(f"docs_block_{block.line}")
    module.__file__ = f"<{block.name}>"  # its source, for the fields' docstrings
    linecache.cache[module.__file__] = (len(code), None, code.splitlines(True), module.__file__)
    sys.modules[module.__name__] = module
    exec(compile(code, module.__file__, "exec", dont_inherit=True), module.__dict__)
    return module.__dict__


def test_the_built_in_models_block(capsys: pytest.CaptureFixture[str]) -> None:
    names = run(snippet(PAGE, "The models of the built-in kinds"))
    assert names["node_of"]({"spec": {"containers": [], "nodeName": "n1"}}) == "n1"
    printed = capsys.readouterr().out
    assert printed.startswith("ApiResource(group='apps', version='v1', kind='Deployment', ")


def test_the_foo_block_declares_sample_controllers_foo(capsys: pytest.CaptureFixture[str]) -> None:
    names = run(
        snippet(PAGE, "Custom resources declared in Python"),
        ('group="samplecontroller.k8s.io"', 'group="docs.samplecontroller.k8s.io"'),
    )
    assert capsys.readouterr().out == "foos.docs.samplecontroller.k8s.io\n"
    assert resource_of(names["Foo"]) == ApiResource(
        "docs.samplecontroller.k8s.io", "v1alpha1", "Foo", "foos", namespaced=True
    )
    version = names["crd"]["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["description"] == "FooSpec is the spec for a Foo resource."
    assert spec["properties"]["deploymentName"]["description"].startswith("The name of")
    assert spec["properties"]["replicas"] == {"type": "integer", "minimum": 1, "maximum": 10}
    columns = [(c["name"], c["type"]) for c in version["additionalPrinterColumns"]]
    assert columns == [("Deployment", "string"), ("Available", "integer"), ("Age", "date")]


def test_the_constraints_block_gives_a_structural_schema() -> None:
    names = run(snippet(PAGE, "Types and constraints"))
    properties = field_schema(names["ShopSpec"])["properties"]
    assert properties["ports"]["x-kubernetes-list-map-keys"] == ["name"]
    assert properties["ports"]["items"]["properties"]["protocol"]["default"] == "TCP"
    assert properties["tags"]["x-kubernetes-list-type"] == "set"
    assert properties["scaling"]["x-kubernetes-validations"][0]["message"] == "min is above max"
    assert properties["currency"]["x-kubernetes-validations"][0]["rule"] == "self == oldSelf"
    assert properties["template"]["x-kubernetes-embedded-resource"] is True


def test_the_versions_block(capsys: pytest.CaptureFixture[str]) -> None:
    run(
        snippet(PAGE, "Several versions"),
        ('group="example.com", version="v1alpha1"', 'group="docs.example.com", version="v1alpha1"'),
        ('group="example.com", version="v1"', 'group="docs.example.com", version="v1"'),
    )
    assert capsys.readouterr().out == "['v1', 'v1alpha1'] v1\n2\n"


class Cat(TypedDict):
    meow: str


class Dog(TypedDict):
    woof: str


class Pet(TypedDict):
    kind: Cat | Dog


class OwnerSpec(TypedDict):
    pets: list[Pet]


def test_the_refusal_shown_is_the_one_raised() -> None:
    text = (ROOT / PAGE).read_text(encoding="utf-8")
    shown = text.split("```text\n", 1)[1].split("```", 1)[0]
    owner = TypedDict("Owner", {"spec": OwnerSpec})  # type: ignore[misc]  # noqa: UP013
    with pytest.raises(StructuralSchemaError) as caught:
        declare(owner).schema()
    assert str(caught.value) == " ".join(shown.split())
