"""``kubereflector manifests MODULE:MANAGER --check COMMAND ...``: run the operator's
tests (COMMAND) against an emulator that enforces the generated RBAC for the
operator's ServiceAccount, and report every request it refused.

The emulator (in this process, on 127.0.0.1; HTTPS when the ``emulator`` extra is
installed, so that kubectl sends it tokens) starts with the manifests applied
(their namespaces created; webhook configurations left out and a CRD's webhook
conversion made ``None``: the emulator cannot reach a webhook Service), and COMMAND
runs with:

* ``KUBECONFIG``: a kubeconfig with the ServiceAccount's token (minted as the
  TokenRequest API does): what the operator under test should load
  (``load_config()`` reads it);
* ``KUBEREFLECTOR_CHECK_ADMIN_KUBECONFIG``: a kubeconfig of the emulator's admin
  (``system:masters``), for the tests' own setup and checks;
* ``KUBEREFLECTOR_CHECK_NAMESPACE``: the namespace the operator runs in.

Then the refusals are printed on stdout, one line per distinct request with how
often it came and the :class:`~kubereflector.runtime.Permission` that would allow it.
The exit status is COMMAND's when it failed, else 1 when anything was refused,
else 0. With ``--report-only`` the emulator serves what it would refuse, so that a
single run finds every missing permission (the operator then behaves as it would
with them).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import signal
import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ..runtime.manifests import Manifest
from ..runtime.permissions import resolve_resource
from ._context import CommandContext
from ._errors import EXIT_ERROR, EXIT_OK, CliError

if TYPE_CHECKING:
    from ..testing.apiserver import Denial
    from ..testing.apiserver._authorization import RbacMode

__all__ = ["ADMIN_ENV", "NAMESPACE_ENV", "check", "permission_for"]

ADMIN_ENV: Final = "KUBEREFLECTOR_CHECK_ADMIN_KUBECONFIG"
NAMESPACE_ENV: Final = "KUBEREFLECTOR_CHECK_NAMESPACE"
_BUILTIN_NAMESPACES: Final = ("default", "kube-system", "kube-public")
_WEBHOOK_CONFIGURATIONS: Final = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def _resource_name(obj: Mapping[str, Any]) -> str:
    """The emulator's name of the resource of ``obj`` (by its kind)."""
    kind = str(obj.get("kind", ""))
    api_version = str(obj.get("apiVersion", ""))
    group = api_version.rpartition("/")[0]
    try:
        ref, _ = resolve_resource(kind)
    except LookupError:
        raise CliError(f"cannot apply a {kind} ({api_version}) to the emulator") from None
    if ref.group != group:
        raise CliError(f"cannot apply a {kind} of {api_version} to the emulator")
    return f"{ref.plural}.{ref.group}" if ref.group else ref.plural


def permission_for(verb: str, group: str, resource: str, subresource: str, name: str) -> str:
    """The ``Permission(...)`` that allows a refused request, as Python source."""
    if not resource:
        return ""
    qualified = f"{resource}.{group}" if group else resource
    if subresource:
        qualified += f"/{subresource}"
    names = f", names=[{name!r}]" if name and verb not in ("list", "watch", "create") else ""
    return f"Permission({qualified!r}, {verb!r}{names})"


