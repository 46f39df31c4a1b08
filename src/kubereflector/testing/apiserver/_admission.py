"""Admission webhooks, called as kube-apiserver's ``MutatingAdmissionWebhook`` and
``ValidatingAdmissionWebhook`` plugins call them.

For a write (:class:`Attributes`), the webhooks of the stored configurations
(:mod:`._webhook_configs`) that match it are called: those whose rules name its
operation, group, version, resource, subresource and scope (or, with ``matchPolicy:
Equivalent``, another served version of the resource: the object is converted to that
version for the webhook), whose ``namespaceSelector`` matches the namespace's labels and
whose ``objectSelector`` matches the object's or the old object's labels. The
configurations themselves are never admitted.

* :meth:`Admission.mutate`: the mutating webhooks in order, each answer's JSON Patch
  applied; a webhook that changed the object makes those called before it with
  ``reinvocationPolicy: IfNeeded`` be called once more, after the others.
* :meth:`Admission.validate`: the validating webhooks, all at once.

A webhook that denies fails the write with its status (kube's ``admission webhook "<name>"
denied the request: <message>``). One that cannot be called, times out
(``timeoutSeconds``, on the emulator's clock) or answers something that is not a review
is skipped under ``failurePolicy: Ignore``, and fails the write with a 500 under
``Fail``. On a dry run only webhooks with ``sideEffects: None`` or ``NoneOnDryRun`` are
called (others fail the write with a 400). Their warnings reach the client as
``Warning`` headers.

Not emulated: ``matchConditions`` (CEL) are not evaluated (every webhook whose rules and
selectors match is called), nor the in-tree admission plugins.

Private to :mod:`kubereflector.testing.apiserver`. Event loop only.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import uuid
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from ...errors import failure_status
from ...selectors import LabelSelector
from ._conversion import Conversions
from ._patch import PatchFailed, json_patch
from ._records import ENCODER, Bucket
from ._resources import ServedResource
from ._statuses import StatusError, bad_request, not_found
from ._store import Store
from ._users import ADMIN, UserInfo
from ._webhook_client import CallFailed, WebhookCaller
from ._webhook_configs import MUTATING_RESOURCE, VALIDATING_RESOURCE, Hook, HookSource

__all__ = ["REQUEST_USER", "Admission", "Attributes", "user_of"]

log = logging.getLogger("kubereflector.testing.apiserver")

REQUEST_USER: Final[ContextVar[UserInfo]] = ContextVar("kubereflector_emulator_user")
"""Who sent the request being served (the handler sets it in the request's task)."""


def user_of(http: Any) -> Mapping[str, Any]:
    """The ``userInfo`` kube sends webhooks, of the user who sent the request being
    served (the emulator's admin when the handler did not say)."""
    user = REQUEST_USER.get(ADMIN)
    info: dict[str, Any] = {"username": user.name}
    if user.uid:
        info["uid"] = user.uid
    if user.groups:
        info["groups"] = list(user.groups)
    return info


_EXEMPT: Final = frozenset({VALIDATING_RESOURCE.group_resource, MUTATING_RESOURCE.group_resource})
_OPTIONS_API: Final = "meta.k8s.io/v1"


@dataclass(slots=True)
class Attributes:
    """One write as admission sees it: ``info`` is the resource in the version the
    request addressed; ``options`` its ``CreateOptions``/``UpdateOptions``/
    ``DeleteOptions`` (as sent to webhooks)."""

    operation: str
    bucket: Bucket
    info: ServedResource
    subresource: str
    name: str
    namespace: str
    dry_run: bool
    options: dict[str, Any]
    user: Mapping[str, Any] = field(default_factory=lambda: user_of(None))
    warnings: list[str] = field(default_factory=list)

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)


