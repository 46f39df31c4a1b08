"""``kubereflector manifests MODULE:MANAGER``: print what deploys an operator (the CRDs
of its kinds declared in Python, its ServiceAccount, least-privilege RBAC, Deployment,
PodDisruptionBudget, and the Service and configurations of its webhooks: see
:mod:`kubereflector.runtime.manifests`), from its Manager's registrations, as YAML
or JSON; with ``--check COMMAND ...`` (last: all that follows is the command), run
COMMAND against an emulator that enforces that RBAC for the operator's
ServiceAccount and report what it refused (:mod:`._rbac_check`).

``MODULE`` is a module name (imported with the current directory on the path) or a
``.py`` file; ``MANAGER`` names a :class:`~kubereflector.runtime.Manager` in it, or a
function that returns one when called with no arguments (called on an event loop,
as a manager is built). While the module is imported and the manager built,
``KUBECONFIG`` names a placeholder kubeconfig: nothing is sent to any server, and
none is needed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._context import CommandContext
from ._errors import EXIT_OK, CliError, UsageError
from ._parser import Parser

if TYPE_CHECKING:
    from ..runtime import Manager
    from ..runtime.manifests import Manifest

__all__ = ["add_parser", "load_manager", "placeholder_kubeconfig", "run"]

_PLACEHOLDER = """\
apiVersion: v1
kind: Config
clusters:
- name: manifests
  cluster: {server: "https://kubereflector-manifests.invalid"}
users:
- name: manifests
  user: {}
contexts:
- name: manifests
  context: {cluster: manifests, user: manifests}
