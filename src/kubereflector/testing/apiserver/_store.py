"""The emulator's storage: every resource's objects under one global resourceVersion,
with history; the one place that changes them.

Private to :mod:`kubereflector.testing.apiserver`. No I/O and no awaiting: every
method runs to completion on the event loop, so each write is atomic with
respect to every request and watch. A write checks and shapes the object with
:mod:`._strategy`, stores it as a new :class:`~._records.Record` at the next
resourceVersion, records the event in the resource's history and offers it to
the resource's watchers and to the observers. Reads are planned by
:mod:`._queries` over a bucket whose history has been pruned.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ...clock import Clock
from ...errors import failure_status
from . import _queries
from ._fields import ApplyConflict, FieldManagers
from ._queries import ListPage, Query, WatchPlan
from ._records import Bucket, Event, Record, decode
from ._resources import BUILTIN_RESOURCES, ServedResource
from ._statuses import StatusError, already_exists, not_found
from ._strategy import (
    EMPTY,
    apply_body,
    apply_defaults,
    check_preconditions,
    coerce_custom,
    managers_for,
    marked_for_deletion,
    new_object,
    patched,
    replacement,
    request_body,
    set_managed,
    unchanged,
)
from ._timestamps import timestamp
from ._validation import validate_update

__all__ = ["Store", "WriteRequest", "version_priority"]

_INITIAL_NAMESPACES: Final = ("default", "kube-system", "kube-public")
_KUBE_VERSION: Final = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?\Z")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """kube's version order as a sort key (``v2``, ``v1``, ``v1beta2``, ``v1beta1``,
    ``v1alpha1``, then other names alphabetically): the preferred version first."""
    found = _KUBE_VERSION.match(version)
    if found is None:
        return (3, 0, 0, version)
    major, level, minor = found.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[level]
    return (rank, -int(major), -int(minor or 0), version)


@dataclass(frozen=True, slots=True)
class WriteRequest:
    """A write over the API: its field manager, and whether it is a dry run.
    ``fields_tracked``: the body's managedFields were computed already (before admission
    changed the object, as kube does), so the write records nothing more."""

    manager: str
    dry_run: bool = False
    fields_tracked: bool = False


class Store:
    """Every resource's objects under one resourceVersion counter.

    ``history_limit`` events per resource are retained (and, when
    ``history_seconds`` is set, only those younger than that on ``clock``).
    """

    def __init__(self, *, clock: Clock, history_limit: int, history_seconds: float | None) -> None:
        self.clock = clock
        self.history_limit = history_limit
        self.history_seconds = history_seconds
        self.rv = 0
        self.buckets: dict[str, Bucket] = {}
        self.by_gvr: dict[tuple[str, str, str], Bucket] = {}
        # Hooks of resources with server-side behaviour (_crd.py):
        # ``admission[group_resource](obj)`` may amend or refuse (raise StatusError) an
        # object about to be stored; every observer sees each stored change.
        self.admission: dict[str, Callable[[dict[str, Any]], None]] = {}
        self.observers: list[Callable[[Bucket, str, Record], None]] = []
        # The other served versions of a resource (a CRD's, see _conversion), by resource.
        self.versions: dict[str, dict[str, ServedResource]] = {}
        self.sharded_list_watch = True
        """The ``ShardedListAndWatch`` feature gate (KEP-5866): ``shardSelector`` is
        honoured and lists echo it in ``metadata.shardInfo``."""
        for info in BUILTIN_RESOURCES:
            self.register(info)
        namespaces = self.buckets["namespaces"]
        for name in _INITIAL_NAMESPACES:
            self.create(namespaces, {"metadata": {"name": name}}, None)

    # -- resources ---------------------------------------------------------------------------

    def register(self, info: ServedResource) -> Bucket:
        if info.group_resource in self.buckets:
            raise ValueError(f"resource {info.group_resource!r} is already registered")
        if info.group == "" and not info.builtin:
            raise ValueError("registered resources need a group (the core group is built in)")
        bucket = Bucket(info, self.rv)
        self.buckets[info.group_resource] = bucket
        self.by_gvr[(info.group, info.version, info.plural)] = bucket
        return bucket

    def unregister(self, group_resource: str) -> None:
        """Stop serving a resource: its objects are deleted (watchers see it) and its
        watches end, as when kube-apiserver removes a CRD."""
        bucket = self.buckets[group_resource]
        for record in list(bucket.objects.values()):
            self._remove(bucket, record)
        for watcher in list(bucket.watchers):
            watcher.end(discard=False)
        self.set_versions(group_resource, [])
        del self.buckets[group_resource]
        del self.by_gvr[(bucket.info.group, bucket.info.version, bucket.info.plural)]

    def retarget(self, bucket: Bucket, info: ServedResource) -> None:
        """Store ``bucket``'s resource in ``info``'s version from now on (a CRD's new
        storage version): its objects stay as they are, in the version they were stored in."""
        old = bucket.info
        if self.by_gvr.get((old.group, old.version, old.plural)) is bucket:
            del self.by_gvr[(old.group, old.version, old.plural)]
        bucket.info = info
        self.by_gvr[(info.group, info.version, info.plural)] = bucket

    def set_versions(self, group_resource: str, others: list[ServedResource]) -> None:
        """Serve ``others`` (its other versions) as views of the resource's bucket: routed,
        in discovery and OpenAPI; none: stop."""
        for info in self.versions.pop(group_resource, {}).values():
            key = (info.group, info.version, info.plural)
            bucket = self.by_gvr.get(key)
            if (
                bucket is not None
                and bucket.info is not info
                and bucket.info.version != info.version
            ):
                del self.by_gvr[key]
        bucket = self.buckets.get(group_resource)
        if bucket is None or not others:
            return
        views = {}
        for info in others:
            if info.version != bucket.info.version:
                views[info.version] = info
                self.by_gvr[(info.group, info.version, info.plural)] = bucket
        self.versions[group_resource] = views

    def view(self, bucket: Bucket, version: str) -> ServedResource:
        """The resource of ``bucket`` as served in ``version``."""
        if version == bucket.info.version:
            return bucket.info
        return self.versions[bucket.info.group_resource][version]

    def resources(self) -> list[ServedResource]:
        """Every served resource in every version (a resource's versions together, in
        kube's version priority: GA, then beta, then alpha, newer first)."""
        found = []
        for bucket in self.buckets.values():
            views = self.versions.get(bucket.info.group_resource)
            if not views:
                found.append(bucket.info)
                continue
            found.extend(
                sorted([bucket.info, *views.values()], key=lambda i: version_priority(i.version))
            )
        return found

    def resolve(self, resource: str) -> Bucket:
        """A bucket by ``"pods"``, ``"deployments.apps"`` or an unambiguous plural."""
        bucket = self.buckets.get(resource)
        if bucket is not None:
            return bucket
        found = [b for b in self.buckets.values() if b.info.plural == resource]
        if len(found) == 1:
            return found[0]
        if found:
            names = sorted(b.info.group_resource for b in found)
            raise ValueError(f"resource {resource!r} is ambiguous: use one of {names}")
        raise ValueError(f"unknown resource {resource!r} (known: {sorted(self.buckets)})")

    # -- reads -------------------------------------------------------------------------------

    def get(self, bucket: Bucket, namespace: str | None, name: str) -> Record:
        key = f"{namespace}/{name}" if bucket.info.namespaced and namespace else name
        record = bucket.objects.get(key)
        if record is None or (bucket.info.namespaced and not namespace):
            raise not_found(bucket.info, name)
        return record

    def exists(self, bucket: Bucket, namespace: str | None, name: str) -> bool:
        key = f"{namespace}/{name}" if bucket.info.namespaced else name
        return key in bucket.objects

    def list_page(self, bucket: Bucket, namespace: str | None, query: Query) -> ListPage:
        """One page of a list, with kube-apiserver's resourceVersion semantics
        (:func:`._queries.list_page`)."""
        query.validate(bucket.info)
        self.prune(bucket)
        return _queries.list_page(bucket, namespace, query, self.rv)

    def plan_watch(self, bucket: Bucket, namespace: str | None, query: Query) -> WatchPlan:
        """Where a watch starts and what it sends first (:func:`._queries.plan_watch`)."""
        query.validate(bucket.info)
        self.prune(bucket)
        return _queries.plan_watch(bucket, namespace, query, self.rv)

    # -- history -----------------------------------------------------------------------------

    def prune(self, bucket: Bucket) -> None:
        history = bucket.history
        while len(history) > self.history_limit:
            bucket.oldest = history.popleft().rv
        if self.history_seconds is not None and history:
            cutoff = self.clock.now() - self.history_seconds
            while history and history[0].time < cutoff:
                bucket.oldest = history.popleft().rv

    def compact(self) -> None:
        for bucket in self.buckets.values():
            bucket.history.clear()
            bucket.oldest = self.rv

    # -- writes ------------------------------------------------------------------------------

    def create(
        self,
        bucket: Bucket,
        obj: Any,
        namespace: str | None,
        *,
        request: WriteRequest | None = None,
    ) -> Record:
        """POST: a new object, written by ``request`` (``None``: the Python data API,
        which drops server-set fields instead of refusing a ``resourceVersion``, keeps
        ``status`` and records no field manager)."""
        info = bucket.info
        body = self._new_object(bucket, obj, namespace, strict=request is not None)
        if request is not None and not request.fields_tracked:
            managers = FieldManagers.decode(body["metadata"].get("managedFields"))
            managers.update(
                EMPTY,
                body,
                manager=request.manager,
                api_version=info.api_version,
                subresource="",
                now=body["metadata"]["creationTimestamp"],
                schema=info.schema,
            )
            set_managed(body["metadata"], managers)
        return self._insert(bucket, body, dry_run=request is not None and request.dry_run)

    def update(
        self,
        bucket: Bucket,
        namespace: str | None,
        name: str,
        obj: Any,
        *,
        subresource: str | None = None,
        request: WriteRequest | None = None,
    ) -> Record:
        """PUT (of the object or its ``status`` subresource) by ``request``. The main
        resource cannot change ``status`` of a resource with a status subresource
        (kube's strategies), nor the status subresource anything but ``status``;
        ``request=None`` (the Python data API) writes everything given, managedFields
        as given."""
        info = bucket.info
        existing = self.get(bucket, namespace, name)
        body = request_body(info, obj, strict=request is not None)
        coerce_custom(info, body)
        new = replacement(info, existing, body, name, subresource, request is not None)
        managers = None
        if request is not None and request.fields_tracked:
            managers = FieldManagers.decode(body["metadata"].get("managedFields"))
        elif request is not None:
            managers = managers_for(existing, body, subresource)
            managers.update(
                existing.obj,
                new,
                manager=request.manager,
                api_version=info.api_version,
                subresource=subresource or "",
                now=timestamp(),
                schema=info.schema,
            )
        return self._write(
            bucket,
            existing,
            new,
            managers,
            dry_run=request is not None and request.dry_run,
            subresource=subresource,
        )

    def patch(
        self,
        bucket: Bucket,
        namespace: str | None,
        name: str,
        patch_type: str,
        patch: Any,
        *,
        subresource: str | None = None,
        request: WriteRequest | None = None,
    ) -> Record:
        """PATCH with ``patch_type`` ``"json"``, ``"merge"`` or ``"strategic"``: the
        patched object is written as :meth:`update` writes it."""
        existing = self.get(bucket, namespace, name)
        new = patched(bucket.info, decode(existing.full()), patch_type, patch)
        return self.update(bucket, namespace, name, new, subresource=subresource, request=request)

    def apply(
        self,
        bucket: Bucket,
        namespace: str | None,
        name: str,
        config: Any,
        *,
        request: WriteRequest,
        force: bool,
        subresource: str | None = None,
    ) -> Record:
        """Server-side apply of ``config`` by ``request.manager`` (see
        :mod:`._fields`): creates the object if it does not exist; 409 with a cause
        per field when another manager owns a field it changes, unless ``force``."""
        info = bucket.info
        body = apply_body(info, config, name, namespace, subresource)
        key = f"{body['metadata']['namespace']}/{name}" if info.namespaced else name
        existing = bucket.objects.get(key)
        if existing is None and subresource:
            raise not_found(info, name)
        live = decode(existing.full()) if existing is not None else EMPTY
        managers = FieldManagers.decode(live["metadata"].get("managedFields"))
        try:
            new = managers.apply(
                live,
                body,
                manager=request.manager,
                api_version=info.api_version,
                subresource=subresource or "",
                now=timestamp(),
                force=force,
                schema=info.schema,
            )
        except ApplyConflict as exc:
            raise StatusError(
                failure_status(409, "Conflict", exc.message(), {"causes": exc.causes()})
            ) from None
        coerce_custom(info, new)
        if existing is None:
            set_managed(new["metadata"], managers)
            created = self._new_object(bucket, new, namespace, strict=True)
            return self._insert(bucket, created, dry_run=request.dry_run)
        new = replacement(info, existing, new, name, subresource, True)
        return self._write(
            bucket, existing, new, managers, dry_run=request.dry_run, subresource=subresource
        )

    def delete(
        self,
        bucket: Bucket,
        namespace: str | None,
        name: str,
        preconditions: Mapping[str, Any] | None = None,
        *,
        dry_run: bool = False,
    ) -> tuple[Record, bool]:
        """DELETE. Returns the final state and whether the object is gone (an object
        with finalizers only gets its deletionTimestamp). ``dry_run``: the same
        answer, nothing changed."""
        info = bucket.info
        existing = self.get(bucket, namespace, name)
        meta = existing.obj["metadata"]
        check_preconditions(info, name, meta, preconditions or {})
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return existing, False
            new = marked_for_deletion(existing.obj)
            return self._commit(bucket, new, "MODIFIED", existing, dry_run=dry_run), False
        if dry_run:
            return existing, True
        if info.plural == "namespaces" and info.builtin:
            for other in self.buckets.values():
                if other.info.namespaced:
                    for record in list(other.iter_namespace(existing.name)):
                        self._remove(other, record)
        return self._remove(bucket, existing), True

    def insert(self, bucket: Bucket, preview: Record) -> Record:
        """Store the object of a create's dry run (``preview``, admitted since): 404 if its
        namespace went meanwhile, 409 AlreadyExists if its name was taken."""
        info = bucket.info
        obj = dict(preview.obj)
        obj["metadata"] = dict(obj["metadata"])
        if info.namespaced and preview.namespace not in self.buckets["namespaces"].objects:
            raise not_found(self.buckets["namespaces"].info, preview.namespace)
        if preview.key in bucket.objects:
            raise already_exists(info, preview.name)
        return self._commit(bucket, obj, "ADDED", None, dry_run=False)

    def _new_object(
        self, bucket: Bucket, obj: Any, namespace: str | None, *, strict: bool
    ) -> dict[str, Any]:
        """A create's object, checked, admitted and stamped (not stored): 404 if its
        namespace does not exist, 409 AlreadyExists."""
        info = bucket.info
        body = new_object(info, obj, namespace, strict=strict)
        self._admit(info, body)
        meta = body["metadata"]
        name = meta["name"]
        if info.namespaced:
            ns = meta["namespace"]
            namespaces = self.buckets["namespaces"]
            if ns not in namespaces.objects:
                raise not_found(namespaces.info, ns)
            key = f"{ns}/{name}"
        else:
            key = name
        if key in bucket.objects:
            raise already_exists(info, name)
        meta["uid"] = str(uuid.uuid4())
        if info.generation:
            meta["generation"] = 1
        meta["creationTimestamp"] = timestamp()
        return body

    def _insert(self, bucket: Bucket, body: dict[str, Any], *, dry_run: bool) -> Record:
        """Default and store a new object (a dry run: only answer it, without a
        resourceVersion, as kube does)."""
        apply_defaults(bucket.info, body)
        return self._commit(bucket, body, "ADDED", None, dry_run=dry_run)

    def _write(
        self,
        bucket: Bucket,
        existing: Record,
        new: dict[str, Any],
        managers: FieldManagers | None,
        *,
        dry_run: bool,
        subresource: str | None = None,
    ) -> Record:
        """Validate and store the update of ``existing`` to ``new`` (of the ``subresource``,
        if any, whose validation it gets): nothing for a no-op
        (managedFields timestamps aside), the deletion for an object being deleted
        whose last finalizer goes."""
        info = bucket.info
        old = existing.obj
        if managers is not None:
            set_managed(new["metadata"], managers)
        validate_update(info, old, new, subresource)
        self._admit(info, new)
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if unchanged(new, old):
            return existing  # a no-op update writes nothing, as in kube
        if old["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            # kube deletes instead of writing: watchers see the stored state DELETED, the
            # writer gets its object (at the resourceVersion it read).
            if not dry_run:
                self._remove(bucket, existing)
            return Record(new, info.typemeta_prefix)
        return self._commit(bucket, new, "MODIFIED", existing, dry_run=dry_run)

    def _admit(self, info: ServedResource, obj: dict[str, Any]) -> None:
        """Run the resource's admission hook (if any) on a validated object."""
        admit = self.admission.get(info.group_resource)
        if admit is not None:
            admit(obj)

    def _commit(
        self,
        bucket: Bucket,
        obj: dict[str, Any],
        event_type: str,
        prev: Record | None,
        *,
        dry_run: bool,
    ) -> Record:
        """Store ``obj`` (a new object or a new state of ``prev``) in ``bucket`` at the
        next resourceVersion, written into its metadata, and send the ``event_type``
        event to the bucket's watchers and the observers. Returns the stored record;
        for a ``dry_run``, only the record of ``obj`` as it is (nothing stored, no new
        resourceVersion), as kube answers a dry run."""
        if dry_run:
            return Record(obj, bucket.info.typemeta_prefix)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        record = Record(obj, bucket.info.typemeta_prefix)
        bucket.put(record)
        self._emit(bucket, event_type, record, prev)
        return record

    def _remove(self, bucket: Bucket, existing: Record) -> Record:
        """Delete ``existing``: watchers get its stored state, at the deletion's
        resourceVersion."""
        last = dict(existing.obj)
        last["metadata"] = dict(last["metadata"])
        self.rv += 1
        last["metadata"]["resourceVersion"] = str(self.rv)
        record = Record(last, bucket.info.typemeta_prefix)
        bucket.remove(existing.key)
        self._emit(bucket, "DELETED", record, existing)
        return record

    def _emit(self, bucket: Bucket, event_type: str, record: Record, prev: Record | None) -> None:
        event = Event(self.rv, event_type, record, prev, self.clock.now())
        bucket.history.append(event)
        self.prune(bucket)
        for watcher in list(bucket.watchers):
            watcher.offer(event)
        for observer in self.observers:
            observer(bucket, event_type, record)