async def check(
    objects: Sequence[Manifest],
    command: Sequence[str],
    ctx: CommandContext,
    *,
    report_only: bool,
) -> int:
    """Run ``command`` against an emulator holding ``objects``; report; the exit status."""
    from ..testing.apiserver import ApiServerEmulator
    from ..testing.apiserver._tls import EmulatorExtraMissing

    account = next((o for o in objects if o.get("kind") == "ServiceAccount"), None)
    if account is None:
        raise CliError("the manifests have no ServiceAccount to check")
    meta: Mapping[str, Any] = account.get("metadata") or {}
    name, namespace = str(meta["name"]), str(meta["namespace"])
    mode: RbacMode = "report" if report_only else "enforce"
    server = ApiServerEmulator(tls=True, rbac=mode)
    try:
        await server.start()
    except EmulatorExtraMissing:  # HTTPS needs the emulator extra; kubectl needs HTTPS
        server = ApiServerEmulator(rbac=mode)
        await server.start()
    try:
        namespaces = {namespace} | {
            str(o["metadata"]["namespace"])
            for o in objects
            if isinstance(o.get("metadata"), dict) and o["metadata"].get("namespace")
        }
        for ns in sorted(namespaces - set(_BUILTIN_NAMESPACES)):
            server.create("namespaces", {"metadata": {"name": ns}})
        for obj in _without_webhooks(objects, ctx):
            server.create(_resource_name(obj), obj)
        token = server.service_account_token(name, namespace, expiration_seconds=24 * 3600)
        with tempfile.TemporaryDirectory(prefix="kubereflector-check-") as tmp:
            operator = os.path.join(tmp, "operator.kubeconfig")
            admin = os.path.join(tmp, "admin.kubeconfig")
            server.write_kubeconfig(operator, token=token)
            server.write_kubeconfig(admin)
            env = {**os.environ, "KUBECONFIG": operator, ADMIN_ENV: admin, NAMESPACE_ENV: namespace}
            ctx.err(
                f"kubereflector: checking the RBAC of ServiceAccount {namespace}/{name} "
                f"({'reported' if report_only else 'enforced'}) on {server.url}: "
                f"{' '.join(command)}"
            )
            status = await _run(command, env, ctx)
        denials = server.denials()
    finally:
        await server.stop()
    refused = _report(denials, ctx)
    if refused:
        ctx.err(
            f"kubereflector: {refused} request{'s' if refused != 1 else ''} refused by the "
            "generated RBAC"
        )
    elif status == 0:
        ctx.err("kubereflector: no request was refused")
    if status != 0:
        return status
    return EXIT_ERROR if refused else EXIT_OK


def _without_webhooks(objects: Sequence[Manifest], ctx: CommandContext) -> list[Manifest]:
    """``objects`` without what calls webhooks through a Service the emulator cannot
    reach: the webhook configurations left out, a CRD's webhook conversion made ``None``
    (the command under check serves and installs its webhooks itself if it wants them)."""
    kept: list[Manifest] = []
    for obj in objects:
        if obj.get("kind") in _WEBHOOK_CONFIGURATIONS:
            ctx.err(f"kubereflector: not applied to the emulator: {obj['kind']}")
            continue
        spec = obj.get("spec")
        if (
            obj.get("kind") == "CustomResourceDefinition"
            and isinstance(spec, dict)
            and (spec.get("conversion") or {}).get("strategy") == "Webhook"
        ):
            obj = {**obj, "spec": {**spec, "conversion": {"strategy": "None"}}}
        kept.append(obj)
    return kept


def _report(denials: Sequence[Denial], ctx: CommandContext) -> int:
    """Print one line per distinct refused request; returns how many were refused."""
    seen: collections.Counter[tuple[str, str, str, str, str, str, str]] = collections.Counter()
    for d in denials:
        seen[(d.verb, d.api_group, d.resource, d.subresource, d.namespace, d.name, d.path)] += 1
    for (verb, group, resource, sub, ns, object_name, path), count in seen.items():
        what = f"{resource}/{sub}" if sub else resource
        where = f" in {ns}" if ns else ""
        target = f"{what}.{group}" if group else what
        if not resource:
            line = f"refused: {verb} {path}"
        else:
            named = f" {object_name!r}" if object_name else ""
            line = f"refused: {verb} {target}{named}{where}"
        fix = permission_for(verb, group, resource, sub, object_name)
        ctx.out(f"{line} ({count}x){'; allow it with ' + fix if fix else ''}")
    return sum(seen.values())


async def _run(command: Sequence[str], env: Mapping[str, str], ctx: CommandContext) -> int:
    """Run ``command`` to its end (or until the stop event: then terminate it)."""
    try:
        proc = await asyncio.create_subprocess_exec(*command, env=dict(env))
    except OSError as err:
        raise CliError(f"cannot run {command[0]!r}: {err.strerror or err}") from None
    waiting = asyncio.ensure_future(proc.wait())
    stopping = asyncio.ensure_future(ctx.stop.wait())
    try:
        await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if not waiting.done():
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        await waiting
    return int(waiting.result())
