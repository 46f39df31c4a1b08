"""``kubereflector manifests MODULE:MANAGER --check COMMAND``: the operator's own test
(COMMAND) runs against an emulator that enforces the generated RBAC for the
operator's ServiceAccount; what it refused is reported, with the Permission that
would allow it. The check brings its own emulator, whatever the suite's target.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from programs import PROGRAM_TEST_TIMEOUT, STEP, finish, start

pytestmark = pytest.mark.asyncio

OPERATOR = """\
import asyncio
from kubereflector.client import load_config
from kubereflector.runtime import Manager, Permission, Request

manager = Manager(load_config(), namespace="shop")
done = asyncio.Event()


@manager.reconciler("configmaps", owns=["secrets"], rbac=DECLARED)
async def reconcile(request: Request) -> None:
    try:
        secrets = manager.client.resource("secrets", namespace=request.namespace)
        await secrets.create({"metadata": {"name": request.name}, "stringData": {"a": "b"}})
        await manager.client.resource("pods", namespace=request.namespace).list()
    finally:
        done.set()
"""

TEST = """\
import asyncio, os
from kubereflector.client import Client, load_config
import shop_operator

async def main():
    assert os.environ["KUBEREFLECTOR_CHECK_NAMESPACE"] == "ops"
    admin = load_config(os.environ["KUBEREFLECTOR_CHECK_ADMIN_KUBECONFIG"])
    async with Client(admin) as client, shop_operator.manager as manager:
        run = asyncio.create_task(manager.run(handle_signals=False))
        await client.create("/api/v1/namespaces/shop/configmaps", {"metadata": {"name": "x"}})
        await asyncio.wait_for(shop_operator.done.wait(), 20)
        secret = await client.get("/api/v1/namespaces/shop/secrets/x")
        assert secret["metadata"]["name"] == "x"
        manager.stop()
        await run
    raise SystemExit(int(os.environ.get("EXIT", "0")))

asyncio.run(main())
"""


async def check(
    tmp_path: Path, declared: str, *flags: str, exit_status: int = 0
) -> tuple[int, str, str]:
    (tmp_path / "shop_operator.py").write_text(OPERATOR.replace("DECLARED", declared))
    (tmp_path / "check_shop.py").write_text(TEST)
    proc = await start(
        sys.executable,
        "-m",
        "kubereflector",
        "manifests",
        "shop_operator:manager",
        "--namespace",
        "ops",
        *flags,
        "--check",
        sys.executable,
        "check_shop.py",
        cwd=tmp_path,
        env={**os.environ, "EXIT": str(exit_status)},
    )
    out, err = await finish(proc, 2 * STEP)  # the check runs kubectl several times
    assert proc.returncode is not None
    return proc.returncode, out, err


REFUSED = re.compile(
    r"refused: list pods in shop \((\d+)x\); allow it with Permission\('pods', 'list'\)"
)


@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_an_undeclared_request_is_refused_and_reported(tmp_path: Path) -> None:
    status, out, err = await check(tmp_path, "[]")
    assert status == 1, err
    (line,) = out.splitlines()
    assert REFUSED.fullmatch(line), out
    assert "checking the RBAC of ServiceAccount ops/shop-operator (enforced)" in err
    assert "403 Forbidden: pods is forbidden" in err  # the operator met the refusal


@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_report_only_serves_what_it_would_refuse(tmp_path: Path) -> None:
    status, out, err = await check(tmp_path, "[]", "--report-only")
    assert status == 1, err
    assert REFUSED.fullmatch(out.strip()), out
    assert "(reported)" in err
    assert "403 Forbidden" not in err  # served: the reconcile went on ("403" alone: a port?)


@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_declared_permissions_leave_nothing_to_report(tmp_path: Path) -> None:
    status, out, err = await check(tmp_path, '[Permission("pods", "list")]')
    assert (status, out) == (0, ""), err
    assert err.splitlines()[-1] == "kubereflector: no request was refused"


@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_a_failing_command_gives_its_status(tmp_path: Path) -> None:
    status, out, _ = await check(tmp_path, '[Permission("pods", "list")]', exit_status=3)
    assert (status, out) == (3, "")


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

FOO_CHECK = """\
import asyncio, os, sys
sys.path.insert(0, EXAMPLES)
import foo_controller
from kubereflector import ResourceEventHandlerFuncs
from kubereflector.client import Client, load_config
from kubereflector.models import Deployment

async def main():
    admin = load_config(os.environ["KUBEREFLECTOR_CHECK_ADMIN_KUBECONFIG"])
    flags = ["--namespace", "ops", "--metrics-port", "0", "--health-port", "0"]
    manager = foo_controller.build(foo_controller.parse_args(flags))
    made = asyncio.Event()
    async def seen(deployment):
        if deployment["metadata"]["name"] == "web":
            made.set()
    async with Client(admin) as client, manager:
        run = asyncio.create_task(manager.run(handle_signals=False))
        handlers = ResourceEventHandlerFuncs(on_add=seen)
        manager.informer_for(Deployment).add_event_handler(handlers)
        foo = {"metadata": {"name": "a"}, "spec": {"deploymentName": "web"}}
        foo.update(apiVersion="samplecontroller.kubereflector.io/v1", kind="Foo")
        await client.create("/apis/samplecontroller.kubereflector.io/v1/namespaces/ops/foos", foo)
        await asyncio.wait_for(made.wait(), 20)
        manager.stop()
        await run

asyncio.run(main())
"""


@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_the_foo_operators_manifests_with_webhooks_check_clean(tmp_path: Path) -> None:
    """The example's deployed manifests (its CRD, a webhook Service and configurations)
    go into the check's emulator, but for what calls a Service it cannot reach; the
    operator runs under that RBAC without a refusal."""
    examples = EXAMPLES
    (tmp_path / "check_foo.py").write_text(FOO_CHECK.replace("EXAMPLES", repr(str(examples))))
    proc = await start(
        sys.executable,
        "-m",
        "kubereflector",
        "manifests",
        str(examples / "foo_controller.py") + ":deployed",
        "--namespace",
        "ops",
        "--check",
        sys.executable,
        "check_foo.py",
        cwd=tmp_path,
    )
    out, err = await finish(proc, 2 * STEP)  # a hang fails with the program's stacks
    assert proc.returncode == 0, err
    assert out == ""
    assert err.splitlines()[:2] == [
        "kubereflector: not applied to the emulator: MutatingWebhookConfiguration",
        "kubereflector: not applied to the emulator: ValidatingWebhookConfiguration",
    ]
    assert "kubereflector: no request was refused" in err
