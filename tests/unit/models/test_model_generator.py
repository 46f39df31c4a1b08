"""tools/generate_models.py on a small hand-written spec (``spec/``, in the shape of
kube-apiserver's ``/openapi/v3`` documents): the types it writes, the resources it finds
in the paths, the kind it prefers where groups share a name, the emulator's schemas, and
that its output follows the spec and nothing else."""

from __future__ import annotations

import hashlib
import importlib
import json
import shutil
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from models_generator import FIXTURE_SPEC, ROOT, generate_models
from typing_extensions import NotRequired

from kubereflector.models import ApiResource

gm = generate_models
MODELS = gm.MODELS_DIR
PACKAGE = "fixture_models"


@pytest.fixture(scope="module")
def output() -> dict[Path, str]:
    return gm.generate(FIXTURE_SPEC)


def body(output: dict[Path, str], module: str) -> str:
    """A generated model module's code, below its header."""
    header = gm.read_header(output[MODELS / f"{module}.py"])
    assert header is not None
    return header.body


@pytest.fixture(scope="module")
def package(output: dict[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The generated models, imported as the package ``fixture_models``."""
    root = tmp_path_factory.mktemp("generated")
    (root / PACKAGE).mkdir()
    for path, text in output.items():
        if path.parent == MODELS:
            (root / PACKAGE / path.name).write_text(text, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(root))
        yield __import__(PACKAGE)
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def sub(module: str) -> Any:
    """A module of the generated package (imported on first use, as any submodule)."""
    return importlib.import_module(f"{PACKAGE}.{module}")


def copy_spec(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE_SPEC, tmp_path / "spec"))


def edit_definition(spec: Path, name: str, change: dict[str, Any]) -> None:
    """Change one definition the same way in every document that has it."""
    for file in spec.rglob("*.json"):
        document = json.loads(file.read_text(encoding="utf-8"))
        schemas = document["components"]["schemas"]
        if name in schemas:
            schemas[name] = {**schemas[name], **change}
            file.write_text(json.dumps(document), encoding="utf-8")


# -- types --------------------------------------------------------------------------------------


def test_required_fields_are_plain_and_the_others_not_required(output: dict[Path, str]) -> None:
    core = body(output, "core_v1")
    assert "    containers: list[Container]\n" in core
    assert "    nodeName: NotRequired[str]\n" in core
    assert '    name: str\n    """The container\'s name."""\n' in core
    assert "    containerPort: int\n" in core


def test_a_kind_never_requires_its_envelope_but_a_reference_may(output: dict[Path, str]) -> None:
    core = body(output, "core_v1")
    pod = core[core.index("class Pod(") : core.index("class PodList(")]
    assert "    metadata: NotRequired[meta_v1.ObjectMeta]\n" in pod  # "required" in the spec
    assert "    involvedObject: ObjectReference\n" in core  # Event's, required
    reference = core[core.index("class ObjectReference(") : core.index("class Pod(")]
    assert "    kind: str\n" in reference
    assert "    apiVersion: NotRequired[str]\n" in reference


def test_keys_that_are_no_identifiers_use_the_functional_syntax(
    output: dict[Path, str], package: Any
) -> None:
    meta = body(output, "meta_v1")
    assert '_ListMetaKeys = TypedDict(\n    "_ListMetaKeys",\n' in meta
    assert '        # The token of the next page.\n        "continue": "NotRequired[str]",' in meta
    assert '"x-kubereflector-test": "NotRequired[bool]",' in meta
    assert "class ListMeta(_ListMetaKeys):" in meta
    hints = typing.get_type_hints(sub("meta_v1").ListMeta, include_extras=True)
    assert hints["continue"] == NotRequired[str]
    assert hints["x-kubereflector-test"] == NotRequired[bool]
    assert hints["resourceVersion"] == NotRequired[str]


def test_value_types_int_or_string_quantity_time_and_free_form(output: dict[Path, str]) -> None:
    meta = body(output, "meta_v1")
    assert "IntOrString: TypeAlias = int | str\n" in meta
    assert "Quantity: TypeAlias = str | float\n" in meta
    assert "Time: TypeAlias = str\n" in meta
    assert "RawExtension: TypeAlias = dict[str, JSONValue]\n" in meta
    assert "from kubereflector.models._json import JSONValue\n" in meta
    assert "    creationTimestamp: NotRequired[Time]\n" in meta
    apps = body(output, "apps_v1")
    assert "    maxSurge: NotRequired[meta_v1.IntOrString]\n" in apps
    assert "    revision: NotRequired[meta_v1.RawExtension]\n" in apps


def test_maps_are_dicts_of_their_values(output: dict[Path, str]) -> None:
    assert "    labels: NotRequired[dict[str, str]]\n" in body(output, "meta_v1")
    core = body(output, "core_v1")
    assert "    capacity: NotRequired[dict[str, meta_v1.Quantity]]\n" in core
    assert "    nodeSelector: NotRequired[dict[str, str]]\n" in core


def test_a_shared_definition_is_defined_once_and_imported_where_used(
    output: dict[Path, str], package: Any
) -> None:
    """PodSpec and ObjectMeta are in several documents, as every v3 document repeats
    what it uses; each is defined in its own module only."""
    definitions = [path.name for path, text in output.items() if "\nclass ObjectMeta(" in text]
    assert definitions == ["meta_v1.py"]
    apps = body(output, "apps_v1")
    assert "class PodSpec(" not in apps
    assert "from . import core_v1, meta_v1\n" in apps
    assert "    template: core_v1.PodSpec\n" in apps
    hints = typing.get_type_hints(sub("apps_v1").DeploymentSpec)
    assert hints["template"] is sub("core_v1").PodSpec
    assert sub("apps_v1").Deployment.__module__ == f"{PACKAGE}.apps_v1"


def test_documentation_becomes_docstrings(output: dict[Path, str]) -> None:
    core = body(output, "core_v1")
    assert (
        'class Pod(TypedDict):\n    """A pod.\n\n    Served as ``pods`` in ``v1``, namespaced."""'
        in (core)
    )
    assert '    nodeName: NotRequired[str]\n    """The node it runs on."""\n' in core


# -- resources and names ------------------------------------------------------------------------


def test_resources_come_from_the_paths(package: Any) -> None:
    """Plural and scope from ``[namespaces/{namespace}/]<plural>[/{name}]``; the
    ``status`` subresource, the ``watch/`` paths and the ``scale`` subresource (whose kind
    is another group's) make no resource."""
    of = package.resource_of
    assert of(sub("core_v1").Pod) == ApiResource("", "v1", "Pod", "pods", namespaced=True)
    assert of(sub("core_v1").Node) == ApiResource("", "v1", "Node", "nodes", namespaced=False)
    assert of(sub("core_v1").Event).plural == "events"
    deployment = ApiResource("apps", "v1", "Deployment", "deployments", namespaced=True)
    assert of(sub("apps_v1").Deployment) == deployment
    assert of(sub("apps_v1beta1").Deployment).version == "v1beta1"
    assert of(sub("events_v1").Event).group == "events.k8s.io"
    for served_as_no_resource in (sub("autoscaling_v1").Scale, sub("core_v1").PodList):
        with pytest.raises(LookupError, match=served_as_no_resource.__name__):
            of(served_as_no_resource)


def test_the_preferred_kind_takes_a_shared_name(output: dict[Path, str], package: Any) -> None:
    assert package.Deployment is sub("apps_v1").Deployment  # GA over beta
    assert package.Event is sub("core_v1").Event  # the core group over events.k8s.io
    assert sub("apps_v1beta1").Deployment is not package.Deployment
    assert package.Scale is sub("autoscaling_v1").Scale  # a kind, if no resource
    assert sorted(package.__all__) == [
        "ApiResource",
        "Deployment",
        "Event",
        "JSONValue",
        "ListMeta",  # apimachinery's types models are made of, beside the kinds
        "Node",
        "ObjectMeta",
        "Pod",
        "PodList",
        "Scale",
        "register",
        "resource_of",
    ]
    assert package.ObjectMeta is sub("meta_v1").ObjectMeta
    init = gm.read_header(output[MODELS / "__init__.py"])
    assert init is not None
    assert "    from .apps_v1 import Deployment\n" in init.body  # for mypy
    assert "    from .core_v1 import Event, Node, Pod, PodList\n" in init.body


def test_preference_orders_stability_then_version_then_the_core_group() -> None:
    ranked = [
        ("apps", "v1alpha1"),
        ("apps", "v1beta1"),
        ("apps", "v1beta2"),
        ("events.k8s.io", "v1"),
        ("", "v1"),
        ("autoscaling", "v2"),
    ]
    keys = [gm.preference(group, version) for group, version in ranked]
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)
    with pytest.raises(gm.SpecError, match="v1gamma"):
        gm.preference("apps", "v1gamma")


def test_module_names_follow_the_group() -> None:
    assert gm.module_name("", "v1") == "core_v1"
    assert gm.module_name("apps", "v1") == "apps_v1"
    assert gm.module_name("rbac.authorization.k8s.io", "v1") == "rbac_authorization_v1"
    assert gm.module_name("flowcontrol.apiserver.k8s.io", "v1") == "flowcontrol_apiserver_v1"
    assert gm.module_name("meta.k8s.io", "v1") == "meta_v1"


def test_an_unknown_name_is_an_attribute_error(package: Any) -> None:
    assert "Node" in dir(package)
    with pytest.raises(AttributeError, match="NoSuchKind"):
        _ = package.NoSuchKind


# -- the emulator's schemas ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def schemas(output: dict[Path, str]) -> ModuleType:
    module = ModuleType("fixture_builtin_schemas")
    exec(compile(output[gm.SCHEMAS_FILE], "_builtin_schemas.py", "exec"), module.__dict__)
    return module


def test_schemas_carry_the_merge_metadata_and_the_tree(schemas: ModuleType) -> None:
    field = schemas.Field
    pod_spec = schemas.FIELDS["io.k8s.api.core.v1.PodSpec"]
    assert pod_spec["containers"] == field(
        "io.k8s.api.core.v1.Container",
        container="list",
        list_type="map",
        list_map_keys=("name",),
        key_defaults=(("name", ""),),
        patch_strategy="merge",
        patch_merge_key="name",
    )
    assert pod_spec["nodeSelector"] == field(container="map", map_type="atomic")
    assert "nodeName" not in pod_spec  # nothing to merge
    ports = schemas.FIELDS["io.k8s.api.core.v1.Container"]["ports"]
    assert ports.key_defaults == (("containerPort", 0), ("protocol", "TCP"))
    assert schemas.FIELDS["io.k8s.api.core.v1.Pod"] == {"spec": field("io.k8s.api.core.v1.PodSpec")}
    assert schemas.FIELDS["io.k8s.api.events.v1.Event"]["regarding"].map_type == "granular"
    assert schemas.MAP_TYPES == {"io.k8s.api.core.v1.ObjectReference": "atomic"}
    assert schemas.KINDS[("", "v1", "Pod")] == "io.k8s.api.core.v1.Pod"
    assert schemas.KINDS[("apps", "v1", "Deployment")] == "io.k8s.api.apps.v1.Deployment"


def test_schemas_leave_out_what_merges_by_default(schemas: ModuleType) -> None:
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" not in schemas.FIELDS
    assert ("", "v1", "Node") not in schemas.KINDS
    assert ("apps", "v1beta1", "Deployment") not in schemas.KINDS


# -- the output follows the spec -----------------------------------------------------------------


def test_the_output_is_deterministic(output: dict[Path, str], tmp_path: Path) -> None:
    """Twice the same; and the same from a spec written with other whitespace and key order."""
    assert gm.generate(FIXTURE_SPEC) == output
    spec = copy_spec(tmp_path)
    for file in spec.rglob("*.json"):
        document = json.loads(file.read_text(encoding="utf-8"))
        reordered = dict(reversed(document["components"]["schemas"].items()))
        document["components"]["schemas"] = reordered
        file.write_text(json.dumps(document, indent=4), encoding="utf-8")
    assert gm.generate(spec) == output


def test_a_spec_change_regenerates_the_modules(output: dict[Path, str], tmp_path: Path) -> None:
    spec = copy_spec(tmp_path)
    properties = json.loads((spec / "api/v1.json").read_text(encoding="utf-8"))["components"][
        "schemas"
    ]["io.k8s.api.core.v1.PodSpec"]["properties"]
    edit_definition(
        spec,
        "io.k8s.api.core.v1.PodSpec",
        {"properties": {**properties, "hostname": {"description": "The host.", "type": "string"}}},
    )
    changed = gm.generate(spec)
    core = gm.read_header(changed[MODELS / "core_v1.py"])
    assert core is not None
    assert '    hostname: NotRequired[str]\n    """The host."""\n' in core.body
    assert "hostname" not in output[MODELS / "core_v1.py"]
    before = gm.read_header(output[MODELS / "apps_v1.py"])
    after = gm.read_header(changed[MODELS / "apps_v1.py"])
    assert before is not None
    assert after is not None
    assert after.spec != before.spec  # the header names the spec it came from
    assert after.body == before.body  # apps/v1's own code did not change


def test_the_header_records_the_spec_the_generator_and_the_content(
    output: dict[Path, str],
) -> None:
    generator = hashlib.sha256((ROOT / "tools" / "generate_models.py").read_bytes()).hexdigest()
    for path, text in output.items():
        assert text.startswith(
            "# Generated by tools/generate_models.py from the Kubernetes v1.35 OpenAPI v3 spec: "
            "do not edit.\n"
        ), path
        header = gm.read_header(text)
        assert header is not None, path
        assert header.release == "v1.35"
        assert header.generator == generator
        assert header.content == hashlib.sha256(header.body.encode()).hexdigest()
    assert gm.read_header("# a file of our own\n") is None


def test_main_writes_checks_and_removes_what_is_gone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repository"
    spec = ["--spec", str(FIXTURE_SPEC), "--root", str(root)]
    assert gm.main([*spec, "--check"]) == 1
    assert gm.main(spec) == 0
    assert (root / MODELS / "core_v1.py").is_file()
    assert (root / gm.SCHEMAS_FILE).is_file()
    assert gm.main([*spec, "--check"]) == 0
    edited = root / MODELS / "apps_v1.py"
    edited.write_text(edited.read_text(encoding="utf-8") + "# by hand\n", encoding="utf-8")
    gone = root / MODELS / "batch_v1.py"
    gone.write_text((root / MODELS / "events_v1.py").read_text(encoding="utf-8"), encoding="utf-8")
    own = root / MODELS / "_own.py"
    own.write_text('"""Not generated."""\n', encoding="utf-8")
    capsys.readouterr()
    assert gm.main([*spec, "--check"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"out of date: {MODELS / 'apps_v1.py'}",
        f"out of date: {MODELS / 'batch_v1.py'}",
    ]
    assert gm.main(spec) == 0
    assert "# by hand" not in edited.read_text(encoding="utf-8")
    assert not gone.exists()
    assert own.exists()


# -- what the generator refuses ------------------------------------------------------------------


def test_no_documents(tmp_path: Path) -> None:
    with pytest.raises(gm.SpecError, match="no OpenAPI v3 documents"):
        gm.generate(tmp_path)
    assert gm.main(["--spec", str(tmp_path), "--root", str(tmp_path)]) == 2


def test_two_documents_that_disagree_on_a_definition(tmp_path: Path) -> None:
    spec = copy_spec(tmp_path)
    file = spec / "apis/apps/v1.json"
    document = json.loads(file.read_text(encoding="utf-8"))
    document["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["required"] = []
    file.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(gm.SpecError, match=r"io\.k8s\.api\.core\.v1\.PodSpec differs between"):
        gm.generate(spec)


def test_an_inline_object(tmp_path: Path) -> None:
    spec = copy_spec(tmp_path)
    inline = {"type": "object", "properties": {"a": {"type": "string"}}}
    edit_definition(spec, "io.k8s.api.core.v1.Node", {"properties": {"inline": inline}})
    with pytest.raises(gm.SpecError, match=r"io\.k8s\.api\.core\.v1\.Node\.inline: an inline"):
        gm.generate(spec)


def test_modules_that_would_import_each_other(tmp_path: Path) -> None:
    spec = copy_spec(tmp_path)
    back = {"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}
    properties = {"back": back, "apiVersion": {"type": "string"}}
    edit_definition(spec, "io.k8s.api.core.v1.Node", {"properties": properties})
    with pytest.raises(gm.SpecError, match="import each other: apps_v1 -> core_v1 -> apps_v1"):
        gm.generate(spec)
