"""SyncClient and SyncResourceClient stay in step with Client and ResourceClient.

The blocking classes promise "the same methods with the same arguments" as the
async ones they run. Here that promise is checked, statically: every public
method and property of the async class has a twin of the same name on the sync
class, with the same parameters (names, kinds, defaults and annotations, as
written), and the sync class has nothing public of its own beyond what is
listed. The return annotations are the same too, but for coroutine versus plain
function (``async def get(...) -> dict`` twins ``def get(...) -> dict``) and the
mappings in ``RETURNS``. An overloaded method (``resource(Pod)`` versus
``resource("pods")``) has the same overloads, in the same order, compared the same
way. Everything that differs on purpose is listed below, each with its reason; a
listed difference that no longer exists fails as well, so the lists cannot go stale.

Instance attributes set in ``__init__`` (``Client.config``,
``Client.request_metrics``) are not class members and are not compared.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

import pytest
from typing_extensions import get_overloads, overload

from kubereflector import WatchEvent, WatchStream
from kubereflector.cache.keys import ModelT
from kubereflector.client import Client, ResourceClient, SyncClient, SyncResourceClient

# What an async return annotation becomes on the sync side (as written in the source).
RETURNS = {
    # An async context manager giving an async iterator of events becomes a context
    # manager giving a blocking iterator of them.
    "WatchStream[ModelT]": "contextlib.AbstractContextManager[Iterator[WatchEvent[ModelT]]]",
    # Client.resource() hands out the async per-resource client, SyncClient.resource()
    # its blocking twin: typed by a model, of KubeObject for a name, either in the
    # implementation.
    "ResourceClient[ModelT]": "SyncResourceClient[ModelT]",
    "ResourceClient[KubeObject]": "SyncResourceClient[KubeObject]",
    "ResourceClient[Any]": "SyncResourceClient[Any]",
}

# -- Client and SyncClient --------------------------------------------------------

CLIENT_ONLY = {
    # The blocking API is per resource (SyncClient.resource(...).get, .list, .watch,
    # .create, ...) plus the generic request(); the path-level verbs, the single list
    # page and the raw watch are reached with sync.run(sync.client.get(...)).
    "get": "per resource, or run(client.get(...))",
    "create": "per resource, or run(client.create(...))",
    "update": "per resource, or run(client.update(...))",
    "patch": "per resource, or run(client.patch(...))",
    "delete": "per resource, or run(client.delete(...))",
    "list": "per resource, or run(client.list(...))",
    "watch": "per resource, or run() on the async stream",
    # Discovery's lookups are coroutines: run(sync.client.discovery.resolve(...)).
    "discovery": "async object: run(client.discovery.resolve(...))",
    # Building a URL does no I/O: sync.client.url(...) may be called from any thread.
    "url": "pure: sync.client.url(...)",
}

SYNC_CLIENT_ONLY = {
    # The async Client underneath, the loop it runs on, and running any coroutine there.
    "client": "the async Client underneath",
    "loop": "the event loop of the background thread",
    "run": "runs a coroutine of the async client, blocking",
}

# -- ResourceClient and SyncResourceClient -----------------------------------------

RESOURCE_ONLY = {
    # The async client the ResourceClient talks through; the sync twin offers the whole
    # async ResourceClient instead (resource_client), whose .client this is.
    "client": "sync: resource_client.client",
}

SYNC_RESOURCE_ONLY = {
    "resource_client": "the async ResourceClient underneath",
}

PAIRS = [
    pytest.param(Client, SyncClient, CLIENT_ONLY, SYNC_CLIENT_ONLY, True, id="Client"),
    pytest.param(
        ResourceClient,
        SyncResourceClient,
        RESOURCE_ONLY,
        SYNC_RESOURCE_ONLY,
        # SyncResourceClient is made by SyncClient.resource(), from a ResourceClient.
        False,
        id="ResourceClient",
    ),
]


def public_members(cls: type) -> dict[str, Any]:
    """The public names ``cls`` and its kubereflector bases define, as the class
    holds them (functions, properties, slot descriptors)."""
    found: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        if base.__module__.partition(".")[0] != "kubereflector":
            continue
        found.update({name: value for name, value in vars(base).items() if name[0] != "_"})
    return found


def parameters(function: Any) -> list[tuple[str, Any, Any, Any]]:
    """Each parameter but ``self``: name, kind, default, annotation (as written)."""
    params = list(inspect.signature(function).parameters.values())[1:]
    return [(p.name, p.kind, p.default, p.annotation) for p in params]


def signature(function: Any) -> str:
    """The parameters after ``self``, as they read in the source."""
    params = list(inspect.signature(function).parameters.values())[1:]
    return str(inspect.Signature(params))


def returns(function: Any) -> Any:
    return inspect.signature(function).return_annotation


def differences(async_cls: type, sync_cls: type, name: str) -> list[str]:
    """How the sync twin of ``async_cls.name`` differs from it (empty: in step)."""
    ours = inspect.getattr_static(async_cls, name)
    twin = inspect.getattr_static(sync_cls, name)
    where = f"{sync_cls.__name__}.{name}"
    if isinstance(ours, property):
        if not isinstance(twin, property):
            return [f"{where} is not a property, as {async_cls.__name__}.{name} is"]
        if returns(ours.fget) != returns(twin.fget):
            return [f"{where} is {returns(twin.fget)!r}, not {returns(ours.fget)!r}"]
        return []
    if not inspect.isfunction(ours):  # a slot attribute: a property or attribute will do
        return []
    if not inspect.isfunction(twin) or inspect.iscoroutinefunction(twin):
        return [f"{where} is not a plain (blocking) method"]
    found = _compare(ours, twin, where)
    our_overloads, twin_overloads = get_overloads(ours), get_overloads(twin)
    if len(our_overloads) != len(twin_overloads):
        found.append(f"{where} has {len(twin_overloads)} overloads, not {len(our_overloads)}")
    pairs = zip(our_overloads, twin_overloads, strict=False)  # a missing one is reported above
    for number, (one, other) in enumerate(pairs, start=1):
        found.extend(_compare(one, other, f"{where} (overload {number})"))
    return found


def _compare(ours: Any, twin: Any, where: str) -> list[str]:
    """How the signature of ``twin`` differs from that of ``ours`` (parameters and,
    through ``RETURNS``, the return annotation)."""
    found = []
    if parameters(ours) != parameters(twin):
        found.append(f"{where}{signature(twin)} differs from {signature(ours)}")
    expected = returns(ours)
    expected = RETURNS.get(expected, expected)
    if returns(twin) != expected:
        found.append(f"{where} returns {returns(twin)!r}, not {expected!r}")
    return found


@pytest.mark.parametrize(("async_cls", "sync_cls", "async_only", "sync_only", "init"), PAIRS)
def test_sync_twin_has_every_method_with_the_same_parameters(
    async_cls: type,
    sync_cls: type,
    async_only: dict[str, str],
    sync_only: dict[str, str],
    init: bool,
) -> None:
    ours = set(public_members(async_cls))
    theirs = set(public_members(sync_cls))
    missing = sorted(ours - theirs - set(async_only))
    assert not missing, f"{sync_cls.__name__} lacks twins of {missing}"
    extra = sorted(theirs - ours - set(sync_only))
    assert not extra, f"{sync_cls.__name__} has {extra}, which {async_cls.__name__} lacks"
    names = sorted(ours & theirs) + (["__init__"] if init else [])
    found = [problem for name in names for problem in differences(async_cls, sync_cls, name)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(("async_cls", "sync_cls", "async_only", "sync_only", "init"), PAIRS)
def test_listed_differences_still_exist(
    async_cls: type,
    sync_cls: type,
    async_only: dict[str, str],
    sync_only: dict[str, str],
    init: bool,
) -> None:
    ours = set(public_members(async_cls))
    theirs = set(public_members(sync_cls))
    stale = sorted((set(async_only) - (ours - theirs)) | (set(sync_only) - (theirs - ours)))
    assert not stale, f"listed as differences, but no longer one-sided: {stale}"


def test_the_comparison_sees_a_parameter_added_to_one_side() -> None:
    """The check itself: a parameter, a default or an annotation that differs is found."""

    class Async:
        async def get(self, name: str, *, dry_run: bool = False) -> dict[str, Any]:
            raise NotImplementedError

        def watch(self, options: int | None = None) -> WatchStream[ModelT]:
            raise NotImplementedError

    class Sync:
        def get(self, name: str, *, dry_run: bool = False) -> dict[str, Any]:
            raise NotImplementedError

        def watch(
            self, options: int | None = None
        ) -> contextlib.AbstractContextManager[Iterator[WatchEvent[ModelT]]]:
            raise NotImplementedError

    assert differences(Async, Sync, "get") == []
    assert differences(Async, Sync, "watch") == []

    class Extra(Sync):
        def get(  # type: ignore[override]
            self, name: str, *, dry_run: bool = False, force: bool = False
        ) -> dict[str, Any]:
            raise NotImplementedError

    class OtherDefault(Sync):
        def get(self, name: str, *, dry_run: bool = True) -> dict[str, Any]:
            raise NotImplementedError

    class Positional(Sync):
        def get(self, name: str, dry_run: bool = False) -> dict[str, Any]:  # type: ignore[override]
            raise NotImplementedError

    class Untyped(Sync):
        def get(self, name, *, dry_run: bool = False) -> dict[str, Any]:  # type: ignore[no-untyped-def]
            raise NotImplementedError

    class Coroutine(Sync):
        async def get(self, name: str, *, dry_run: bool = False) -> dict[str, Any]:  # type: ignore[override]
            raise NotImplementedError

    for wrong in (Extra, OtherDefault, Positional, Untyped, Coroutine):
        assert differences(Async, wrong, "get"), wrong.__name__


def test_the_comparison_sees_overloads_that_differ() -> None:
    """An overload missing on one side, or one whose parameters differ, is found."""

    class Async:
        @overload
        def resource(self, resource: int) -> int: ...
        @overload
        def resource(self, resource: str) -> str: ...
        def resource(self, resource: int | str) -> int | str:
            return resource

    class Sync:
        @overload
        def resource(self, resource: int) -> int: ...
        @overload
        def resource(self, resource: str) -> str: ...
        def resource(self, resource: int | str) -> int | str:
            return resource

    class Fewer:
        @overload
        def resource(self, resource: int) -> int: ...
        @overload
        def resource(self, resource: int | str) -> int | str: ...
        def resource(self, resource: int | str) -> int | str:
            return resource

    class OtherOverload:
        @overload
        def resource(self, resource: int) -> int: ...
        @overload
        def resource(self, resource: bytes) -> str: ...
        def resource(self, resource: int | str | bytes) -> int | str:
            return str(resource)

    assert differences(Async, Sync, "resource") == []
    assert differences(Async, Fewer, "resource") == [
        "Fewer.resource (overload 2)(resource: 'int | str') differs from (resource: 'str')",
        "Fewer.resource (overload 2) returns 'int | str', not 'str'",
    ]
    assert differences(Async, OtherOverload, "resource") == [
        "OtherOverload.resource(resource: 'int | str | bytes') differs from "
        "(resource: 'int | str')",
        "OtherOverload.resource (overload 2)(resource: 'bytes') differs from (resource: 'str')",
    ]


def test_both_clients_overload_resource_for_models_and_names() -> None:
    """The overloads are compared: both classes have them (the check is not vacuous)."""
    assert len(get_overloads(Client.resource)) == len(get_overloads(SyncClient.resource)) == 2
