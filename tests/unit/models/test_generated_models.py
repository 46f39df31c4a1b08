"""The committed kubereflector.models and the emulator's _builtin_schemas.py: exactly what
tools/generate_models.py writes, and what they give at run time.

Two checks hold the committed files to the generator. One always runs: each file's
header records the sha256 of the code below it (a hand edit shows) and of the generator
(a generator changed without regenerating shows). The other regenerates everything from
the spec and compares; it needs the spec, which is not in the repository: point
``KUBEREFLECTOR_OPENAPI_SPEC`` at a directory of kube-apiserver's OpenAPI v3 documents
(``api/v1.json``, ``apis/<group>/<version>.json``), for v1.35 the directory
``pkg/openapiclient/builtins/1.35`` of https://github.com/kubernetes-sigs/kubectl-validate
(CONTRIBUTING.md says how), and run this module; it is skipped, saying so, without.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import pkgutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from models_generator import ROOT, generate_models
from typing_extensions import get_type_hints, is_typeddict

import kubereflector.models as models
from kubereflector.models import ApiResource, resource_of
from kubereflector.testing.apiserver import _builtin_schemas as schemas

gm = generate_models
SPEC_VARIABLE = "KUBEREFLECTOR_OPENAPI_SPEC"
HAND_WRITTEN = frozenset({"_json", "_registry", "_crd", "crd"})


def generated_files() -> list[Path]:
    """The generated files in the repository: every module of models/ but the hand-written
    ones, and the emulator's schemas."""
    modules = sorted((ROOT / gm.MODELS_DIR).glob("*.py"))
    return [p for p in modules if p.stem not in HAND_WRITTEN] + [ROOT / gm.SCHEMAS_FILE]


def model_modules() -> list[ModuleType]:
    return [
        importlib.import_module(f"kubereflector.models.{info.name}")
        for info in pkgutil.iter_modules(models.__path__)
        if info.name not in HAND_WRITTEN
    ]


def model_classes() -> list[type]:
    return [
        value
        for module in model_modules()
        for name, value in vars(module).items()
        if is_typeddict(value) and not name.startswith("_")
    ]


# -- the committed files are the generator's ------------------------------------------------


def test_each_generated_file_is_as_the_generator_wrote_it() -> None:
    generator = hashlib.sha256((ROOT / "tools" / "generate_models.py").read_bytes()).hexdigest()
    specs = set()
    for path in generated_files():
        header = gm.read_header(path.read_text(encoding="utf-8"))
        assert header is not None, f"{path} has no generated header"
        assert header.content == hashlib.sha256(header.body.encode()).hexdigest(), (
            f"{path} was edited by hand: change tools/generate_models.py and run make models"
        )
        assert header.generator == generator, (
            f"{path} is from another tools/generate_models.py: run make models SPEC=..."
        )
        specs.add((header.release, header.spec))
    assert len(specs) == 1, f"the files come from different specs: {specs}"
    for name in HAND_WRITTEN:
        module = ROOT / gm.MODELS_DIR / name
        paths = sorted(module.glob("*.py")) if module.is_dir() else [module.with_suffix(".py")]
        assert paths, module
        for path in paths:
            assert gm.read_header(path.read_text(encoding="utf-8")) is None, path


def test_the_committed_files_are_what_the_spec_generates() -> None:
    """Regenerates from ``$KUBEREFLECTOR_OPENAPI_SPEC`` (see the module's docstring)."""
    spec = os.environ.get(SPEC_VARIABLE)
    if not spec:
        pytest.skip(f"{SPEC_VARIABLE} is not set: the spec is not in the repository")
    header = gm.read_header((ROOT / gm.SCHEMAS_FILE).read_text(encoding="utf-8"))
    assert header is not None
    generated = gm.generate(Path(spec), header.release)
    assert sorted(generated) == sorted(p.relative_to(ROOT) for p in generated_files())
    different = [
        str(path)
        for path, text in generated.items()
        if (ROOT / path).read_text(encoding="utf-8") != text
    ]
    assert not different, f"out of date (make models SPEC={spec}): {different}"


# -- the models at run time --------------------------------------------------------------------


def test_every_exported_name_imports() -> None:
    api = {"ApiResource", "JSONValue", "register", "resource_of"}
    assert api <= set(models.__all__)
    assert len(models.__all__) == len(set(models.__all__))
    for name in models.__all__:
        value = getattr(models, name)
        if name not in api:
            assert is_typeddict(value), name
            assert value.__name__ == name
    namespace: dict[str, object] = {}
    exec("from kubereflector.models import *", namespace)
    assert set(models.__all__) <= set(namespace)


