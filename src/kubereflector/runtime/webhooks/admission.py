"""Admission webhooks: what a validating or mutating handler receives
(:class:`AdmissionRequest`), how it denies (:class:`Denied`), what a registered one is
(:class:`AdmissionWebhook`), and how an ``admission.k8s.io/v1`` ``AdmissionReview`` is
answered (:meth:`AdmissionWebhook.review`), with client-go's and controller-runtime's
semantics.

A handler is a plain function or a coroutine function taking ``(obj, request)``:

* ``obj`` is the object under review: ``request.object`` on CREATE and UPDATE (and the
  connect options on CONNECT), ``request.old_object`` on DELETE;
* it returns ``None``, or a list of warnings (strings kube-apiserver hands to the
  client, as ``kubectl`` prints them);
* it denies by raising :class:`Denied` (a message, optional field causes, warnings);
* a validating handler only reads; a mutating one (a *defaulter*) changes ``obj`` in
  place (a private copy) and the server answers the JSON Patch from the object it got to
  the object the handler left.

Anything else a handler raises is a bug: it is logged with its traceback, and the API
server gets a denial naming the exception's type and message (code 403, never a 5xx a
client would retry; never a stack trace). Plain functions run on a worker thread, so a
slow one never blocks the server; coroutines run on the server's event loop.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Literal, TypeAlias, TypeVar, cast

import msgspec

from ..._aio.calls import is_coroutine_callable
from ._jsonpatch import diff

__all__ = [
    "ADMISSION_REVIEW_VERSION",
    "OPERATIONS",
    "AdmissionHandler",
    "AdmissionRequest",
    "AdmissionWebhook",
    "Cause",
    "Denied",
    "GroupVersionKind",
    "GroupVersionResource",
    "Operation",
    "ReviewError",
    "UserInfo",
]

logger = logging.getLogger("kubereflector.runtime.webhooks")

T = TypeVar("T")

ADMISSION_REVIEW_VERSION: Final = "admission.k8s.io/v1"
"""The only ``AdmissionReview`` version served (``admissionReviewVersions: [v1]``)."""

Operation: TypeAlias = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
"""An admission operation (a PATCH is an UPDATE, or a CREATE when it creates)."""

OPERATIONS: Final[tuple[Operation, ...]] = ("CREATE", "UPDATE", "DELETE", "CONNECT")
"""Every admission operation, in kube's order."""

AdmissionHandler: TypeAlias = Callable[
    [T, "AdmissionRequest[T]"], "Awaitable[Sequence[str] | None] | Sequence[str] | None"
]
"""A validating or mutating handler: ``(obj, request)`` to ``None`` or warnings, a plain
function or a coroutine function; it denies by raising :class:`Denied`."""

_ENCODER: Final = msgspec.json.Encoder()
_decode: Final = msgspec.json.decode


@dataclass(frozen=True, slots=True)
class GroupVersionKind:
    """A kind in a group-version (``group`` is ``""`` for the core group)."""

    group: str
    version: str
    kind: str


@dataclass(frozen=True, slots=True)
class GroupVersionResource:
    """A resource (its plural) in a group-version (``group`` is ``""`` for the core group)."""

    group: str
    version: str
    resource: str


