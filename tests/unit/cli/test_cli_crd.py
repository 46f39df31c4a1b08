"""``kubereflector crd MODULE:CLASS``: the CRDs of custom resources declared in Python, as
YAML or JSON, from a module found from the current directory; and one clear line for each
way naming a class can go wrong."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubereflector import cli
from kubereflector.cli._errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from kubereflector.models.crd import crd_manifest

MODULE = """
    from typing import Annotated

    from msgspec import Meta
    from typing_extensions import NotRequired, TypedDict

    from kubereflector.models.crd import custom_resource
    from kubereflector.models.meta_v1 import ObjectMeta


    class GadgetSpec(TypedDict):
        size: Annotated[int, Meta(ge=1)]


    @custom_resource(group="GROUP", version="v1alpha1", kind="Gadget")
    class GadgetV1alpha1(TypedDict):
        metadata: NotRequired[ObjectMeta]
        spec: GadgetSpec


    @custom_resource(group="GROUP", version="v1", storage=True, short_names=["gd"])
    class Gadget(TypedDict):
        metadata: NotRequired[ObjectMeta]
        spec: GadgetSpec


    @custom_resource(group="GROUP", version="v1", scope="Cluster")
    class Thing(TypedDict):
        spec: GadgetSpec


    class Plain(TypedDict):
        size: int


    @custom_resource(group="GROUP", version="v1")
    class Broken(TypedDict):
        spec: set[int]


    @custom_resource(group="GROUP", version="v1", kind="Clash", storage=True)
    class ClashV1(TypedDict):
        spec: GadgetSpec


    @custom_resource(group="GROUP", version="v2", kind="Clash", plural="clashes2")
    class ClashV2(TypedDict):
        spec: GadgetSpec


    class Outer:
        Inner = Gadget


    VALUE = 3
"""


class Run:
    """One invocation's streams and status."""

    def __init__(self, *argv: str) -> None:
        self.out, self.err = io.StringIO(), io.StringIO()
        self.status = cli.main(list(argv), stdout=self.out, stderr=self.err)

    def error(self) -> str:
        lines = self.err.getvalue().splitlines()
        assert lines, "nothing on stderr"
        return lines[-1]


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module of declarations (a fresh name and group) in the current directory."""
    name = f"crd_cli_{uuid.uuid4().hex[:8]}"
    group = f"{name.replace('_', '-')}.example.com"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(MODULE).replace("GROUP", group), encoding="utf-8"
    )
    (tmp_path / "failing.py").write_text("raise RuntimeError('boom')\n", encoding="utf-8")
    (tmp_path / "needs_more.py").write_text("import not_installed_here\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command puts the directory first
    for loaded in (name, "failing", "needs_more"):
        monkeypatch.delitem(sys.modules, loaded, raising=False)
    return name


def loaded(module: str, name: str) -> Any:
    return getattr(sys.modules[module], name)


def test_every_version_of_a_kind_makes_one_crd(module: str) -> None:
    for named in ("Gadget", "GadgetV1alpha1"):
        run = Run("crd", f"{module}:{named}")
        assert run.status == EXIT_OK, run.err.getvalue()
        (document,) = yaml.safe_load_all(run.out.getvalue())
        assert document == crd_manifest(loaded(module, "Gadget"))
        assert [v["name"] for v in document["spec"]["versions"]] == ["v1", "v1alpha1"]
    assert run.out.getvalue().startswith("apiVersion: apiextensions.k8s.io/v1\n")


def test_several_kinds_are_several_documents_in_the_order_named(module: str) -> None:
    run = Run("crd", f"{module}:Thing", f"{module}:Gadget", f"{module}:GadgetV1alpha1")
    assert run.status == EXIT_OK, run.err.getvalue()
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(run.out.getvalue())]
    assert [n.split(".")[0] for n in names] == ["things", "gadgets"]
    assert run.out.getvalue().startswith("---\n")


def test_json_is_one_object_or_a_list(module: str) -> None:
    one = Run("crd", f"{module}:Gadget", "-o", "json")
    assert one.status == EXIT_OK
    assert json.loads(one.out.getvalue()) == crd_manifest(loaded(module, "Gadget"))
    two = Run("crd", "--output", "json", f"{module}:Gadget", f"{module}:Thing")
    document = json.loads(two.out.getvalue())
    assert (document["apiVersion"], document["kind"]) == ("v1", "List")
    assert [i["spec"]["names"]["kind"] for i in document["items"]] == ["Gadget", "Thing"]


def test_a_nested_class_is_named_with_dots(module: str) -> None:
    run = Run("crd", f"{module}:Outer.Inner")
    assert run.status == EXIT_OK, run.err.getvalue()
    assert yaml.safe_load(run.out.getvalue())["spec"]["names"]["kind"] == "Gadget"


@pytest.mark.parametrize(
    ("argument", "status", "message"),
    [
        ("{m}", EXIT_USAGE, "'{m}': name a class as MODULE:CLASS (myoperator.api:Foo)"),
        (":Gadget", EXIT_USAGE, "name a class as MODULE:CLASS"),
        ("{m}:", EXIT_USAGE, "name a class as MODULE:CLASS"),
        ("no_such_module:Foo", EXIT_ERROR, "no_such_module:Foo: no module named 'no_such_module'"),
        ("{m}.sub:Foo", EXIT_ERROR, "no module named '{m}.sub'"),
        ("failing:Foo", EXIT_ERROR, "failing:Foo: importing failing failed: RuntimeError: boom"),
        ("needs_more:Foo", EXIT_ERROR, "importing needs_more failed: No module named 'not_in"),
        ("{m}:Nope", EXIT_ERROR, "{m}:Nope: {m} has no Nope"),
        ("{m}:Outer.Nope", EXIT_ERROR, "{m}:Outer.Nope: {m} has no Outer.Nope"),
        ("{m}:VALUE", EXIT_ERROR, "{m}:VALUE is not a class but 3"),
        ("{m}:Plain", EXIT_ERROR, "{m}:Plain is not a declared custom resource (decorate it"),
        ("{m}:Broken", EXIT_ERROR, "{m}:Broken: Broken.spec (at .spec of Broken): set[int]"),
        ("{m}:ClashV1", EXIT_ERROR, "with different plural: 'clashes2' and 'clashes'"),
    ],
)
def test_each_mistake_is_one_line_naming_the_argument(
    module: str, argument: str, status: int, message: str
) -> None:
    run = Run("crd", argument.format(m=module))
    assert run.status == status
    assert run.out.getvalue() == ""
    error = run.error()
    assert error.startswith("kubereflector: error: ")
    assert message.format(m=module) in error


def test_debug_shows_where_an_import_failed(module: str) -> None:
    run = Run("crd", "--debug", "failing:Foo")
    assert run.status == EXIT_ERROR
    assert "Traceback" in run.err.getvalue()
    assert "RuntimeError: boom" in run.err.getvalue()


def test_the_command_is_in_the_help() -> None:
    out = io.StringIO()
    assert cli.main(["crd", "--help"], stdout=out, stderr=io.StringIO()) == EXIT_OK
    assert "MODULE:CLASS" in out.getvalue()
    assert "--output" in out.getvalue()


def test_the_declarations_load_only_when_the_command_runs() -> None:
    code = "import sys, kubereflector.cli; print('kubereflector.models.crd' in sys.modules)"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=20
    )
    assert loaded.stdout.strip() == "False"