def test_every_module_lists_what_it_defines() -> None:
    for module in model_modules():
        defined = {
            name
            for name, value in vars(module).items()
            if is_typeddict(value) and value.__module__ == module.__name__
        }
        public = {name for name in defined if not name.startswith("_")}
        assert public <= set(module.__all__), module.__name__
        assert all(hasattr(module, name) for name in module.__all__), module.__name__


def test_every_annotation_resolves_at_run_time() -> None:
    """``typing_extensions.get_type_hints`` works on every model, on every Python
    (``typing``'s own does not know typing_extensions' NotRequired on 3.10); CRD
    schemas that embed a built-in type will be built from the hints."""
    classes = model_classes()
    assert len(classes) > 600
    for cls in classes:
        hints = get_type_hints(cls, include_extras=True)
        assert set(hints) == set(cls.__annotations__), cls
    spec = get_type_hints(models.Deployment)["spec"]
    assert spec is importlib.import_module("kubereflector.models.apps_v1").DeploymentSpec


def test_resource_of_every_resource_kind() -> None:
    """Every kind with a list kind (``PodList``, whose ``items`` are ``Pod``s) is a
    resource; each resource is its class's own kind, in its module's group-version."""
    classes = model_classes()
    listed_items = {
        get_type_hints(cls).get("items") for cls in classes if cls.__name__.endswith("List")
    }
    resources = 0
    for cls in classes:
        listed = list[cls] in listed_items  # type: ignore[valid-type]
        try:
            resource = resource_of(cls)
        except LookupError:
            assert not listed, f"{cls.__module__}.{cls.__name__} has a list but no resource"
            continue
        resources += 1
        assert resource.kind == cls.__name__
        module = cls.__module__.rpartition(".")[2]
        assert gm.module_name(resource.group, resource.version) == module
        assert f"Served as ``{resource.plural}`` in ``{resource.api_version}``" in (
            inspect.getdoc(cls) or ""
        )
    assert resources >= 80


@pytest.mark.parametrize(
    ("kind", "api_version", "plural", "namespaced"),
    [
        ("Pod", "v1", "pods", True),
        ("Node", "v1", "nodes", False),
        ("Namespace", "v1", "namespaces", False),
        ("ConfigMap", "v1", "configmaps", True),
        ("Event", "v1", "events", True),
        ("Endpoints", "v1", "endpoints", True),
        ("PersistentVolume", "v1", "persistentvolumes", False),
        ("Deployment", "apps/v1", "deployments", True),
        ("StatefulSet", "apps/v1", "statefulsets", True),
        ("CronJob", "batch/v1", "cronjobs", True),
        ("HorizontalPodAutoscaler", "autoscaling/v2", "horizontalpodautoscalers", True),
        ("Ingress", "networking.k8s.io/v1", "ingresses", True),
        ("ClusterRole", "rbac.authorization.k8s.io/v1", "clusterroles", False),
        ("RoleBinding", "rbac.authorization.k8s.io/v1", "rolebindings", True),
        ("Lease", "coordination.k8s.io/v1", "leases", True),
        ("CustomResourceDefinition", "apiextensions.k8s.io/v1", "customresourcedefinitions", False),
        ("APIService", "apiregistration.k8s.io/v1", "apiservices", False),
        ("StorageClass", "storage.k8s.io/v1", "storageclasses", False),
        ("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", False),
        ("TokenReview", "authentication.k8s.io/v1", "tokenreviews", False),
        ("ResourceClaim", "resource.k8s.io/v1", "resourceclaims", True),
    ],
)
def test_known_resources(kind: str, api_version: str, plural: str, namespaced: bool) -> None:
    resource = resource_of(getattr(models, kind))
    assert (resource.kind, resource.api_version) == (kind, api_version)
    assert (resource.plural, resource.namespaced) == (plural, namespaced)


def test_other_groups_kinds_of_a_shared_name_are_in_their_modules() -> None:
    events_v1 = importlib.import_module("kubereflector.models.events_v1")
    autoscaling_v1 = importlib.import_module("kubereflector.models.autoscaling_v1")
    assert resource_of(events_v1.Event) == ApiResource(
        "events.k8s.io", "v1", "Event", "events", namespaced=True
    )
    assert resource_of(autoscaling_v1.HorizontalPodAutoscaler).version == "v1"
    assert models.Event is not events_v1.Event
    with pytest.raises(LookupError, match=r"kubereflector\.models\.autoscaling_v1\.Scale"):
        resource_of(models.Scale)  # served only as a subresource