@dataclass(frozen=True, slots=True)
class UserInfo:
    """Who made the request, as the API server authenticated them."""

    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class AdmissionRequest(Generic[T]):
    """One admission request (``AdmissionReview.request``), as the API server sent it;
    read-only (but for ``object``, which a mutating handler may change).

    ``kind`` and ``resource`` are those of the version this webhook asked for (its
    rules); ``request_kind``/``request_resource`` the ones the client wrote (they differ
    when the API server converted the object for this webhook, ``matchPolicy:
    Equivalent``). ``sub_resource`` is ``"status"``, ``"scale"``, ... or ``""``.
    ``object`` is the new object (``None`` on DELETE), ``old_object`` the stored one on
    UPDATE and DELETE (``None`` on CREATE); for a mutating handler ``object`` is the
    private copy it may change. ``options`` are the request's ``CreateOptions``,
    ``UpdateOptions``, ``DeleteOptions`` (or the connect options). ``dry_run``: nothing
    will be stored, so a handler must not act on the request (side effects).

    Made from the review's ``request`` (a dict as decoded from JSON); its fields are read
    from it when first asked for (a handler that reads none costs nothing). Raises
    :class:`ReviewError` when ``request`` lacks its ``uid``, a known ``operation``, its
    ``kind`` or its ``resource``, or has an ``object`` that is not one.
    """

    __slots__ = ("_kind", "_object", "_old", "_raw", "_user")

    def __init__(
        self, request: dict[str, Any], *, object: T | None = None, old_object: T | None = None
    ) -> None:
        uid = request.get("uid")
        if type(uid) is not str or not uid:
            raise ReviewError("the AdmissionReview request has no uid")
        operation = request.get("operation")
        if operation not in OPERATIONS:
            raise ReviewError(
                f"request.operation must be one of {', '.join(OPERATIONS)}, not {operation!r}"
            )
        for where in ("kind", "resource"):
            value = request.get(where)
            if type(value) is not dict or type(value.get(where)) is not str:
                raise ReviewError(
                    f"request.{where} must be an object with group, version and {where}"
                )
        self._raw = request
        self._object = object
        self._old = old_object
        self._kind: tuple[GroupVersionKind, GroupVersionResource] | None = None
        self._user: UserInfo | None = None

    @property
    def uid(self) -> str:
        """The request's uid (the API server expects it back)."""
        return str(self._raw["uid"])

    @property
    def operation(self) -> Operation:
        """``CREATE``, ``UPDATE``, ``DELETE`` or ``CONNECT``."""
        operation: Operation = self._raw["operation"]
        return operation

    def _kinds(self) -> tuple[GroupVersionKind, GroupVersionResource]:
        if self._kind is None:
            self._kind = (_gvk(self._raw["kind"], "kind"), _gvr(self._raw["resource"], "resource"))
        return self._kind

    @property
    def kind(self) -> GroupVersionKind:
        """The kind of the object as this webhook gets it."""
        return self._kinds()[0]

    @property
    def resource(self) -> GroupVersionResource:
        """The resource as this webhook's rules named it."""
        return self._kinds()[1]

    @property
    def sub_resource(self) -> str:
        """The subresource written (``status``, ``scale``, ...), or ``""``."""
        return str(self._raw.get("subResource") or "")

    @property
    def request_kind(self) -> GroupVersionKind | None:
        """The kind the client wrote (``None`` when the API server did not say)."""
        value = self._raw.get("requestKind")
        return _gvk(value, "requestKind") if value else None

    @property
    def request_resource(self) -> GroupVersionResource | None:
        """The resource the client wrote to (``None`` when the API server did not say)."""
        value = self._raw.get("requestResource")
        return _gvr(value, "requestResource") if value else None

    @property
    def request_sub_resource(self) -> str:
        """The subresource the client wrote to, or ``""``."""
        return str(self._raw.get("requestSubResource") or "")

    @property
    def name(self) -> str:
        """The object's name (``""`` on a CREATE of a ``generateName`` object, which gets
        its name after the mutating webhooks)."""
        return str(self._raw.get("name") or "")

    @property
    def namespace(self) -> str:
        """The object's namespace (``""`` for a cluster-scoped one)."""
        return str(self._raw.get("namespace") or "")

    @property
    def user_info(self) -> UserInfo:
        """Who made the request."""
        if self._user is None:
            self._user = _user(self._raw.get("userInfo"))
        return self._user

    @property
    def object(self) -> T | None:
        """The new object (``None`` on DELETE); a mutating handler's own copy."""
        return self._object

    @property
    def old_object(self) -> T | None:
        """The stored object, on UPDATE and DELETE (``None`` on CREATE)."""
        return self._old

    @property
    def dry_run(self) -> bool:
        """Whether nothing will be stored (act on nothing)."""
        return bool(self._raw.get("dryRun"))

    @property
    def options(self) -> dict[str, Any] | None:
        """The request's options object (``CreateOptions``, ``UpdateOptions``, ...)."""
        options = self._raw.get("options")
        return options if type(options) is dict else None

    def __repr__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"<AdmissionRequest {self.operation} {self._raw['kind'].get('kind')} {where}>"


@dataclass(frozen=True, slots=True)
class Cause:
    """One reason a request is denied (``metav1.StatusCause``): the ``field`` path
    (``spec.replicas``), a ``message``, and kube's ``reason`` (``FieldValueInvalid``,
    ``FieldValueRequired``, ``FieldValueForbidden``, ...)."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"

    def wire(self) -> dict[str, str]:
        """The cause as kube sends it."""
        return {"reason": self.reason, "message": self.message, "field": self.field}


class Denied(Exception):
    """Raised by a handler to deny the request with ``message``.

    ``causes``: the fields at fault (:class:`Cause`); ``warnings`` reach the client with
    the denial. ``code`` and ``reason`` are the HTTP status and kube reason the client
    gets: by default 403 ``Forbidden``, or 422 ``Invalid`` when ``causes`` are given (as
    kube answers a field that fails validation). The API server prefixes the message
    with ``admission webhook "<name>" denied the request:``.
    """

    def __init__(
        self,
        message: str,
        *,
        causes: Sequence[Cause] = (),
        warnings: Sequence[str] = (),
        code: int | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        if isinstance(warnings, str):
            raise TypeError("warnings is a list of strings, not one string")
        self.message = message
        self.causes = tuple(causes)
        self.warnings = tuple(warnings)
        self.code = code if code is not None else (422 if self.causes else 403)
        if not 400 <= self.code <= 599:
            raise ValueError(f"a denial's code is an HTTP error status (400..599), not {code}")
        self.reason = reason if reason is not None else ("Invalid" if self.causes else "Forbidden")

    def status(self) -> dict[str, Any]:
        """The ``metav1.Status`` of the denial (``AdmissionResponse.status``)."""
        status: dict[str, Any] = {
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.causes:
            status["details"] = {"causes": [c.wire() for c in self.causes]}
        return status


class ReviewError(Exception):
    """A request body that is not an ``admission.k8s.io/v1`` ``AdmissionReview`` (or not a
    ``ConversionReview``) this server can answer: ``status`` is the HTTP status to answer
    with (400, or 415 for another content type), the message says what was wrong."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


