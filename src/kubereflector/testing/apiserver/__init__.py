"""ApiServerEmulator: an in-process HTTP server that behaves like kube-apiserver for the
parts informers use, with fault injection.

::

    async with ApiServerEmulator() as server:
        server.create("pods", {"metadata": {"name": "a"}, "spec": {...}})
        config = load_config(server.kubeconfig_path)   # or kubectl --kubeconfig ...
        server.fail_next(2, 429, retry_after=1)        # the next two requests get 429
        server.drop_watches()                          # every open watch ends

or from a shell (runs until SIGINT/SIGTERM)::

    python -m kubereflector.testing.apiserver --port 6443 --write-kubeconfig kc.yaml

What it serves: core/v1 namespaces, pods, configmaps, secrets, services,
serviceaccounts (with the TokenRequest ``token`` subresource), apps/v1
deployments, policy/v1 poddisruptionbudgets, events.k8s.io/v1 events,
coordination.k8s.io/v1 leases, rbac.authorization.k8s.io/v1 roles, clusterroles
and their bindings, authorization.k8s.io/v1 subjectaccessreviews and
selfsubjectaccessreviews, admissionregistration.k8s.io/v1 validating and mutating
webhook configurations (whose webhooks it calls), and apiextensions.k8s.io/v1
customresourcedefinitions (creating one serves its resource in every served
version: discovery, printer columns, schema, conversion), plus any resource
registered with
:meth:`register_resource` (a CRD stand-in from Python), with legacy and
aggregated (v2) discovery, and OpenAPI v2 (JSON) and v3 documents with
server-side field validation (``fieldValidation``), enough for ``kubectl create
-f`` and ``kubectl apply -f`` to validate; custom resources are pruned, defaulted
and validated by their CRD's structural schema and CEL rules. Writes (create, update,
merge/JSON/strategic patch, server-side apply, delete, deletecollection, the
``status`` subresource, ``dryRun=All``) bump one global resourceVersion (a
decimal string), stamp ``resourceVersion``, ``uid``, ``creationTimestamp`` and,
for resources that have one, ``generation`` (on spec changes), and record
``managedFields`` per field manager; they fail as kube-apiserver does (409
Conflict or AlreadyExists, 422 Invalid with causes, 400). Lists and
watches follow kube-apiserver's resourceVersion semantics, paging with continue
tokens that expire with the retained history, label and field selectors,
watch-list (``sendInitialEvents``) with the ``k8s.io/initial-events-end``
bookmark, KEP-5866's sharded lists and watches (``shardSelector``, echoed in
``metadata.shardInfo``; see :attr:`ApiServerEmulator.sharded_list_watch`),
periodic bookmarks, ``timeoutSeconds``, metadata-only
(``as=PartialObjectMetadata[List]``) and Table (``as=Table``, for kubectl)
answers. Errors are ``Status`` objects with kube's codes, reasons and messages.

Time: every timed behaviour (bookmark interval, ``timeoutSeconds``, history
retention in seconds, slowed streams) runs on the injectable ``clock``; pass a
:class:`~kubereflector.testing.FakeClock` and tests never wait for wall time.
Timestamps inside objects (``creationTimestamp``) are wall-clock, as in kube.

Threading: use an emulator from the event loop it serves on (the Python data
API is synchronous and runs between requests, so each call is atomic). Before
:meth:`start`, the data API may be used from anywhere.

Ownership: the data API copies what it is given and returns fresh copies; the
stored objects are immutable and shared by every list and watch response.

Deliberate differences from kube-apiserver (each for a reason):

* Deletion is immediate (no graceful period, no kubelet); objects with
  ``metadata.finalizers`` get a ``deletionTimestamp`` and go when the last
  finalizer is removed. Deleting a namespace removes its objects at once,
  finalizers or not, then the namespace.
* Lists with ``resourceVersion="0"`` or ``resourceVersionMatch=NotOlderThan``
  ignore ``limit`` (served "from the watch cache", which pages only in kube
  >= 1.33 with the snapshot feature); lists with a selector and ``limit`` get a
  continue token only when more matches exist; ``remainingItemCount`` is given
  only for lists without selectors, as in kube.
* History is kept per resource (like the watch cache) with a global
  resourceVersion (like etcd); ``compact()`` empties every resource's history.
  A too-large resourceVersion on a watch-list is answered at once (kube waits
  up to 3 s for it to arrive first).
* Custom resources whose CRD has a structural schema are pruned, defaulted and
  validated as kube-apiserver 1.28 does it (422 causes and messages as kube's;
  unknown fields reported to ``fieldValidation``), and their CEL rules
  (``x-kubernetes-validations``) evaluated with cel-python and kube's CEL
  libraries (the ``emulator`` extra). Where kube 1.28 and later releases differ,
  the emulator does what 1.28 does (a rule's ``fieldPath`` sticks to the rules
  after it; an apply naming an undeclared field is a 500). Not done: type-checking
  and cost estimation of rules when a CRD is created (a rule is parsed, and one
  calling an unknown function refused), the runtime cost budget, the check that a
  CRD's schema is structural, ratcheting (off by default in 1.28). Several errors
  are listed in the schema's order (kube: Go's random map order).
* Built-in kinds get no admission plugins (the webhooks aside, below), no schema
  validation (only unknown top-level and metadata fields are reported) and no
  defaulting beyond a pod's ``status.phase: Pending``, a namespace's phase and name
  label and the API groups of RBAC bindings. Protobuf is refused
  (415: kubectl's generators such as ``kubectl create configmap`` send protobuf,
  and the 415 says to use ``create -f``/``apply -f``).
* Strategic merge patch follows the built-in kinds' patch strategies and merge keys
  (from the Kubernetes v1.35 OpenAPI spec): merge by key, ``$patch``,
  ``$retainKeys``, ``$setElementOrder``, ``$deleteFromPrimitiveList``, kube's order
  of merged lists. Custom resources refuse it (415), as in kube.
* Admission webhooks (``admissionregistration.k8s.io/v1`` configurations) are
  called as kube-apiserver calls them, on every write over HTTP (the Python data
  API writes like the storage layer: no admission); ``matchConditions`` are not
  evaluated, and a Service-backed webhook is called where
  :meth:`~ApiServerEmulator.route_webhook_service` says (there is no cluster
  network). A CRD is served in every served version: objects stay in the version
  they were stored in and every read of another version converts them (by
  ``apiVersion``, or through the CRD's conversion webhook), where kube may answer
  a list or watch from a cache of that version; server-side apply in another
  version converts the configuration to the storage version and applies there.
* Server-side apply and managedFields follow structured-merge-diff with the
  kind's list types, map keys and map types (built-in kinds from the OpenAPI
  spec, custom resources from the CRD's schema); a status-subresource write
  changes only ``status``. Events are served in events.k8s.io/v1 only.
* The Python data API writes like the storage layer: no field manager,
  ``status`` included, custom resources need no ``kind``.
* Auth: bearer tokens. The emulator's own (or none: ``token=None``) is user
  ``admin`` in ``system:masters``, allowed everything; :meth:`add_user` adds
  static tokens of other users, and ServiceAccount tokens come from the
  TokenRequest API (or :meth:`service_account_token`) and die with their
  ServiceAccount or at their expiry. ``/healthz``, ``/livez``, ``/readyz`` and
  ``/version`` are open to anonymous requests, everything else needs a token
  (kube answers an anonymous request with a 403 where the emulator answers 401).
  (kubectl 1.37 sends a bearer token only over TLS: give kubectl ``tls=True``,
  or ``token=None`` on plain HTTP.)
* RBAC: every other user's requests are authorized as kube-apiserver does it
  (its RequestInfo, its RBAC authorizer, its 403 bodies; the bootstrap
  ClusterRoles ``cluster-admin``, ``system:discovery``, ``system:basic-user`` and
  ``system:public-info-viewer`` with their bindings; Roles, ClusterRoles and
  bindings validated as kube does). ``rbac="report"`` serves what RBAC refuses;
  either way :meth:`denials` lists it (:class:`Denial`). Not emulated:
  aggregated ClusterRoles (kube-controller-manager fills them in), the escalation
  checks on writes of roles and bindings, impersonation, TokenReviews.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._command import main
from ._seed import sample_pod

if TYPE_CHECKING:
    from ._authorization import Denial
    from ._emulator import RANDOM_TOKEN, ApiServerEmulator

__all__ = ["RANDOM_TOKEN", "ApiServerEmulator", "Denial", "main", "sample_pod"]


def __getattr__(name: str) -> Any:
    # Lazy: the private modules FakeControllerSource shares (the Status builders, the
    # watch timer) and the command line's options load without the emulator, aiohttp
    # and yaml.
    if name in ("RANDOM_TOKEN", "ApiServerEmulator"):
        from . import _emulator

        return getattr(_emulator, name)
    if name == "Denial":
        from ._authorization import Denial

        return Denial
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