current-context: manifests
"""


def _replicas(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 (got {value})")
    return value


def add_parser(commands: argparse._SubParsersAction[Parser], parents: Sequence[Parser]) -> Parser:
    """Add the ``manifests`` sub-command (``parents``: the ``--debug`` flag)."""
    parser = commands.add_parser(
        "manifests",
        parents=parents,
        usage="%(prog)s MODULE:MANAGER [options] [--report-only] [--check COMMAND ...]",
        help="print an operator's ServiceAccount, RBAC and Deployment; or check its RBAC",
        description="Print the CRDs (of the kinds declared in Python), ServiceAccount, "
        "least-privilege RBAC, Deployment, PodDisruptionBudget and webhook Service and "
        "configurations of the operator whose Manager MODULE:MANAGER builds. With "
        "--check COMMAND: run COMMAND against an emulator that enforces that RBAC for "
        "the operator's ServiceAccount (KUBECONFIG), and report every request it refused.",
    )
    parser.add_argument(
        "target", metavar="MODULE:MANAGER", help="module (or .py file) and the Manager in it"
    )
    parser.add_argument(
        "--name", help="the objects' name (default: the Lease's, else the module's)"
    )
    parser.add_argument(
        "-n", "--namespace", default="default", help="where the operator runs (default: default)"
    )
    parser.add_argument("--image", help="the container image (default: NAME:latest)")
    parser.add_argument("--replicas", type=_replicas, default=1, help="pods (default: 1)")
    parser.add_argument(
        "-o", "--output", choices=("yaml", "json"), default="yaml", help="yaml (default) or json"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="with --check: serve what RBAC refuses, so that one run finds every gap",
    )
    parser.add_argument(
        "--check",
        nargs=argparse.REMAINDER,
        metavar="COMMAND",
        help="last: run COMMAND (all that follows; such as pytest tests/) against an "
        "emulator with this RBAC enforced, and report what it refused",
    )
    parser.set_defaults(handler=run)
    return parser


@contextlib.contextmanager
def placeholder_kubeconfig() -> Iterator[str]:
    """``KUBECONFIG`` set to a kubeconfig naming no reachable server while this runs."""
    with tempfile.TemporaryDirectory(prefix="kubereflector-manifests-") as tmp:
        path = os.path.join(tmp, "kubeconfig")
        Path(path).write_text(_PLACEHOLDER, encoding="utf-8")
        with kubeconfig_env(path):
            yield path


@contextlib.contextmanager
def kubeconfig_env(path: str) -> Iterator[None]:
    """``KUBECONFIG=path`` while this runs (restored after)."""
    saved = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = path
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = saved


def _import(module: str) -> Any:
    if module.endswith(".py") or os.sep in module or "/" in module:
        path = Path(module)
        if not path.is_file():
            raise CliError(f"{module}: no such file")
        name = f"_kubereflector_manifests_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise CliError(f"{module}: cannot be imported as a Python module")
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[name] = loaded
        try:
            spec.loader.exec_module(loaded)
        except BaseException:
            del sys.modules[name]
            raise
        return loaded
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name is not None and module.startswith(err.name):
            raise CliError(f"no module named {module!r} (from {cwd})") from None
        raise


def load_manager(target: str) -> Manager:
    """The Manager ``MODULE:NAME`` names (a Manager, or a function returning one);
    call it on an event loop. Raises :class:`UsageError` for a target without a
    ``:``, :class:`CliError` for one that names no Manager."""
    from ..runtime import Manager  # the runtime loads only for this command

    module_name, colon, attribute = target.rpartition(":")
    if not colon or not module_name or not attribute:
        raise UsageError(f"MODULE:MANAGER expected, got {target!r} (such as app.main:manager)")
    module = _import(module_name)
    try:
        value = getattr(module, attribute)
    except AttributeError:
        raise CliError(f"{module_name} has no {attribute!r}") from None
    if callable(value) and not isinstance(value, Manager):
        value = value()
    if not isinstance(value, Manager):
        raise CliError(
            f"{target} is a {type(value).__name__}, not a kubereflector.runtime.Manager "
            "(or a function returning one)"
        )
    return value


def default_name(target: str, manager: Manager) -> str:
    """The Lease's name, else the module's, as a DNS-1123 label."""
    lease = manager.describe().lease
    if lease is not None:
        return lease[1]
    stem = Path(target.rpartition(":")[0]).stem.rpartition(".")[2]
    return stem.replace("_", "-").lower()


def build(args: argparse.Namespace, manager: Manager) -> tuple[list[Manifest], list[str]]:
    """The manifests ``args`` ask for, and warnings about them."""
    from ..runtime.manifests import manifests

    name = args.name or default_name(args.target, manager)
    description = manager.describe()
    try:
        objects = manifests(
            description,
            name=name,
            namespace=args.namespace,
            image=args.image or f"{name}:latest",
            replicas=args.replicas,
        )
    except ValueError as err:
        raise UsageError(str(err)) from None
    warnings = []
    if args.replicas > 1 and description.lease is None:
        warnings.append(
            f"{args.replicas} replicas without leader election: every replica reconciles "
            "(give the Manager a LeaderElection)"
        )
    return objects, warnings


def dump(objects: Sequence[Manifest], output: str) -> str:
    """The objects as a YAML stream or a JSON ``List``."""
    if output == "json":
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}, indent=2)
    import yaml

    return str(yaml.safe_dump_all(list(objects), sort_keys=False)).rstrip("\n")


async def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    """Print the manifests, or (``--check``) run the check; returns the exit status."""
    command = list(args.check or ())
    if command and command[0] == "--":
        command = command[1:]
    if args.check is not None and not command:
        raise UsageError("--check needs the command to run, such as: --check pytest tests/")
    if args.report_only and args.check is None:
        raise UsageError("--report-only goes with --check")
    with placeholder_kubeconfig():
        manager = load_manager(args.target)
    try:
        objects, warnings = build(args, manager)
    except LookupError as err:  # a resource name that needs a server to resolve
        raise CliError(str(err)) from None
    for warning in warnings:
        ctx.err(f"kubereflector: warning: {warning}")
    if not command:
        ctx.out(dump(objects, args.output))
        return EXIT_OK
    from ._rbac_check import check

    return await check(objects, command, ctx, report_only=args.report_only)
