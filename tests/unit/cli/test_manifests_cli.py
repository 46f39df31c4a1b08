"""``kubereflector manifests MODULE:MANAGER``: which manager it loads, what it prints,
and the errors a user can make (the ``--check`` runs: tests/integration/test_rbac_check.py)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kubereflector import cli

OPERATOR = """\
from kubereflector.client import load_config
from kubereflector.runtime import LeaderElection, Manager, Permission

manager = Manager(
    load_config(),
    namespace="shop",
    leader_election=LeaderElection("shop-operator"),
    metrics_port=8080,
    health_port=8081,
)


@manager.reconciler("configmaps", owns=["secrets"], rbac=[Permission("pods", "list")])
async def reconcile(request):
    return None


def build():
    return manager


plain = Manager(load_config(), metrics_port=8080, health_port=8081)
not_a_manager = 42
unresolvable = Manager(load_config())
unresolvable.reconciler("widgets", reconcile=reconcile)
"""


@pytest.fixture
def operator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "shop_operator.py"
    path.write_text(OPERATOR, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "there-is-no-kubeconfig"))
    yield path
    sys.modules.pop("shop_operator", None)


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(["manifests", *argv], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def test_prints_the_manifests_of_a_module_file_as_yaml(operator: Path) -> None:
    status, out, err = run(
        f"{operator}:manager", "-n", "ops", "--image", "shop:2", "--replicas", "2"
    )
    assert (status, err) == (0, "")
    objects = list(yaml.safe_load_all(out))
    assert [o["kind"] for o in objects] == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Deployment",
        "PodDisruptionBudget",
    ]
    assert objects[0]["metadata"] == {
        "name": "shop-operator",  # the Lease's name
        "namespace": "ops",
        "labels": {
            "app.kubernetes.io/name": "shop-operator",
            "app.kubernetes.io/managed-by": "kubereflector",
        },
    }
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]} in objects[1]["rules"]
    deployment = objects[3]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "shop:2"
    # KUBECONFIG is the user's again: the placeholder was for the import only.
    assert os.environ["KUBECONFIG"].endswith("there-is-no-kubeconfig")


def test_a_module_name_a_function_json_and_options_before_the_target(operator: Path) -> None:
    status, out, err = run("-o", "json", "--name", "shop", "shop_operator:build")
    assert (status, err) == (0, "")
    listed = json.loads(out)
    assert (listed["apiVersion"], listed["kind"]) == ("v1", "List")
    assert listed["items"][0]["metadata"]["name"] == "shop"
    assert listed["items"][0]["metadata"]["namespace"] == "default"


def test_replicas_without_leader_election_get_a_warning(operator: Path) -> None:
    status, out, err = run(f"{operator}:plain", "--replicas", "2")
    assert status == 0
    assert err.splitlines() == [
        "kubereflector: warning: 2 replicas without leader election: every replica "
        "reconciles (give the Manager a LeaderElection)"
    ]
    objects = list(yaml.safe_load_all(out))
    kinds = [o["kind"] for o in objects]
    assert kinds == ["ServiceAccount", "Deployment", "PodDisruptionBudget"]  # needs no RBAC
    assert objects[0]["metadata"]["name"] == "shop-operator"  # the module's name


@pytest.mark.parametrize(
    ("argv", "status", "message"),
    [
        (["shop_operator"], 2, "MODULE:MANAGER expected, got 'shop_operator'"),
        (["shop_operator:nope"], 1, "shop_operator has no 'nope'"),
        (["shop_operator:not_a_manager"], 1, "is a int, not a kubereflector.runtime.Manager"),
        (["no_such_module:manager"], 1, "no module named 'no_such_module'"),
        (["missing.py:manager"], 1, "missing.py: no such file"),
        (["shop_operator:unresolvable"], 1, "'widgets' without a server"),
        (["shop_operator:manager", "--name", "Shop"], 2, "name must be a DNS-1123 label"),
        (["shop_operator:manager", "--replicas", "0"], 2, "argument --replicas: must be >= 1"),
        (["shop_operator:manager", "--check"], 2, "--check needs the command to run"),
        (["shop_operator:manager", "pytest"], 2, "unrecognized arguments: pytest"),
        (["shop_operator:manager", "--report-only"], 2, "--report-only goes with --check"),
    ],
)
def test_mistakes_are_one_line_and_an_exit_status(
    operator: Path, argv: list[str], status: int, message: str
) -> None:
    got, out, err = run(*argv)
    assert got == status
    assert out == ""
    *usage, line = err.splitlines()  # argparse's own errors come after the usage line
    assert len(usage) <= 1, err
    assert message in line


def test_help_shows_the_options_and_the_check() -> None:
    out = io.StringIO()
    assert cli.main(["manifests", "--help"], stdout=out, stderr=io.StringIO()) == 0
    text = out.getvalue()
    for option in (
        "--namespace",
        "--image",
        "--replicas",
        "--report-only",
        "[--check COMMAND ...]",
    ):
        assert option in text


def test_the_command_line_loads_the_runtime_only_for_manifests() -> None:
    code = "import sys, kubereflector.cli; print('kubereflector.runtime' in sys.modules)"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=20
    )
    assert loaded.stdout.strip() == "False"


def test_a_module_that_fails_to_import_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_operator.py").write_text(
        textwrap.dedent("""
            import no_such_dependency
        """),
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    status, _, err = run("broken_operator:manager")
    assert status == 1
    assert "ModuleNotFoundError" in err or "no_such_dependency" in err