WebhookType: TypeAlias = Literal["validating", "mutating"]


@dataclass(frozen=True, slots=True, eq=False)
class AdmissionWebhook(Generic[T]):
    """A registered validating or mutating webhook: its handler and how the API server
    should call it (what its generated configuration says). Immutable.

    ``name``: the webhook's name in its configuration (a fully qualified name, such as
    ``vfoo.example.com``); ``path``: where the server serves it; ``rules``: kube's
    ``RuleWithOperations`` list; the rest as in
    ``admissionregistration.k8s.io/v1``. ``model`` is the model class handlers are
    typed with (``None`` for a resource registered by name).
    """

    type: WebhookType
    name: str
    path: str
    handler: AdmissionHandler[T]
    rules: tuple[Mapping[str, Any], ...]
    failure_policy: Literal["Fail", "Ignore"] = "Fail"
    match_policy: Literal["Exact", "Equivalent"] = "Equivalent"
    side_effects: Literal["None", "NoneOnDryRun"] = "None"
    timeout_seconds: int = 10
    namespace_selector: Mapping[str, Any] | None = None
    object_selector: Mapping[str, Any] | None = None
    reinvocation_policy: Literal["Never", "IfNeeded"] = "Never"
    model: builtins.type[T] | None = None
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        if self.type not in ("validating", "mutating"):
            raise ValueError(f"a webhook is 'validating' or 'mutating', not {self.type!r}")
        if not callable(self.handler):
            raise TypeError(f"a webhook handler must be callable, not {self.handler!r}")
        object.__setattr__(self, "is_async", is_coroutine_callable(self.handler))

    @property
    def mutating(self) -> bool:
        """Whether it may change objects (a defaulter)."""
        return self.type == "mutating"

    async def review(
        self, body: bytes, *, timeout: Callable[[Awaitable[Any]], Awaitable[Any]] | None = None
    ) -> bytes:
        """Answer the ``AdmissionReview`` ``body`` (JSON): the response review, encoded.

        ``timeout`` wraps the handler's call (it raises ``TimeoutError`` when the
        handler is too slow: the request is then denied, saying so). Raises
        :class:`ReviewError` for a body this cannot answer (not JSON, not a v1
        ``AdmissionReview``, no ``request.uid``); a denial, a handler's failure and a
        timeout are answers, not errors.
        """
        request, raw = _parse_request(body, copy=self.mutating)
        try:
            response = await self._respond(request, raw, timeout)
        except TimeoutError:
            logger.warning("webhook %s: the handler did not answer in time", self.name)
            response = _denial(
                request.uid,
                Denied("the webhook handler did not answer in time", code=403),
            )
        return _ENCODER.encode(
            {
                "apiVersion": ADMISSION_REVIEW_VERSION,
                "kind": "AdmissionReview",
                "response": response,
            }
        )

    async def _respond(
        self,
        request: AdmissionRequest[T],
        raw: Mapping[str, Any],
        timeout: Callable[[Awaitable[Any]], Awaitable[Any]] | None,
    ) -> dict[str, Any]:
        obj = request.object if request.operation != "DELETE" else request.old_object
        original = raw.get("object") if self.mutating else None
        if obj is None:
            if self.mutating and request.operation in ("CREATE", "UPDATE"):
                raise ReviewError(f"a {request.operation} review needs request.object")
            obj = cast(T, {})
        call = self._call(obj, request)
        try:
            result = await (timeout(call) if timeout is not None else call)
        except Denied as denied:
            return _denial(request.uid, denied)
        except TimeoutError:
            raise
        except Exception as exc:  # a bug in the handler: logged, denied (never a 5xx)
            logger.error(
                "webhook %s: the handler raised %s", self.name, type(exc).__name__, exc_info=exc
            )
            return _denial(
                request.uid,
                Denied(f"the webhook handler failed: {type(exc).__name__}: {exc}", code=403),
            )
        warnings = _warnings(result, self.name)
        response: dict[str, Any] = {"uid": request.uid, "allowed": True}
        if warnings:
            response["warnings"] = warnings
        if self.mutating and original is not None:
            ops = diff(original, obj)
            if ops:
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(_ENCODER.encode(ops)).decode()
        return response

    async def _call(self, obj: T, request: AdmissionRequest[T]) -> Any:
        if self.is_async:
            return await cast("Awaitable[Any]", self.handler(obj, request))
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self.handler, obj, request)