def test_the_package_loads_lazily_and_light() -> None:
    """In a fresh interpreter: ``import kubereflector`` loads no model; the models load no
    HTTP client; a kind loads its own module (and what it uses) only."""
    probe = (
        "import sys\n"
        "import kubereflector\n"
        "assert 'kubereflector.models' not in sys.modules\n"
        "import kubereflector.models\n"
        "loaded = {m for m in sys.modules if m.startswith('kubereflector.models.')}\n"
        "assert loaded == {'kubereflector.models._json', 'kubereflector.models._registry'}\n"
        "from kubereflector.models import Pod\n"
        "assert 'kubereflector.models.core_v1' in sys.modules\n"
        "assert 'kubereflector.models.apps_v1' not in sys.modules\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'yaml')]\n"
        "assert not heavy and 'kubereflector.client' not in sys.modules, heavy\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=25, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok\n", "")


def test_an_unknown_name() -> None:
    with pytest.raises(AttributeError, match="NoSuchKind"):
        _ = models.NoSuchKind
    assert {"Pod", "Deployment", "resource_of"} <= set(dir(models))


# -- the emulator's schemas --------------------------------------------------------------------


def merge_lists(group: str, version: str, kind: str) -> dict[tuple[str, ...], tuple[object, ...]]:
    """Walk a kind's tree: the lists that merge by key (``map``) or as sets, by field path
    (``"*"`` for a list item), with their keys."""
    found: dict[tuple[str, ...], tuple[object, ...]] = {}

    def walk(definition: str, path: tuple[str, ...], seen: frozenset[str]) -> None:
        for name, field in schemas.FIELDS.get(definition, {}).items():
            here = (*path, name)
            if field.list_type in ("map", "set"):
                found[here] = (field.list_type, *field.list_map_keys)
            if field.type and field.type not in seen:
                below = (*here, "*") if field.container == "list" else here
                walk(field.type, below, seen | {definition})

    walk(schemas.KINDS[(group, version, kind)], (), frozenset())
    return found


def test_the_schemas_know_the_lists_the_emulator_keeps_by_hand() -> None:
    """The emulator's hand-kept schemas of Pod and Service, found in the generated data."""
    pod = merge_lists("", "v1", "Pod")
    expected = {
        ("metadata", "finalizers"): ("set",),
        ("metadata", "ownerReferences"): ("map", "uid"),
        ("spec", "volumes"): ("map", "name"),
        ("spec", "containers"): ("map", "name"),
        ("spec", "containers", "*", "ports"): ("map", "containerPort", "protocol"),
        ("spec", "containers", "*", "env"): ("map", "name"),
        ("spec", "initContainers", "*", "volumeMounts"): ("map", "mountPath"),
        ("spec", "ephemeralContainers", "*", "volumeDevices"): ("map", "devicePath"),
        ("spec", "hostAliases"): ("map", "ip"),
        ("spec", "imagePullSecrets"): ("map", "name"),
        ("status", "conditions"): ("map", "type"),
        ("status", "podIPs"): ("map", "ip"),
    }
    assert {path: pod.get(path) for path in expected} == expected
    deployment = merge_lists("apps", "v1", "Deployment")
    assert deployment[("spec", "template", "spec", "containers")] == ("map", "name")
    assert merge_lists("", "v1", "Service")[("spec", "ports")] == ("map", "port", "protocol")
    ports = schemas.FIELDS["io.k8s.api.core.v1.Container"]["ports"]
    assert dict(ports.key_defaults)["protocol"] == "TCP"
    assert ports.patch_strategy == "merge"
    assert ports.patch_merge_key == "containerPort"


def test_the_schemas_know_atomic_objects() -> None:
    event = schemas.FIELDS[schemas.KINDS[("events.k8s.io", "v1", "Event")]]
    assert schemas.MAP_TYPES[event["regarding"].type] == "atomic"
    assert schemas.MAP_TYPES[event["related"].type] == "atomic"
    spec = schemas.FIELDS["io.k8s.api.core.v1.PodSpec"]
    assert spec["nodeSelector"].map_type == "atomic"
