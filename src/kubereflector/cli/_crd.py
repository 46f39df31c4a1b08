"""``kubereflector crd MODULE:CLASS [MODULE:CLASS ...]``: print the
``CustomResourceDefinition`` of custom resources declared in Python
(:mod:`kubereflector.models.crd`), as YAML (one document per CRD) or, with ``-o json``,
as JSON (one object, or a ``List`` of several, as kubectl prints them).

Each ``MODULE:CLASS`` names a class decorated with ``@custom_resource``; the module is
imported with the current directory first on ``sys.path`` (as ``python -m`` would), so
``kubereflector crd myoperator.api:Foo | kubectl apply --server-side -f -`` works from the
project's root. Every declared version of a kind makes one CRD, whichever of its classes
is named (and however many are). Speaks to no server; the declarations' module loads
only when this command runs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from ._context import CommandContext
from ._errors import EXIT_OK, CliError, UsageError
from ._parser import Parser

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[Parser], parents: Sequence[Parser]) -> Parser:
    """Add the ``crd`` sub-command (``parents``: the ``--debug`` flag)."""
    crd = commands.add_parser(
        "crd",
        parents=parents,
        help="print the CRD of custom resources declared in Python",
        description="Print the CustomResourceDefinition of custom resources declared in "
        "Python with @custom_resource (kubereflector.models.crd): every version of each "
        "kind in one CRD.",
    )
    crd.add_argument(
        "classes",
        nargs="+",
        metavar="MODULE:CLASS",
        help="a declared custom resource, e.g. myoperator.api:Foo (the current directory "
        "is searched first)",
    )
    crd.add_argument(
        "-o",
        "--output",
        choices=("yaml", "json"),
        default="yaml",
        help="YAML documents (the default) or JSON",
    )
    crd.set_defaults(handler=run)
    return crd


async def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    """Print the CRDs; returns the exit status. Raises :class:`UsageError` for an argument
    that is not ``MODULE:CLASS``, and :class:`CliError` naming the argument for a module
    that cannot be imported, a missing class, a class that is not a declared custom
    resource, or a declaration whose CRD cannot be built."""
    # Loaded here, not with the command line: the other commands do not pay for it.
    from ..models.crd import StructuralSchemaError, crd_manifest, custom_resource_of

    manifests: dict[str, dict[str, Any]] = {}
    for spec in args.classes:
        model = _load(spec)
        try:
            resource = custom_resource_of(model)
        except LookupError:
            raise CliError(
                f"{spec} is not a declared custom resource (decorate it with "
                "@custom_resource(group=..., version=...) from kubereflector.models.crd)"
            ) from None
        except ValueError as err:
            raise CliError(f"{spec}: {err}") from None
        if resource.name in manifests:
            continue
        try:
            manifests[resource.name] = dict(crd_manifest(model))
        except StructuralSchemaError as err:
            raise CliError(f"{spec}: {err}") from None
    documents = list(manifests.values())
    if args.output == "json":
        document: dict[str, Any] = (
            documents[0]
            if len(documents) == 1
            else {"apiVersion": "v1", "kind": "List", "items": documents}
        )
        ctx.out(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        text = yaml.safe_dump_all(
            documents, sort_keys=False, allow_unicode=True, explicit_start=len(documents) > 1
        )
        ctx.out(text.rstrip("\n"))
    return EXIT_OK


def _load(spec: str) -> type:
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise UsageError(f"{spec!r}: name a class as MODULE:CLASS (myoperator.api:Foo)")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name is not None and f"{module_name}.".startswith(f"{err.name}."):
            raise CliError(f"{spec}: no module named {err.name!r} (from {cwd})") from None
        raise CliError(f"{spec}: importing {module_name} failed: {err}") from err
    except Exception as err:
        raise CliError(
            f"{spec}: importing {module_name} failed: {type(err).__name__}: {err}"
        ) from err
    found: object = module
    missing = object()
    for part in attribute.split("."):
        found = getattr(found, part, missing)
        if found is missing:
            raise CliError(f"{spec}: {module_name} has no {attribute}")
    if not isinstance(found, type):
        raise CliError(f"{spec} is not a class but {found!r}")
    return found