def write_options(kind: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The options object a webhook gets (``kind``: ``CreateOptions``, ...), with the
    fields that are set."""
    options: dict[str, Any] = {"kind": kind, "apiVersion": _OPTIONS_API}
    options.update((k, v) for k, v in fields.items() if v not in (None, "", [], {}))
    return options


@dataclass(frozen=True, slots=True)
class _Invocation:
    hook: Hook
    info: ServedResource  # the version the webhook is called for


class Admission:
    """The admission webhooks of one emulator (see the module documentation)."""

    def __init__(self, store: Store, caller: WebhookCaller, conversions: Conversions) -> None:
        self.store = store
        self.caller = caller
        self.conversions = conversions
        self.hooks = HookSource(store)
        self.user_of: Callable[[Any], Mapping[str, Any]] = user_of
        """Who made an HTTP request, as a webhook's ``userInfo``."""

    def concerns(self, info: ServedResource) -> bool:
        """Whether a configured webhook's rules may name ``info``'s resource, in any
        version, for any operation (writes of other resources take the store's path)."""
        if info.group_resource in _EXEMPT:
            return False
        for hooks in (self.hooks.hooks(mutating=True), self.hooks.hooks(mutating=False)):
            for hook in hooks:
                for rule in hook.rules:
                    if _either(rule.get("apiGroups"), info.group) and any(
                        str(r).partition("/")[0] in ("*", info.plural)
                        for r in rule.get("resources") or []
                    ):
                        return True
        return False

    # -- matching --------------------------------------------------------------------------

    def _invocation(
        self,
        hook: Hook,
        attrs: Attributes,
        obj: Mapping[str, Any] | None,
        old: Mapping[str, Any] | None,
    ) -> _Invocation | None:
        """Whether ``hook`` is called for ``attrs`` (kube's ``ShouldCallHook``): the
        version to call it for, ``None`` when it does not match."""
        if attrs.info.group_resource in _EXEMPT:
            return None
        ns_match, ns_error = self._namespace_matches(hook.namespace_selector, attrs, obj)
        if not ns_match and ns_error is None:
            return None
        if not hook.object_selector.empty and not (
            _labels_match(hook.object_selector, obj) or _labels_match(hook.object_selector, old)
        ):
            return None
        found = None
        for rule in hook.rules:
            if _rule_matches(rule, attrs, attrs.info):
                found = _Invocation(hook, attrs.info)
                break
        if found is None and hook.match_policy == "Equivalent":
            for rule in hook.rules:
                for info in self._equivalents(attrs):
                    if _rule_matches(rule, attrs, info):
                        found = _Invocation(hook, info)
                        break
                if found is not None:
                    break
        if found is not None and ns_error is not None:
            raise ns_error
        return found

    def _equivalents(self, attrs: Attributes) -> list[ServedResource]:
        bucket = attrs.bucket
        views = self.store.versions.get(bucket.info.group_resource) or {}
        return [i for i in [bucket.info, *views.values()] if i.version != attrs.info.version]

    def _namespace_matches(
        self, selector: LabelSelector, attrs: Attributes, obj: Mapping[str, Any] | None
    ) -> tuple[bool, StatusError | None]:
        namespaces = self.store.buckets["namespaces"]
        is_namespace = attrs.info is namespaces.info
        if not attrs.namespace and not is_namespace:
            return True, None  # cluster-scoped objects are never exempted
        if selector.empty:
            return True, None
        if is_namespace and not attrs.subresource and attrs.operation in ("CREATE", "UPDATE"):
            return _labels_match(selector, obj), None
        name = attrs.namespace or attrs.name
        record = namespaces.objects.get(name)
        if record is None:
            return False, not_found(namespaces.info, name)
        return _labels_match(selector, record.obj), None

    # -- calling ---------------------------------------------------------------------------

    async def mutate(
        self,
        attrs: Attributes,
        obj: dict[str, Any] | None,
        old: Mapping[str, Any] | None,
    ) -> dict[str, Any] | None:
        """``obj`` (in ``attrs.info``'s version) as the mutating webhooks leave it (a new
        dict when one changed it). Raises :class:`~._statuses.StatusError`."""
        hooks = self.hooks.hooks(mutating=True)
        if not hooks:
            return obj
        previously_invoked: set[str] = set()
        reinvoke: set[str] = set()
        should_reinvoke = False
        current = obj
        for round_ in (0, 1):
            if round_ == 1 and not should_reinvoke:
                break
            for hook in hooks:
                invocation = self._invocation(hook, attrs, current, old)
                if invocation is None:
                    continue
                if round_ == 1 and hook.uid not in reinvoke:
                    continue
                current, changed = await self._mutate_once(invocation, attrs, current, old)
                if changed:
                    reinvoke |= previously_invoked
                    previously_invoked = set()
                    should_reinvoke = True
                if hook.reinvocation_policy == "IfNeeded":
                    previously_invoked.add(hook.uid)
        return current

    async def _mutate_once(
        self,
        invocation: _Invocation,
        attrs: Attributes,
        obj: dict[str, Any] | None,
        old: Mapping[str, Any] | None,
    ) -> tuple[dict[str, Any] | None, bool]:
        hook = invocation.hook
        versioned, versioned_old = await self._versioned(invocation, attrs, obj, old)
        try:
            response = await self._call(invocation, attrs, versioned, versioned_old)
        except CallFailed as exc:
            self._failed(hook, exc)
            return obj, False
        if not response.get("allowed"):
            raise _rejection(hook.name, response.get("status"))
        patch = response.get("patch")
        if not patch:
            return obj, False
        try:
            operations = msgspec.json.decode(base64.b64decode(patch, validate=True))
        except (binascii.Error, ValueError, msgspec.DecodeError) as exc:
            raise _internal(f"invalid patch from webhook {hook.name}: {exc}") from None
        if not isinstance(operations, list) or not operations:
            return obj, False
        if versioned is None:
            raise _internal(
                f'admission webhook "{hook.name}" attempted to modify the object, which is '
                "not supported for this operation"
            )
        try:
            patched = json_patch(versioned, operations)
        except PatchFailed as exc:
            raise _internal(str(exc)) from None
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise _internal(f"the patch of webhook {hook.name} left no object")
        changed = patched != versioned
        if invocation.info is not attrs.info:  # back to the request's version
            patched = await self.conversions.convert_one(attrs.info, patched)
        return patched, changed

    async def validate(
        self, attrs: Attributes, obj: Mapping[str, Any] | None, old: Mapping[str, Any] | None
    ) -> None:
        """Call the validating webhooks that match (all at once); raise the first failure
        (:class:`~._statuses.StatusError`), in the configurations' order."""
        invocations = [
            invocation
            for hook in self.hooks.hooks(mutating=False)
            if (invocation := self._invocation(hook, attrs, obj, old)) is not None
        ]
        if not invocations:
            return
        results = await asyncio.gather(
            *(self._validate_once(i, attrs, obj, old) for i in invocations),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _validate_once(
        self,
        invocation: _Invocation,
        attrs: Attributes,
        obj: Mapping[str, Any] | None,
        old: Mapping[str, Any] | None,
    ) -> None:
        hook = invocation.hook
        versioned, versioned_old = await self._versioned(invocation, attrs, obj, old)
        try:
            response = await self._call(invocation, attrs, versioned, versioned_old)
        except CallFailed as exc:
            self._failed(hook, exc)
            return
        if not response.get("allowed"):
            raise _rejection(hook.name, response.get("status"))

    def _failed(self, hook: Hook, exc: CallFailed) -> None:
        if hook.failure_policy == "Ignore":
            log.warning("failed calling webhook %s, failing open: %s", hook.name, exc.reason)
            return None
        log.warning("failed calling webhook %s, failing closed: %s", hook.name, exc.reason)
        raise _internal(f'failed calling webhook "{hook.name}": {exc.reason}')

    async def _versioned(
        self,
        invocation: _Invocation,
        attrs: Attributes,
        obj: Mapping[str, Any] | None,
        old: Mapping[str, Any] | None,
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        info = invocation.info
        convert = self.conversions.convert_one
        versioned = None if obj is None else await convert(info, obj)
        versioned_old = None if old is None else await convert(info, old)
        return versioned, versioned_old

    async def _call(
        self,
        invocation: _Invocation,
        attrs: Attributes,
        obj: Mapping[str, Any] | None,
        old: Mapping[str, Any] | None,
    ) -> Mapping[str, Any]:
        """One review: the webhook's ``response`` (checked as kube checks it), its warnings
        recorded; :class:`CallFailed` when it cannot be had."""
        hook = invocation.hook
        if attrs.dry_run and hook.side_effects not in ("None", "NoneOnDryRun"):
            raise bad_request(f'admission webhook "{hook.name}" does not support dry run')
        version = next((v for v in hook.review_versions if v in ("v1", "v1beta1")), None)
        if version is None:
            raise CallFailed(
                "could not create admission objects: webhook does not accept known "
                "AdmissionReview versions (v1, v1beta1)"
            )
        uid = str(uuid.uuid1())
        review = {
            "kind": "AdmissionReview",
            "apiVersion": f"admission.k8s.io/{version}",
            "request": self._request(uid, invocation, attrs, obj, old),
        }
        timeout = hook.timeout_seconds
        try:
            answer = await self.caller.post(
                hook.client_config,
                ENCODER.encode(review),
                timeout=float(timeout),
                query={"timeout": f"{timeout}s"},
            )
        except CallFailed as exc:
            raise CallFailed(f"failed to call webhook: {exc.reason}") from None
        response = _verified(answer, uid, version, mutating=hook.mutating)
        for text in response.get("warnings") or []:
            attrs.warn(str(text))
        return response

    @staticmethod
    def _request(
        uid: str,
        invocation: _Invocation,
        attrs: Attributes,
        obj: Mapping[str, Any] | None,
        old: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        info, asked = invocation.info, attrs.info
        request: dict[str, Any] = {
            "uid": uid,
            "kind": {"group": info.group, "version": info.version, "kind": info.kind},
            "resource": {"group": info.group, "version": info.version, "resource": info.plural},
        }
        if attrs.subresource:
            request["subResource"] = attrs.subresource
        request["requestKind"] = {
            "group": asked.group,
            "version": asked.version,
            "kind": asked.kind,
        }
        request["requestResource"] = {
            "group": asked.group,
            "version": asked.version,
            "resource": asked.plural,
        }
        if attrs.subresource:
            request["requestSubResource"] = attrs.subresource
        if attrs.name:
            request["name"] = attrs.name
        if attrs.namespace:
            request["namespace"] = attrs.namespace
        request["operation"] = attrs.operation
        request["userInfo"] = dict(attrs.user)
        request["object"] = obj
        request["oldObject"] = old
        request["dryRun"] = attrs.dry_run
        request["options"] = attrs.options
        return request


def _labels_match(selector: LabelSelector, obj: Mapping[str, Any] | None) -> bool:
    if obj is None:
        return False
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return selector.matches(labels)


def _either(items: Any, wanted: str) -> bool:
    return isinstance(items, list) and ("*" in items or wanted in items)


def _rule_matches(rule: Mapping[str, Any], attrs: Attributes, info: ServedResource) -> bool:
    """kube's ``rules.Matcher``: scope, operation, group, version, resource/subresource."""
    scope = rule.get("scope") or "*"
    is_namespace = info.plural == "namespaces" and info.group == "" and info.builtin
    if scope == "Namespaced" and (is_namespace or not attrs.namespace):
        return False
    if scope == "Cluster" and not (is_namespace or not attrs.namespace):
        return False
    if not _either(rule.get("operations"), attrs.operation):
        return False
    if not _either(rule.get("apiGroups"), info.group):
        return False
    if not _either(rule.get("apiVersions"), info.version):
        return False
    for resource in rule.get("resources") or []:
        name, _, sub = str(resource).partition("/")
        if (name in ("*", info.plural)) and (sub in ("*", attrs.subresource)):
            return True
    return False


def _verified(answer: Any, uid: str, version: str, *, mutating: bool) -> Mapping[str, Any]:
    """The ``response`` of a webhook's ``answer``, checked as kube's
    ``VerifyAdmissionResponse`` does (:class:`CallFailed` otherwise)."""

    def invalid(why: str) -> CallFailed:
        return CallFailed(f"received invalid webhook response: {why}")

    if not isinstance(answer, dict) or not isinstance(answer.get("response"), dict):
        raise invalid("webhook response was absent")
    response: dict[str, Any] = answer["response"]
    if version == "v1beta1":  # kube checks nothing more of v1beta1 answers
        if mutating and response.get("patch"):
            response = {**response, "patchType": "JSONPatch"}
        return response
    if response.get("uid") != uid:
        raise invalid(f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
    if answer.get("apiVersion") != "admission.k8s.io/v1" or answer.get("kind") != "AdmissionReview":
        raise invalid(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got "
            f"{answer.get('apiVersion') or '/'}, Kind={answer.get('kind') or ''}"
        )
    patch, patch_type = response.get("patch"), response.get("patchType")
    if mutating:
        if patch and patch_type is None:
            raise invalid("webhook returned response.patch but not response.patchType")
        if not patch and patch_type is not None:
            raise invalid("webhook returned response.patchType but not response.patch")
        if patch_type is not None and patch_type != "JSONPatch":
            raise CallFailed(f'unsupported patch type "{patch_type}"')
    else:
        if patch:
            raise invalid("validating webhook may not return response.patch")
        if patch_type is not None:
            raise invalid("validating webhook may not return response.patchType")
    return response


def _rejection(name: str, result: Any) -> StatusError:
    """kube's ``ToStatusErr``: the webhook's status, a failure of code >= 400, its message
    prefixed with who denied."""
    status: dict[str, Any] = dict(result) if isinstance(result, Mapping) else {}
    status.setdefault("metadata", {})
    denied = f'admission webhook "{name}" denied the request'
    code = status.get("code")
    if not isinstance(code, int) or code < 400:
        status["code"] = 400
    if status.get("status") in (None, "", "Success"):
        status["status"] = "Failure"
    if status.get("message"):
        status["message"] = f"{denied}: {status['message']}"
    elif status.get("reason"):
        status["message"] = f"{denied}: {status['reason']}"
    else:
        status["message"] = f"{denied} without explanation"
    return StatusError({"kind": "Status", "apiVersion": "v1", **status})


def _internal(message: str) -> StatusError:
    """kube's ``NewInternalError``."""
    return StatusError(
        failure_status(
            500,
            "InternalError",
            f"Internal error occurred: {message}",
            {"causes": [{"message": message}]},
        )
    )
