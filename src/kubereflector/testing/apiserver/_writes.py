"""The write path as kube-apiserver runs it when admission webhooks are configured or a
request addresses a version other than the storage one (:class:`Writes`): the request's
object in its version, its managedFields recorded, the mutating webhooks, conversion to
the storage version, the store's checks (a dry run), the validating webhooks, then the
write, and the answer converted back to the request's version.

Between the awaits other writes may happen: like kube's ``GuaranteedUpdate``, an update
whose object changed meanwhile starts again from the new object (its webhooks called
again); a create checks again that its name is free. Without webhooks and in the storage
version, the verbs call the store directly (:meth:`Writes.plain`).

Private to :mod:`kubereflector.testing.apiserver`. Event loop only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from ._admission import Admission, Attributes, write_options
from ._conversion import Conversions
from ._fields import FieldManagers
from ._records import ENCODER, Bucket, Record, decode
from ._resources import ServedResource
from ._statuses import bad_request, conflict, not_found
from ._store import Store, WriteRequest
from ._strategy import EMPTY, managers_for, patched, replacement, request_body, set_managed
from ._timestamps import timestamp

__all__ = ["Writes"]

_ATTEMPTS: Final = 10
"""How many times an update starts again when its object keeps changing under it."""
_WIPED: Final = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)
"""What kube wipes from a create's metadata before admission (``WipeObjectMetaSystemFields``)."""


