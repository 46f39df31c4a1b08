"""How ``watch`` and ``get`` print what they cache: ``watch``'s event log
(:class:`EventLog`) and ``--every`` listings (:func:`print_keys`), ``get``'s listing
and ``get -w``'s changes (:class:`GetPrinter`, :class:`ChangePrinter`), in each
``-o`` format; tables come from :mod:`._tables`. Called on the event loop."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

import msgspec
import yaml

from ..cache.keys import (
    DeletedFinalStateUnknown,
    deletion_handling_meta_namespace_key_func,
    get_metadata,
    get_resource_version,
)
from ..client import ResourceInfo
from ._context import CommandContext
from ._tables import render_table
from ._target import Target

__all__ = ["ChangePrinter", "EventLog", "GetPrinter", "print_keys"]


def _name_prefix(info: ResourceInfo) -> str:
    """What ``kubectl get -o name`` prints before the name: ``pod``, ``deployment.apps``."""
    return f"{info.kind.lower()}.{info.group}" if info.group else info.kind.lower()


def _now_iso() -> str:
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class EventLog:
    """``watch``'s event handler: counts the informer's notifications (changes: adds,
    updates that changed the resourceVersion, deletes and tombstones) in ``count``
    and, unless ``output`` is ``None`` (``--every``), prints each one as ``-o`` says
    (objects of the resource ``info``)."""

    def __init__(self, ctx: CommandContext, output: str | None, info: ResourceInfo) -> None:
        self._ctx = ctx
        self._output = output
        self._name_prefix = _name_prefix(info)  # "pod", "deployment.apps": for -o name
        self.count = 0

    async def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self._emit("ADDED", obj)

    async def on_update(self, old: Any, new: Any) -> None:
        # A relist re-delivers unchanged objects as updates (as client-go does to
        # handlers without a resync period): not a change, so not an event here.
        if get_resource_version(old) != get_resource_version(new):
            self._emit("MODIFIED", new)

    async def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            self._emit("DELETED (missed; from relist)", obj.obj, key=obj.key)
        else:
            self._emit("DELETED", obj)

    def _emit(self, kind: str, obj: Any, *, key: str | None = None) -> None:
        self.count += 1
        output = self._output
        if output is None:
            return
        if key is None:
            key = deletion_handling_meta_namespace_key_func(obj)
        if output == "events":
            rv = (get_resource_version(obj) if obj is not None else None) or "-"
            self._ctx.out(f"{_now_iso()}  {kind:<8}  {key}  {rv}")
        elif output in ("names", "name"):
            if output == "name":
                key = f"{self._name_prefix}/{key.rpartition('/')[2]}"
            self._ctx.out(f"{key} (deleted)" if kind.startswith("DELETED") else key)
        elif obj is None:
            return  # a tombstone with no last known state: nothing to print
        else:
            # kubectl get -w --output-watch-events: the event type with the object
            event = {"type": kind.split(" ")[0], "object": obj}
            if output == "json":
                self._ctx.out(msgspec.json.encode(event).decode())
            else:
                self._ctx.out("---\n" + yaml.safe_dump(event, sort_keys=False).rstrip("\n"))


def print_keys(ctx: CommandContext, objects: Sequence[Any], what: str, output: str) -> None:
    """``watch --every``: the cached ``objects`` (sorted) as ``-o`` says."""
    if output in ("json", "yaml"):
        doc = {"apiVersion": "v1", "kind": "List", "items": objects}
        if output == "json":
            ctx.out(msgspec.json.encode(doc).decode())
        else:
            ctx.out("---\n" + yaml.safe_dump(doc, sort_keys=False).rstrip("\n"))
        return
    keys = [deletion_handling_meta_namespace_key_func(obj) for obj in objects]
    if output == "events":
        ctx.out(f"# {_now_iso()}: {len(keys)} {what}")
    lines = list(keys)
    if output == "names":
        lines.append("")
    if lines:
        ctx.out("\n".join(lines))


class GetPrinter:
    """How ``get`` prints objects: the whole listing, and with ``-w`` each change."""

    def __init__(
        self, output: str, target: Target, printer_columns: Sequence[dict[str, Any]]
    ) -> None:
        self.output = output
        self.target = target
        self.printer_columns = printer_columns
        self.name_prefix = _name_prefix(target.info)

    def listing(self, ctx: CommandContext, objects: Sequence[Any], resource_version: str) -> None:
        """All of ``objects``: a List (``-o json|yaml``, at the cache's
        ``resource_version``), a line each (``-o name|names``), or a table with its
        header; an empty table is ``No resources found`` on stderr, as kubectl says."""
        if self.output in ("json", "yaml"):
            doc = {
                "apiVersion": "v1",
                "kind": "List",
                "metadata": {"resourceVersion": resource_version},
                "items": objects,
            }
            if self.output == "json":
                ctx.out(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode())
            else:
                ctx.out(yaml.safe_dump(doc, sort_keys=False).rstrip("\n"))
        elif self.output in ("name", "names"):
            for obj in objects:
                ctx.out(self.line(obj))
        elif not objects:
            namespace = self.target.namespace
            ctx.err(f"No resources found{f' in {namespace} namespace' if namespace else ''}.")
        else:
            ctx.out(self.table(objects, header=True))

    def line(self, obj: Any) -> str:
        """One object as a line of ``-o name|names|json|yaml`` or a table row."""
        if self.output == "names":
            return deletion_handling_meta_namespace_key_func(obj)
        if self.output == "name":
            return f"{self.name_prefix}/{(get_metadata(obj) or {}).get('name', '')}"
        if self.output == "json":
            return msgspec.json.format(msgspec.json.encode(obj), indent=2).decode()
        if self.output == "yaml":
            return "---\n" + yaml.safe_dump(obj, sort_keys=False).rstrip("\n")
        return self.table([obj], header=False)

    def table(self, objects: Sequence[Any], *, header: bool) -> str:
        """``objects`` as table rows (``-o table|wide``), the column names first if ``header``."""
        info = self.target.info
        return render_table(
            objects,
            info.kind,
            show_namespace=info.namespaced and self.target.namespace is None,
            wide=self.output == "wide",
            printer_columns=self.printer_columns,
            header=header,
        )


class ChangePrinter:
    """``get -w``: after the listing, one line (or row) per change, as kubectl prints
    them; the replay of the cache on registration is skipped (already listed)."""

    def __init__(self, ctx: CommandContext, printer: GetPrinter) -> None:
        self._ctx = ctx
        self._printer = printer

    async def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        if not is_in_initial_list:
            self._ctx.out(self._printer.line(obj))

    async def on_update(self, old: Any, new: Any) -> None:
        if get_resource_version(old) != get_resource_version(new):
            self._ctx.out(self._printer.line(new))

    async def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        if obj is not None:
            self._ctx.out(self._printer.line(obj))
