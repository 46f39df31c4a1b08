"""The webhooks one server serves (:class:`Webhooks`): admission webhooks registered with
:meth:`Webhooks.validator` and :meth:`Webhooks.defaulter`, each at its own path, and the
conversions of multi-version kinds (:meth:`Webhooks.converter`), all at ``/convert``.

A :class:`~kubereflector.runtime.Manager` holds one (``manager.webhooks``); its
``validator``, ``defaulter`` and ``converter`` register into it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeVar, cast, overload

from typing_extensions import TypedDict, Unpack

from ...models import ApiResource, resource_of
from .admission import (
    OPERATIONS,
    AdmissionHandler,
    AdmissionRequest,
    AdmissionWebhook,
    Operation,
    WebhookType,
)
from .configuration import WebhookEndpoint, conversion_stanza, webhook_configurations
from .conversion import Conversion

if TYPE_CHECKING:
    from ...models.admissionregistration_v1 import (
        MutatingWebhookConfiguration,
        ValidatingWebhookConfiguration,
    )
    from ...models.apiextensions_v1 import CustomResourceConversion

__all__ = ["DefaulterOptions", "HandlerDecorator", "ValidatorOptions", "Webhooks"]

T = TypeVar("T")
H = TypeVar("H")
S = TypeVar("S")
W = TypeVar("W", bound="Sequence[str] | None")


class HandlerDecorator(Protocol[T]):
    """What :meth:`Webhooks.validator` and :meth:`Webhooks.defaulter` return: a decorator
    that registers a handler of ``(obj: T, request: AdmissionRequest[T])`` (a coroutine
    function or a plain function returning ``None`` or warnings) and gives it back."""

    @overload
    def __call__(
        self, handler: Callable[[T, AdmissionRequest[T]], Awaitable[W]], /
    ) -> Callable[[T, AdmissionRequest[T]], Awaitable[W]]: ...

    @overload
    def __call__(
        self, handler: Callable[[T, AdmissionRequest[T]], W], /
    ) -> Callable[[T, AdmissionRequest[T]], W]: ...


_NAME: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?){2,}$")
_PATH: Final = re.compile(r"^(/[a-z0-9]([-a-z0-9.]*[a-z0-9])?)+$")
"""Segments kube accepts in a Service's path: DNS-1123 subdomains."""


class ValidatorOptions(TypedDict, total=False):
    """How the API server calls a validating webhook (every key optional).

    * ``operations``: ``CREATE``, ``UPDATE``, ``DELETE``, ``CONNECT`` or ``*``
      (default ``CREATE`` and ``UPDATE``, as kubebuilder's);
    * ``subresources``: also call it for these subresources (``"status"``);
    * ``name``: the webhook's name, a fully qualified name (default ``v<kind>.<group>``);
    * ``path``: where it is served (default ``/validate-<group>-<version>-<kind>``);
    * ``failure_policy``: ``Fail`` (default) or ``Ignore`` when the server cannot be called;
    * ``match_policy``: ``Equivalent`` (default: also for the other versions of the
      resource, the object converted to the registered one) or ``Exact``;
    * ``side_effects``: ``None`` (default) or ``NoneOnDryRun``;
    * ``timeout_seconds``: 1 to 30 (default 10);
    * ``namespace_selector``, ``object_selector``: label selectors (``matchLabels``,
      ``matchExpressions``) restricting the objects it sees.
    """

    operations: Sequence[Operation | Literal["*"]]
    subresources: Sequence[str]
    name: str
    path: str
    failure_policy: Literal["Fail", "Ignore"]
    match_policy: Literal["Exact", "Equivalent"]
    side_effects: Literal["None", "NoneOnDryRun"]
    timeout_seconds: int
    namespace_selector: Mapping[str, Any]
    object_selector: Mapping[str, Any]


class DefaulterOptions(ValidatorOptions, total=False):
    """A validating webhook's options, and ``reinvocation_policy``: ``Never`` (default) or
    ``IfNeeded`` (call it again when a later mutating webhook changed the object). The
    default name is ``m<kind>.<group>``, the path ``/mutate-<group>-<version>-<kind>``."""

    reinvocation_policy: Literal["Never", "IfNeeded"]