def _warnings(result: Any, name: str) -> list[str]:
    if result is None:
        return []
    if isinstance(result, str) or not isinstance(result, Sequence):
        logger.error(
            "webhook %s: a handler returns None or a list of warnings, not %s (ignored)",
            name,
            type(result).__name__,
        )
        return []
    return [str(w) for w in result]


def _denial(uid: str, denied: Denied) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": False, "status": denied.status()}
    if denied.warnings:
        response["warnings"] = list(denied.warnings)
    return response


# -- the request, from the wire -------------------------------------------------------------


def _gvk(value: Any, where: str) -> GroupVersionKind:
    if type(value) is not dict or type(value.get("kind")) is not str:
        raise ReviewError(f"request.{where} must be an object with group, version and kind")
    return GroupVersionKind(
        str(value.get("group") or ""), str(value.get("version") or ""), value["kind"]
    )


def _gvr(value: Any, where: str) -> GroupVersionResource:
    if type(value) is not dict or type(value.get("resource")) is not str:
        raise ReviewError(f"request.{where} must be an object with group, version and resource")
    return GroupVersionResource(
        str(value.get("group") or ""), str(value.get("version") or ""), value["resource"]
    )


def _user(value: Any) -> UserInfo:
    if value is None:
        return UserInfo()
    if type(value) is not dict:
        raise ReviewError("request.userInfo must be an object")
    extra = value.get("extra") or {}
    groups = value.get("groups") or []
    if type(extra) is not dict or type(groups) is not list:
        raise ReviewError("request.userInfo has groups (a list) and extra (an object)")
    return UserInfo(
        username=str(value.get("username") or ""),
        uid=str(value.get("uid") or ""),
        groups=tuple(map(str, groups)),
        extra={str(k): tuple(map(str, v or ())) for k, v in extra.items()} if extra else {},
    )


def _review_of(body: bytes, kind: str, version: str) -> dict[str, Any]:
    """``body`` decoded as a ``kind`` review of ``version`` (``admission.k8s.io/v1``):
    :class:`ReviewError` naming what is wrong otherwise."""
    if not body:
        raise ReviewError(f"the request body is empty: expected a {version} {kind}")
    try:
        review = _decode(body)
    except msgspec.DecodeError as exc:
        raise ReviewError(f"the request body is not JSON: {exc}") from None
    if not isinstance(review, dict):
        raise ReviewError(f"the request body must be a {version} {kind} object")
    if review.get("kind") != kind or review.get("apiVersion") != version:
        got = f"{review.get('apiVersion') or '(no apiVersion)'} {review.get('kind') or '(no kind)'}"
        hint = ""
        if review.get("kind") == kind:  # another version: say how to get v1
            hint = f": only {version} is served ({kind[0].lower()}{kind[1:]}Versions: [v1])"
        raise ReviewError(f"expected a {version} {kind}, got {got}{hint}")
    if not isinstance(review.get("request"), dict):
        raise ReviewError(f"the {kind} has no request")
    return review


def _parse_request(
    body: bytes, *, copy: bool = False
) -> tuple[AdmissionRequest[Any], dict[str, Any]]:
    """``body`` (an ``AdmissionReview``) as an :class:`AdmissionRequest`, and the raw
    ``request`` dict; with ``copy``, the request's ``object`` is a deep copy of the raw
    one (for a handler that may change it). Raises :class:`ReviewError` for anything but
    a v1 review with a ``uid`` and a known ``operation``."""
    raw = _review_of(body, "AdmissionReview", ADMISSION_REVIEW_VERSION)["request"]
    obj, old = raw.get("object"), raw.get("oldObject")
    if (obj is not None and type(obj) is not dict) or (old is not None and type(old) is not dict):
        where = "object" if obj is not None and type(obj) is not dict else "oldObject"
        raise ReviewError(f"request.{where} must be an object or null")
    if obj is not None and copy:
        obj = _decode(_ENCODER.encode(obj))  # the handler's copy; the raw one is the original
    return AdmissionRequest(raw, object=obj, old_object=old), raw
