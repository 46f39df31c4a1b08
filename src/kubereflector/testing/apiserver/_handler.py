"""The emulator's HTTP entry point (:class:`ApiHandler`): request log, injected
failures, authentication (:mod:`._users`) and authorization (:mod:`._authorization`),
the admin endpoint for faults, health, version, OpenAPI and discovery, and the
routing of resource paths to the verbs (:mod:`._verbs`), the reviews and token
requests (:mod:`._reviews`) and watches (:mod:`._watch`).

Private to :mod:`kubereflector.testing.apiserver`. Everything runs on the event
loop that serves the emulator; the store is only touched between awaits.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import msgspec
from aiohttp import web

from ...errors import failure_status
from ._admission import REQUEST_USER
from ._authorization import Authorization
from ._discovery import (
    AGGREGATED_V2,
    EMULATED_VERSION,
    aggregated_discovery,
    api_group,
    api_group_list,
    api_resource_list,
    api_versions,
)
from ._faults import Faults
from ._negotiation import json_response, status_response, wants_aggregated
from ._openapi import openapi_response
from ._queries import parse_bool
from ._rbac import Attributes, forbidden
from ._records import ENCODER, decode
from ._reviews import REVIEW_RESOURCES, serve_review, serve_token_request
from ._statuses import StatusError, method_not_allowed, path_not_found
from ._store import Store
from ._users import ADMIN, UserInfo, Users
from ._verbs import require_verb, serve_collection, serve_object
from ._watch import Watches

if TYPE_CHECKING:
    from ._writes import Writes

__all__ = ["ApiHandler"]

log = logging.getLogger("kubereflector.testing.apiserver")

_ADMIN_PATH: Final = "/_emulator/faults"
_PUBLIC_PATHS: Final = frozenset({"/healthz", "/livez", "/readyz", "/version"})
_HEALTH_PREFIXES: Final = ("/healthz/", "/livez/", "/readyz/")


class ApiHandler:
    """Serves one emulator's store, faults and watches over HTTP (an aiohttp
    low-level handler). ``users``: who each bearer token is (every request but
    health and version must carry one, unless ``users`` requires none);
    ``authorization``: the RBAC check of each authenticated request;
    ``server_address``: the ``host:port`` legacy discovery names; ``restart``: what
    the admin endpoint's ``restart`` awaits (given the connection to keep); ``writes``:
    the write path with admission and conversion (``None``: the store's alone)."""

    def __init__(
        self,
        *,
        store: Store,
        faults: Faults,
        watches: Watches,
        users: Users,
        authorization: Authorization,
        server_address: Callable[[], str],
        restart: Callable[[Any], Awaitable[None]],
        writes: Writes | None = None,
    ) -> None:
        self.store = store
        self.writes = writes
        self.faults = faults
        self.watches = watches
        self.users = users
        self.authorization = authorization
        self.server_address = server_address
        self.restart = restart
        self.requests: collections.deque[tuple[str, str]] = collections.deque(maxlen=10_000)

    # -- entry point -------------------------------------------------------------------------

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.path
        if path == _ADMIN_PATH or path.startswith("/_emulator/"):
            return await self._admin(request)
        self.requests.append((request.method, request.path_qs))
        injected = self.faults.take_failure()
        if injected is not None:
            return status_response(injected)
        user = self._authenticate(request, path)
        if not isinstance(user, UserInfo):
            return user
        refused = self.authorization.check(request.method, path, request.query, user)
        if refused is not None:
            return status_response(refused)
        try:
            return await self._dispatch(request, path, user)
        except StatusError as exc:
            return status_response(exc.status)

    def _authenticate(self, request: web.BaseRequest, path: str) -> UserInfo | web.Response:
        """Who sent ``request`` (the admin when the emulator needs no token), or the 401."""
        if not self.users.required:
            return ADMIN
        header = request.headers.get("Authorization")
        if header is None and (path in _PUBLIC_PATHS or path.startswith(_HEALTH_PREFIXES)):
            return ADMIN  # anonymous may read health and version, as in kube's default RBAC
        scheme, _, credential = (header or "").partition(" ")
        if scheme.lower() == "bearer":
            user = self.users.authenticate(credential.strip())
            if user is not None:
                return user
        return status_response(failure_status(401, "Unauthorized", "Unauthorized"))

    async def _admin(self, request: web.BaseRequest) -> web.StreamResponse:
        user = self._authenticate(request, request.path)
        if not isinstance(user, UserInfo):
            return user
        if not user.is_master():  # the emulator's own endpoint: for its admin only
            attrs = Attributes(user, request.method.lower(), False, path=request.path)
            return status_response(forbidden(attrs, ""))
        if request.path != _ADMIN_PATH:
            return status_response(path_not_found().status)
        if request.method != "POST":
            return status_response(method_not_allowed(request.method, _ADMIN_PATH).status)
        try:
            body = decode(await request.read())
            if not isinstance(body, dict) or not isinstance(body.get("op"), str):
                raise ValueError('the body must be a JSON object with an "op"')
            op = body["op"]
            if op == "restart":
                await self.restart(request.protocol)
                response = json_response(b'{"ok":true}')
                response.force_close()
                return response
            self._apply_fault(op, body)
        except (ValueError, TypeError, msgspec.DecodeError) as exc:
            return status_response(failure_status(400, "BadRequest", f"invalid fault: {exc}"))
        return json_response(b'{"ok":true}')

    def _apply_fault(self, op: str, body: Mapping[str, Any]) -> None:
        log.debug("fault %r", op)
        if op == "drop_watches":
            self.watches.drop(abrupt=bool(body.get("abrupt", False)))
        elif op == "fail_next":
            retry = body.get("retry_after")
            self.faults.fail_next(
                int(body.get("count", 1)),
                int(body.get("status", 500)),
                None if retry is None else float(retry),
                body.get("reason"),
            )
        elif op == "stall_watches":
            self.watches.stall()
        elif op == "slow_streams":
            delay = body.get("delay_per_event")
            self.faults.slow_streams(None if delay is None else float(delay))
        elif op == "corrupt_resource_versions":
            self.faults.corrupt_resource_versions(int(body.get("count", 1)), body.get("value"))
        elif op == "compact":
            self.store.compact()
        elif op == "reset":
            self.faults.reset()
        else:
            raise ValueError(
                f"unknown op {op!r} (drop_watches, fail_next, stall_watches, slow_streams, "
                "corrupt_resource_versions, restart, compact, reset)"
            )

    # -- routing ---------------------------------------------------------------------------

    async def _dispatch(
        self, request: web.BaseRequest, path: str, user: UserInfo
    ) -> web.StreamResponse:
        segments = [s for s in path.split("/") if s]
        method = request.method
        if not segments:
            paths = ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]
            for info in self.store.resources():
                if info.group:
                    paths += [f"/apis/{info.group}", f"/apis/{info.group}/{info.version}"]
            return json_response(ENCODER.encode({"paths": sorted(set(paths))}))
        head = segments[0]
        if head in ("healthz", "livez", "readyz"):
            response = web.Response(text="ok")
            response.headers["Content-Type"] = "text/plain; charset=utf-8"
            return response
        if head == "openapi" and method == "GET":
            document, content_type = openapi_response(
                self.store.resources(), segments, request.headers.get("Accept", "")
            )
            return json_response(document, content_type=content_type)
        if head == "version" and len(segments) == 1:
            return json_response(ENCODER.encode(EMULATED_VERSION))
        resources = self.store.resources()
        accept = request.headers.get("Accept", "")
        if head == "api":
            if len(segments) == 1:
                if wants_aggregated(accept):
                    body = aggregated_discovery(resources, core=True)
                    return json_response(ENCODER.encode(body), content_type=AGGREGATED_V2)
                return json_response(ENCODER.encode(api_versions(self.server_address())))
            if segments[1] != "v1":
                raise path_not_found()
            if len(segments) == 2:
                return self._discovery(api_resource_list(resources, "", "v1"))
            return await self._resource(request, "", "v1", segments[2:], user)
        if head == "apis":
            if len(segments) == 1:
                if wants_aggregated(accept):
                    body = aggregated_discovery(resources, core=False)
                    return json_response(ENCODER.encode(body), content_type=AGGREGATED_V2)
                return json_response(ENCODER.encode(api_group_list(resources)))
            if len(segments) == 2:
                return self._discovery(api_group(resources, segments[1]))
            if len(segments) == 3:
                return self._discovery(api_resource_list(resources, segments[1], segments[2]))
            return await self._resource(request, segments[1], segments[2], segments[3:], user)
        raise path_not_found()

    @staticmethod
    def _discovery(document: dict[str, Any] | None) -> web.Response:
        if document is None:
            raise path_not_found()
        return json_response(ENCODER.encode(document))

    async def _resource(
        self, request: web.BaseRequest, group: str, version: str, rest: list[str], user: UserInfo
    ) -> web.StreamResponse:
        """A path under ``/api/v1`` or ``/apis/{group}/{version}`` (``rest``: the
        segments after it): ``[watch/][namespaces/{ns}/]{plural}[/{name}[/{sub}]]``."""
        watch = False
        if rest and rest[0] == "watch":  # the deprecated /watch/ paths
            watch = True
            rest = rest[1:]
        namespace: str | None = None
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and not (len(rest) == 3 and group == "" and rest[2] in ("status", "finalize"))
        ):
            namespace = rest[1]
            rest = rest[2:]
        if not rest or len(rest) > 3:
            raise path_not_found()
        bucket = self.store.by_gvr.get((group, version, rest[0]))
        if bucket is None:
            raise path_not_found()
        info = self.store.view(bucket, version)  # the version asked for
        if namespace is not None and not info.namespaced:
            raise path_not_found()
        name = rest[1] if len(rest) >= 2 else None
        subresource = rest[2] if len(rest) == 3 else None
        if name is not None and info.namespaced and namespace is None:
            raise path_not_found()
        if subresource is not None and subresource not in info.subresources:
            raise path_not_found()
        if info in REVIEW_RESOURCES and name is None:
            return await serve_review(self.store, request, info, user)
        if subresource == "token" and namespace is not None and name is not None:
            return await serve_token_request(self.store, self.users, request, namespace, name)
        params = request.query
        if params.get("watch"):
            watch = parse_bool("watch", params["watch"]) or watch
        if request.method == "GET" and watch:
            require_verb(info, "watch", "GET")
            return await self.watches.serve(request, bucket, namespace, name, info=info)
        writes = self.writes
        REQUEST_USER.set(user)  # admission's userInfo (this request's task only)
        if name is None:
            return await serve_collection(
                self.store, request, bucket, namespace, writes=writes, info=info
            )
        return await serve_object(
            self.store, request, bucket, namespace, name, subresource, writes=writes, info=info
        )