@dataclass(frozen=True, slots=True)
class _Target:
    """What a webhook is registered for: a model's resource, or a resource by name."""

    group: str
    version: str  # "*" for a resource named without its version
    plural: str
    kind: str  # "" when unknown
    scope: str  # "Namespaced", "Cluster" or "*"
    model: type[Any] | None


def _target(for_: object) -> _Target:
    if isinstance(for_, ApiResource):
        scope = "Namespaced" if for_.namespaced else "Cluster"
        return _Target(for_.group, for_.version, for_.plural, for_.kind, scope, None)
    if isinstance(for_, str):
        plural, _, group = for_.partition(".")
        if not plural or plural != plural.lower() or "/" in for_:
            raise ValueError(
                f"a resource is named by its plural and group ('foos.example.com', 'pods'), "
                f"not {for_!r}"
            )
        return _Target(group, "*", plural, "", "*", None)
    if isinstance(for_, type):
        resource = resource_of(for_)
        scope = "Namespaced" if resource.namespaced else "Cluster"
        return _Target(
            resource.group, resource.version, resource.plural, resource.kind, scope, for_
        )
    raise TypeError(
        f"a webhook is registered for a model class, a resource name or an ApiResource, "
        f"not {for_!r}"
    )


def _choice(label: str, value: object, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ValueError(f"{label} must be one of {', '.join(allowed)}, not {value!r}")
    return str(value)


class Webhooks:
    """The admission webhooks and conversions one webhook server serves.

    Register with :meth:`validator`, :meth:`defaulter` (decorators, or plain calls with
    ``handler=``) and :meth:`converter`; generate what tells the API server about them
    with :meth:`configurations` and :meth:`conversion_stanza`. Thread-safe; register
    before serving (a server looks handlers up per request, so a late registration is
    served, but the API server only calls what its configuration names).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._admission: dict[str, AdmissionWebhook[Any]] = {}
        self._conversions: dict[tuple[str, str], Conversion[Any]] = {}

    # -- what is registered ------------------------------------------------------------

    @property
    def admission(self) -> tuple[AdmissionWebhook[Any], ...]:
        """The admission webhooks, in registration order."""
        with self._lock:
            return tuple(self._admission.values())

    @property
    def conversions(self) -> tuple[Conversion[Any], ...]:
        """The conversions, in registration order."""
        with self._lock:
            return tuple(self._conversions.values())

    def conversion_map(self) -> dict[tuple[str, str], Conversion[Any]]:
        """The conversions by ``(group, kind)`` (a copy)."""
        with self._lock:
            return dict(self._conversions)

    def at(self, path: str) -> AdmissionWebhook[Any] | None:
        """The admission webhook served at ``path``, if any."""
        return self._admission.get(path)

    def __len__(self) -> int:
        return len(self._admission) + len(self._conversions)

    def add(self, webhook: AdmissionWebhook[Any]) -> None:
        """Serve ``webhook``. Raises ``ValueError`` when its path or name is taken."""
        with self._lock:
            if webhook.path in self._admission:
                raise ValueError(
                    f"a webhook is served at {webhook.path} already: give this one path= and name="
                )
            if any(w.name == webhook.name for w in self._admission.values()):
                raise ValueError(f"a webhook is named {webhook.name} already: give this one name=")
            self._admission[webhook.path] = webhook

    # -- registering --------------------------------------------------------------------

    @overload
    def validator(
        self, for_: type[T], **options: Unpack[ValidatorOptions]
    ) -> HandlerDecorator[T]: ...

    @overload
    def validator(
        self, for_: str | ApiResource, **options: Unpack[ValidatorOptions]
    ) -> HandlerDecorator[dict[str, Any]]: ...

    def validator(self, for_: Any, **options: Unpack[ValidatorOptions]) -> HandlerDecorator[Any]:
        """Register a validating handler of ``for_`` (a registered model class such as
        ``Foo``, a resource name such as ``"deployments.apps"``, or an
        :class:`~kubereflector.models.ApiResource`): a decorator returning the function
        unchanged. The handler gets ``(obj, request)``, returns ``None`` or warnings and
        denies by raising :class:`~kubereflector.runtime.webhooks.Denied` (see
        :mod:`kubereflector.runtime.webhooks.admission`). ``options``:
        :class:`ValidatorOptions`. Raises ``TypeError``/``ValueError`` for arguments of
        the wrong shape, ``LookupError`` for a model that is not registered, and
        ``ValueError`` for a path or name taken already."""
        return self._decorator("validating", for_, dict(options))

    @overload
    def defaulter(
        self, for_: type[T], **options: Unpack[DefaulterOptions]
    ) -> HandlerDecorator[T]: ...

    @overload
    def defaulter(
        self, for_: str | ApiResource, **options: Unpack[DefaulterOptions]
    ) -> HandlerDecorator[dict[str, Any]]: ...

    def defaulter(self, for_: Any, **options: Unpack[DefaulterOptions]) -> HandlerDecorator[Any]:
        """Register a mutating handler of ``for_`` (as :meth:`validator`): it changes
        ``obj`` (a private copy) in place, and the server answers the JSON Patch of its
        changes. ``options``: :class:`DefaulterOptions`."""
        return self._decorator("mutating", for_, dict(options))

    def converter(
        self,
        hub: type[H],
        spoke: type[S],
        *,
        to_hub: Callable[[S], H],
        from_hub: Callable[[H], S],
    ) -> Conversion[H]:
        """Convert ``spoke``'s version of a kind to and from ``hub``'s (both registered
        models of one kind; see :class:`~kubereflector.runtime.webhooks.Conversion`).
        Call once per spoke version; every version of a kind has the same hub. Returns
        the kind's :class:`~kubereflector.runtime.webhooks.Conversion`. Raises
        ``ValueError`` for another hub of a kind that has one, and as
        :meth:`Conversion.spoke <kubereflector.runtime.webhooks.Conversion.spoke>`."""
        made = Conversion(hub)
        key = (made.group, made.kind)
        with self._lock:
            conversion = self._conversions.setdefault(key, made)
            if conversion.hub is not hub and conversion.hub_version != made.hub_version:
                raise ValueError(
                    f"{made.kind} of {made.group} converts through {conversion.hub_version} "
                    f"already, not {made.hub_version}: a kind has one hub"
                )
            try:
                conversion.spoke(spoke, to_hub=to_hub, from_hub=from_hub)
            except BaseException:
                if conversion is made:
                    del self._conversions[key]
                raise
        return conversion

    def _decorator(
        self, kind: WebhookType, for_: object, options: dict[str, Any]
    ) -> HandlerDecorator[Any]:
        target = _target(for_)
        allowed = {*ValidatorOptions.__annotations__}
        if kind == "mutating":
            allowed.add("reinvocation_policy")
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise TypeError(f"unknown webhook options: {', '.join(unknown)}")
        prefix = "v" if kind == "validating" else "m"
        operations = tuple(options.get("operations", ("CREATE", "UPDATE")))
        if isinstance(options.get("operations"), str) or not operations:
            raise TypeError("operations is a non-empty list, such as ['CREATE', 'UPDATE']")
        for op in operations:
            _choice("an operation", op, (*OPERATIONS, "*"))
        subresources = options.get("subresources", ())
        if isinstance(subresources, str):
            raise TypeError("subresources is a list, such as ['status']")
        noun = target.kind.lower() or target.plural
        group_part = target.group.replace(".", "-") or "core"
        version_part = target.version if target.version != "*" else "all"
        path = (
            options.get("path")
            or f"/{'validate' if prefix == 'v' else 'mutate'}-{group_part}-{version_part}-{noun}"
        )
        if not isinstance(path, str) or not _PATH.match(path) or path == "/convert":
            raise ValueError(
                "a webhook path starts with / and has DNS-1123 segments (lowercase letters, "
                f"digits, '-' and '.'), and is not /convert: {path!r}"
            )
        domain = (
            target.group
            if target.group.count(".") >= 1
            else f"{target.group or 'core'}.kubereflector.io"
        )
        name = options.get("name") or f"{prefix}{noun}.{domain}"
        if not isinstance(name, str) or len(name) > 253 or not _NAME.match(name):
            raise ValueError(
                f"a webhook name is a fully qualified name of three or more lowercase "
                f"segments (vfoo.example.com), not {name!r}"
            )
        timeout = options.get("timeout_seconds", 10)
        if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 30:
            raise ValueError(f"timeout_seconds is 1 to 30, not {timeout!r}")
        selectors: dict[str, Mapping[str, Any] | None] = {}
        for key in ("namespace_selector", "object_selector"):
            selector = options.get(key)
            if selector is not None and not isinstance(selector, Mapping):
                raise TypeError(f"{key} is a label selector (matchLabels, matchExpressions)")
            selectors[key] = selector
        rule = {
            "apiGroups": [target.group],
            "apiVersions": [target.version],
            "operations": list(operations),
            "resources": [target.plural, *(f"{target.plural}/{s}" for s in subresources)],
            "scope": target.scope,
        }

        def register(handler: AdmissionHandler[Any]) -> AdmissionHandler[Any]:
            webhook: AdmissionWebhook[Any] = AdmissionWebhook(
                type=kind,
                name=name,
                path=path,
                handler=handler,
                rules=(rule,),
                failure_policy=_choice(  # type: ignore[arg-type]
                    "failure_policy", options.get("failure_policy", "Fail"), ("Fail", "Ignore")
                ),
                match_policy=_choice(  # type: ignore[arg-type]
                    "match_policy",
                    options.get("match_policy", "Equivalent"),
                    ("Exact", "Equivalent"),
                ),
                side_effects=_choice(  # type: ignore[arg-type]
                    "side_effects", options.get("side_effects", "None"), ("None", "NoneOnDryRun")
                ),
                timeout_seconds=timeout,
                namespace_selector=selectors["namespace_selector"],
                object_selector=selectors["object_selector"],
                reinvocation_policy=_choice(  # type: ignore[arg-type]
                    "reinvocation_policy",
                    options.get("reinvocation_policy", "Never"),
                    ("Never", "IfNeeded"),
                ),
                model=target.model,
            )
            self.add(webhook)
            return handler

        return cast("HandlerDecorator[Any]", register)

    # -- telling the API server ---------------------------------------------------------

    def configurations(
        self, name: str, endpoint: WebhookEndpoint, ca_bundle: bytes | None = None
    ) -> list[MutatingWebhookConfiguration | ValidatingWebhookConfiguration]:
        """The ``MutatingWebhookConfiguration`` (if any defaulter) and the
        ``ValidatingWebhookConfiguration`` (if any validator), both named ``name``, calling
        this server at ``endpoint`` and trusting ``ca_bundle`` (PEM)."""
        return webhook_configurations(name, self.admission, endpoint, ca_bundle)

    def conversion_stanza(
        self, kind: str | type[Any], endpoint: WebhookEndpoint, ca_bundle: bytes | None = None
    ) -> CustomResourceConversion:
        """The ``spec.conversion`` of the CRD of ``kind`` (its CRD name, or any of its
        models). Raises ``LookupError`` when no conversion of that kind is registered."""
        for conversion in self.conversions:
            if isinstance(kind, str):
                if kind == conversion.crd_name:
                    return conversion_stanza(conversion, endpoint, ca_bundle)
            else:
                resource = resource_of(kind)
                if (resource.group, resource.kind) == (conversion.group, conversion.kind):
                    return conversion_stanza(conversion, endpoint, ca_bundle)
        raise LookupError(f"no conversion is registered for {kind!r}")

    def __repr__(self) -> str:
        paths = [w.path for w in self.admission]
        kinds = [c.crd_name for c in self.conversions]
        return f"<Webhooks admission={paths} conversions={kinds}>"
