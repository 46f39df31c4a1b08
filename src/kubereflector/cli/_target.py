"""What ``watch`` and ``get`` read: RESOURCE and the flags that say where
(:func:`target_arguments`), checked before any request (:func:`check_target_arguments`),
then resolved through discovery and probed once (:func:`connect`)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from .._aio.timeout import within
from ..cache.listwatch import ListOptions
from ..client import Client, ClientConfig, ResourceInfo, ResourceListWatch, load_config
from ..client.paths import validate_namespace
from ..selectors import FieldSelector, LabelSelector
from ._context import CommandContext
from ._errors import CliError, UsageError
from ._parser import Parser

__all__ = ["Target", "by_deadline", "check_target_arguments", "connect", "target_arguments"]

_T = TypeVar("_T")


@dataclass
class Target:
    """A resolved resource, its ListerWatcher, and the namespace read (``None``: all,
    or a cluster-scoped resource). Owned by :func:`connect`: valid inside it only."""

    client: Client
    info: ResourceInfo
    lister_watcher: ResourceListWatch
    namespace: str | None


def target_arguments() -> Parser:
    """A parent parser with RESOURCE, ``-n``, ``-A``, ``-l``, ``--field-selector``,
    ``--kubeconfig`` and ``--context``."""
    connection = Parser(add_help=False)
    connection.add_argument("resource", metavar="RESOURCE", help="pods, po, deploy, a CRD plural")
    connection.add_argument(
        "-n", "--namespace", metavar="NS", help="namespace (default: the context's)"
    )
    connection.add_argument(
        "-A", "--all-namespaces", action="store_true", help="every namespace (wins over -n)"
    )
    connection.add_argument(
        "-l", "--selector", metavar="SELECTOR", default="", help="label selector (app=web,...)"
    )
    connection.add_argument(
        "--field-selector", metavar="F", default="", help="field selector (metadata.name=x)"
    )
    connection.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file")
    connection.add_argument("--context", metavar="C", help="kubeconfig context")
    return connection


def check_target_arguments(args: argparse.Namespace) -> None:
    """Check the namespace and parse the selectors locally, so that a malformed one
    is reported before any request. Raises :class:`UsageError`."""
    if args.namespace:
        try:
            validate_namespace(args.namespace)
        except ValueError as err:
            raise UsageError(f"-n/--namespace: {err}") from None
    _check_selector("label", args.selector or "", LabelSelector.parse)
    _check_selector("field", args.field_selector or "", FieldSelector.parse)


def _check_selector(kind: str, text: str, parse: Callable[[str], object]) -> None:
    try:
        parse(text)
    except ValueError as err:
        message = str(err)
        if "selector" not in message:
            message = f"invalid {kind} selector {text!r}: {message}"
        raise UsageError(message) from None


@contextlib.asynccontextmanager
async def connect(
    args: argparse.Namespace, ctx: CommandContext, deadline: float | None = None
) -> AsyncIterator[Target]:
    """Load the config, resolve the resource and make one small list request, so that
    configuration, discovery, authentication and authorization errors surface here,
    once, instead of inside the informer's retry loop. ``deadline`` (on the
    context's clock) bounds all of it, credential plugins included. The client is
    closed on exit."""
    config = load_config(args.kubeconfig, args.context)
    ctx.context = config.context
    async with Client(config) as client:
        ctx.server = client.server
        yield await by_deadline(args, ctx, deadline, _target(args, config, client))


async def by_deadline(
    args: argparse.Namespace, ctx: CommandContext, deadline: float | None, work: Awaitable[_T]
) -> _T:
    """``await work``, or a one-line :class:`CliError` naming ``--timeout`` once the
    context's clock reaches ``deadline`` (``None``: no limit)."""
    seconds = None if deadline is None else max(0.0, deadline - ctx.clock.now())
    try:
        return await within(ctx.clock, seconds, work)
    except TimeoutError:
        raise CliError(
            f"timed out after {args.timeout} connecting to the API server at {ctx.server}"
        ) from None


async def _target(args: argparse.Namespace, config: ClientConfig, client: Client) -> Target:
    info = await client.discovery.resolve(args.resource)
    namespace: str | None = None
    if info.namespaced and not args.all_namespaces:
        namespace = args.namespace or config.namespace
    lister_watcher = ResourceListWatch(
        client,
        info,
        namespace=namespace,
        label_selector=args.selector,
        field_selector=args.field_selector,
        metadata_only=getattr(args, "metadata_only", False),
    )
    await lister_watcher.list(ListOptions(limit=1))
    return Target(client, info, lister_watcher, namespace)