def _copy(obj: Mapping[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = decode(ENCODER.encode(obj))
    return copied


class Writes:
    """Creates, updates, patches, applies and deletes with admission and conversion."""

    def __init__(self, store: Store, admission: Admission, conversions: Conversions) -> None:
        self.store = store
        self.admission = admission
        self.conversions = conversions

    # -- when and how to convert --------------------------------------------------------

    def plain(self, bucket: Bucket, info: ServedResource) -> bool:
        """Whether a write of ``bucket`` in ``info``'s version needs neither admission nor
        conversion (the store is called directly)."""
        return info is bucket.info and not self.admission.concerns(info)

    def converts(self, bucket: Bucket) -> bool:
        """Whether reads of ``bucket`` may need conversion (a CRD's resource)."""
        return bucket.info.group_resource in self.conversions.by_resource

    async def out(self, info: ServedResource, record: Record) -> dict[str, Any]:
        """The stored ``record`` in ``info``'s version."""
        return await self.conversions.convert_one(info, record.obj)

    async def encoded(self, info: ServedResource, record: Record) -> bytes:
        """The stored ``record``'s JSON in ``info``'s version."""
        if record.obj.get("apiVersion") == info.api_version:
            return record.full()
        return ENCODER.encode(await self.out(info, record))

    async def _in_storage(self, bucket: Bucket, obj: dict[str, Any]) -> dict[str, Any]:
        return await self.conversions.convert_one(bucket.info, obj)

    # -- create ----------------------------------------------------------------------------

    async def create(
        self,
        http: Any,
        bucket: Bucket,
        info: ServedResource,
        body: Any,
        namespace: str | None,
        writer: WriteRequest,
        options: Mapping[str, Any],
    ) -> tuple[bytes, list[str]]:
        """POST ``body`` (in ``info``'s version): the created object's JSON in that
        version, and the webhooks' warnings."""
        obj = request_body(info, body, strict=True)
        meta = obj["metadata"]
        for key in _WIPED:
            meta.pop(key, None)
        _set_namespace(info, meta, namespace)
        _track(obj, EMPTY, info, writer, "")
        meta["creationTimestamp"] = None  # what kube sends: a Go zero time
        attrs = self._attributes(http, "CREATE", bucket, info, "", meta, writer, options)
        mutated = await self.admission.mutate(attrs, obj, None)
        assert mutated is not None
        return await self._create(attrs, bucket, info, mutated, namespace, writer)

    async def _create(
        self,
        attrs: Attributes,
        bucket: Bucket,
        info: ServedResource,
        mutated: dict[str, Any],
        namespace: str | None,
        writer: WriteRequest,
    ) -> tuple[bytes, list[str]]:
        """The rest of a create, once the mutating webhooks have run."""
        stored = await self._in_storage(bucket, mutated)
        tracked = replace(writer, dry_run=True, fields_tracked=True)
        preview = self.store.create(bucket, stored, namespace, request=tracked)
        attrs.name = preview.name
        await self.admission.validate(attrs, await self.out(info, preview), None)
        record = preview if writer.dry_run else self.store.insert(bucket, preview)
        return await self.encoded(info, record), attrs.warnings

    # -- update, patch ---------------------------------------------------------------------

    async def update(
        self,
        http: Any,
        bucket: Bucket,
        info: ServedResource,
        namespace: str | None,
        name: str,
        body: Any,
        subresource: str | None,
        writer: WriteRequest,
        options: Mapping[str, Any],
    ) -> tuple[bytes, list[str]]:
        """PUT ``body`` (in ``info``'s version) to the object or its ``subresource``."""
        checked = request_body(info, body, strict=True)
        given = checked["metadata"].get("name")
        if given and given != name:
            raise bad_request(
                f"the name of the object ({given}) does not match the name on the URL ({name})"
            )
        return await self._update(
            http,
            bucket,
            info,
            namespace,
            name,
            lambda _old: _copy(checked),
            subresource,
            writer,
            options,
        )

    async def patch(
        self,
        http: Any,
        bucket: Bucket,
        info: ServedResource,
        namespace: str | None,
        name: str,
        patch_type: str,
        patch: Any,
        subresource: str | None,
        writer: WriteRequest,
        options: Mapping[str, Any],
    ) -> tuple[bytes, list[str]]:
        """PATCH (JSON, merge or strategic) the object or its ``subresource``: the patch
        applied to the object in ``info``'s version, then written as :meth:`update`."""

        def body(old: dict[str, Any]) -> dict[str, Any]:
            return patched(info, _copy(old), patch_type, patch)

        return await self._update(
            http, bucket, info, namespace, name, body, subresource, writer, options
        )

    async def _update(
        self,
        http: Any,
        bucket: Bucket,
        info: ServedResource,
        namespace: str | None,
        name: str,
        make: Any,
        subresource: str | None,
        writer: WriteRequest,
        options: Mapping[str, Any],
    ) -> tuple[bytes, list[str]]:
        store = self.store
        for _ in range(_ATTEMPTS):
            existing = store.get(bucket, namespace, name)
            old = await self.out(info, existing)
            obj = request_body(info, make(old), strict=True)
            meta = obj["metadata"]
            meta["name"] = name
            _set_namespace(info, meta, existing.namespace or None)
            new = replacement(info, existing, _copy(obj), name, subresource, True)
            managers = managers_for(existing, obj, subresource)
            managers.update(
                old,
                new,
                manager=writer.manager,
                api_version=info.api_version,
                subresource=subresource or "",
                now=timestamp(),
                schema=info.schema,
            )
            set_managed(meta, managers)
            attrs = self._attributes(
                http, "UPDATE", bucket, info, subresource or "", meta, writer, options
            )
            mutated = await self.admission.mutate(attrs, obj, old)
            assert mutated is not None
            stored = await self._in_storage(bucket, mutated)
            tracked = replace(writer, dry_run=True, fields_tracked=True)
            preview = store.update(
                bucket, namespace, name, stored, subresource=subresource, request=tracked
            )
            await self.admission.validate(attrs, await self.out(info, preview), old)
            if store.get(bucket, namespace, name) is not existing:
                continue  # written meanwhile: again, from the new object
            if writer.dry_run:
                record = preview
            else:
                record = store.update(
                    bucket,
                    namespace,
                    name,
                    stored,
                    subresource=subresource,
                    request=replace(writer, fields_tracked=True),
                )
            return await self.encoded(info, record), attrs.warnings
        raise conflict(bucket.info, name, "the object keeps changing; please try again")

    # -- server-side apply -----------------------------------------------------------------

    async def apply(
        self,
        http: Any,
        bucket: Bucket,
        info: ServedResource,
        namespace: str | None,
        name: str,
        config: Any,
        subresource: str | None,
        writer: WriteRequest,
        force: bool,
        options: Mapping[str, Any],
    ) -> tuple[bytes, list[str], bool]:
        """Server-side apply of ``config``: the object's JSON, the warnings, and whether it
        was created. A configuration in another version than the storage one is converted
        to it and applied there (kube applies in the request's version)."""
        store = self.store
        if isinstance(config, dict) and info is not bucket.info:
            config = await self._in_storage(bucket, config)
        for _ in range(_ATTEMPTS):
            key = f"{namespace}/{name}" if bucket.info.namespaced else name
            existing = bucket.objects.get(key)
            dry = replace(writer, dry_run=True)
            preview = store.apply(
                bucket, namespace, name, config, request=dry, force=force, subresource=subresource
            )
            old = None if existing is None else await self.out(info, existing)
            operation = "CREATE" if existing is None else "UPDATE"
            kind = "CreateOptions" if existing is None else "UpdateOptions"
            view = await self.out(info, preview)
            shown = _copy(view)
            if existing is None:
                for wiped in _WIPED:
                    shown["metadata"].pop(wiped, None)
                shown["metadata"]["creationTimestamp"] = None
            attrs = self._attributes(
                http,
                operation,
                bucket,
                info,
                subresource or "",
                preview.obj["metadata"],
                writer,
                {**options, "kind": kind},
            )
            mutated = await self.admission.mutate(attrs, shown, old)
            assert mutated is not None
            if mutated != shown:  # a webhook changed it: written as that object
                if existing is None:
                    out, warnings = await self._create(
                        attrs, bucket, info, mutated, namespace, writer
                    )
                    return out, warnings, True
                stored = await self._in_storage(bucket, mutated)
                tracked = replace(writer, dry_run=True, fields_tracked=True)
                preview = store.update(
                    bucket, namespace, name, stored, subresource=subresource, request=tracked
                )
                view = await self.out(info, preview)
            await self.admission.validate(attrs, view, old)
            key_now = bucket.objects.get(key)
            if key_now is not existing:
                continue
            if writer.dry_run:
                record = preview
            elif mutated != shown:
                record = store.update(
                    bucket,
                    namespace,
                    name,
                    await self._in_storage(bucket, mutated),
                    subresource=subresource,
                    request=replace(writer, fields_tracked=True),
                )
            else:
                record = store.apply(
                    bucket,
                    namespace,
                    name,
                    config,
                    request=writer,
                    force=force,
                    subresource=subresource,
                )
            return await self.encoded(info, record), attrs.warnings, existing is None
        raise conflict(bucket.info, name, "the object keeps changing; please try again")

    # -- delete ----------------------------------------------------------------------------

    async def delete(
        self,
        http: Any,
        bucket: Bucket,
        info: ServedResource,
        namespace: str | None,
        name: str,
        preconditions: Mapping[str, Any] | None,
        dry_run: bool,
        options: Mapping[str, Any],
    ) -> tuple[Record, bool, list[str]]:
        """DELETE, the webhooks called with the object as ``oldObject``: the final state
        (in storage), whether it is gone, and the warnings."""
        store = self.store
        for _ in range(_ATTEMPTS):
            existing = store.get(bucket, namespace, name)
            store.delete(bucket, namespace, name, preconditions, dry_run=True)  # 409s first
            old = await self.out(info, existing)
            attrs = Attributes(
                "DELETE",
                bucket,
                info,
                "",
                name,
                existing.namespace,
                dry_run,
                write_options("DeleteOptions", options),
                self.admission.user_of(http),
            )
            await self.admission.mutate(attrs, None, old)
            await self.admission.validate(attrs, None, old)
            if store.get(bucket, namespace, name) is not existing:
                continue
            record, gone = store.delete(bucket, namespace, name, preconditions, dry_run=dry_run)
            return record, gone, attrs.warnings
        raise not_found(bucket.info, name)

    # -- helpers ---------------------------------------------------------------------------

    def _attributes(
        self,
        http: Any,
        operation: str,
        bucket: Bucket,
        info: ServedResource,
        subresource: str,
        meta: Mapping[str, Any],
        writer: WriteRequest,
        options: Mapping[str, Any],
    ) -> Attributes:
        kind = str(
            options.get("kind") or ("CreateOptions" if operation == "CREATE" else "UpdateOptions")
        )
        fields = {k: v for k, v in options.items() if k != "kind"}
        return Attributes(
            operation,
            bucket,
            info,
            subresource,
            str(meta.get("name") or ""),
            str(meta.get("namespace") or ""),
            writer.dry_run,
            write_options(kind, fields),
            self.admission.user_of(http),
        )


def _set_namespace(info: ServedResource, meta: dict[str, Any], namespace: str | None) -> None:
    if info.namespaced:
        given = meta.get("namespace")
        if namespace and given and given != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        meta["namespace"] = namespace or given
    else:
        meta.pop("namespace", None)


def _track(
    obj: dict[str, Any],
    old: Mapping[str, Any],
    info: ServedResource,
    writer: WriteRequest,
    subresource: str,
) -> None:
    """Record ``writer``'s change from ``old`` to ``obj`` in ``obj``'s managedFields (before
    admission: what webhooks add belongs to nobody, as in kube)."""
    managers = FieldManagers.decode(obj["metadata"].get("managedFields"))
    managers.update(
        old,
        obj,
        manager=writer.manager,
        api_version=info.api_version,
        subresource=subresource,
        now=timestamp(),
        schema=info.schema,
    )
    set_managed(obj["metadata"], managers)
