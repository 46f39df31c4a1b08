"""Discovery: which resources an API server serves, and what users mean by a name.

:class:`Discovery` reads ``/api`` and ``/apis`` (aggregated discovery,
``apidiscovery.k8s.io/v2`` or ``v2beta1``, where the server offers it: two
requests in all; else the legacy documents, one request per group version),
caches the result and resolves the names people type, as kubectl does:
``pods``, ``pod``, ``Pod``, ``po``, ``deployments.apps``, ``deploy``,
``deployments.v1.apps``, ``apps/v1/deployments``, ``v1/pods``, and the plurals,
singulars, kinds and short names of custom resources.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeGuard

from ..errors import ApiError, NotFoundError
from .paths import quote_segment, validate_name, validate_namespace, validate_path_segment

if TYPE_CHECKING:
    from .rest import Client

__all__ = ["ACCEPT_AGGREGATED", "Discovery", "ResourceInfo", "UnknownResourceError"]

logger = logging.getLogger("kubereflector.client.discovery")

ACCEPT_AGGREGATED: Final = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)
"""``Accept`` of ``/api`` and ``/apis``: aggregated discovery, else the legacy documents."""

_AGGREGATED_KIND: Final = "APIGroupDiscoveryList"
_LEGACY_FETCH_CONCURRENCY: Final = 16


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """One resource of one group version, as discovery describes it.

    ``resource`` is the plural (``deployments``); ``group`` is ``""`` for the
    core group. Immutable and hashable. ``group``, ``version`` and ``resource``
    go into API paths: each must be one path segment (``ValueError`` naming
    the bad value otherwise; ``group`` may be empty).
    """

    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    singular: str = ""
    categories: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.group:
            validate_path_segment(self.group, "group")
        validate_path_segment(self.version, "version")
        validate_path_segment(self.resource, "resource")

    @property
    def group_version(self) -> str:
        """``v1`` for the core group, else ``group/version`` (``apps/v1``)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        """The objects' ``apiVersion`` (same as :attr:`group_version`)."""
        return self.group_version

    @property
    def qualified_name(self) -> str:
        """``pods`` for the core group, else ``plural.group`` (``deployments.apps``)."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    def api_path(self, namespace: str | None = None) -> str:
        """The collection's path: ``/api/v1/namespaces/{ns}/pods``, ``/apis/apps/v1/deployments``.

        ``namespace`` is used only for namespaced resources; ``None`` or ``""``
        means all namespaces. Raises ``ValueError`` for a namespace that is not
        a DNS-1123 label (it would rewrite the path).
        """
        root = (
            f"/apis/{quote_segment(self.group)}/{quote_segment(self.version)}"
            if self.group
            else f"/api/{quote_segment(self.version)}"
        )
        resource = quote_segment(self.resource)
        if namespace and self.namespaced:
            return f"{root}/namespaces/{validate_namespace(namespace)}/{resource}"
        return f"{root}/{resource}"

    def object_path(self, namespace: str | None, name: str, subresource: str | None = None) -> str:
        """One object's path (``.../namespaces/{ns}/pods/{name}[/{subresource}]``).

        A namespaced resource needs ``namespace``; a cluster-scoped one ignores
        it. Raises ``ValueError`` naming the bad value when the namespace is
        missing or invalid, or the name or subresource is not one path segment.
        """
        if self.namespaced and not namespace:
            raise ValueError(
                f"{self.qualified_name} is namespaced: a namespace is needed for {name!r}"
            )
        path = f"{self.api_path(namespace)}/{quote_segment(validate_name(name))}"
        if subresource:
            path += "/" + quote_segment(validate_path_segment(subresource, "subresource"))
        return path

    def supports(self, verb: str) -> bool:
        """Whether discovery lists ``verb`` (``list``, ``watch``, ...) for this resource.

        A resource published without any verbs is assumed to support everything.
        """
        return not self.verbs or verb in self.verbs

    def __str__(self) -> str:
        """``apps/v1/deployments``, ``v1/pods``: a name :meth:`Discovery.resolve` accepts."""
        return f"{self.group_version}/{self.resource}"


class UnknownResourceError(LookupError):
    """The server serves no resource by that name (even after refreshing discovery)."""

    def __init__(self, name: str, suggestions: Iterable[str] = ()) -> None:
        self.name = name
        self.suggestions = tuple(suggestions)
        text = f"the server does not serve a resource named {name!r}"
        if self.suggestions:
            text += f"; did you mean {', '.join(self.suggestions)}?"
        super().__init__(text)

    def __str__(self) -> str:
        return str(self.args[0])


class _Index:
    """An immutable snapshot of discovery, with its lookup tables."""

    __slots__ = ("resources",)

    def __init__(self, resources: list[ResourceInfo]) -> None:
        # Priority order: the core group first, then groups as the server lists
        # them (its priority), each group's preferred version first.
        self.resources = resources

    def find(self, name: str) -> ResourceInfo | None:
        text = name.strip()
        if not text:
            return None
        if "/" in text:
            parts = text.split("/")
            if len(parts) == 2:
                return self._match(parts[1], group="", version=parts[0])
            if len(parts) == 3:
                return self._match(parts[2], group=parts[0], version=parts[1])
            return None
        if "." in text:
            resource, _, rest = text.partition(".")
            version, dot, group = rest.partition(".")
            if dot:  # resource.version.group, else resource.group (with dots)
                found = self._match(resource, group=group, version=version)
                if found is not None:
                    return found
            return self._match(resource, group=rest)
        return self._match(text)

    def _match(
        self, name: str, *, group: str | None = None, version: str | None = None
    ) -> ResourceInfo | None:
        lowered = name.lower()
        candidates = [
            r
            for r in self.resources
            if (group is None or r.group == group.lower())
            and (version is None or r.version == version)
        ]
        for key in (
            lambda r: r.resource == lowered,
            lambda r: r.singular == lowered,
            lambda r: lowered in r.short_names,
            lambda r: r.kind.lower() == lowered,
        ):
            for info in candidates:
                if key(info):
                    return info
        return None

    def names(self) -> Iterator[str]:
        for r in self.resources:
            yield r.resource
            yield r.qualified_name
            if r.singular:
                yield r.singular
            yield from r.short_names

    def suggest(self, name: str) -> list[str]:
        words = sorted(set(self.names()))
        base = name.lower().split("/")[-1]
        return difflib.get_close_matches(base, words, n=3, cutoff=0.6)


class Discovery:
    """Resolves resource names against one server's discovery documents.

    Cached: the first lookup fetches discovery, later ones answer from the
    cache; a name that is not found triggers one refresh before
    :class:`UnknownResourceError` is raised (so a CRD created after the cache
    was filled is found). Concurrent callers share one fetch. Use from the
    Client's event loop. Network and API errors of the fetch propagate (see
    :class:`~kubereflector.client.Client`); a group version that fails in
    legacy discovery (an unavailable aggregated API) is logged and skipped.
    """

    def __init__(self, client: Client) -> None:
        self._client = client
        self._index: _Index | None = None
        self._generation = 0
        self._lock = asyncio.Lock()

    def invalidate(self) -> None:
        """Drop the cache: the next lookup fetches discovery again."""
        self._index = None

    async def resources(self) -> list[ResourceInfo]:
        """Every resource (subresources excluded), in priority order; a new list."""
        return list((await self._get_index()).resources)

    async def resolve(self, name: str) -> ResourceInfo:
        """The resource ``name`` means (plural, singular, kind, short name,
        ``plural.group``, ``plural.version.group``, ``group/version/plural``, ``v1/plural``).

        Ambiguous names resolve like kubectl: the core group first, then the
        server's group order; a group's preferred version first; a plural
        beats a singular, a short name and a kind. Raises
        :class:`UnknownResourceError` (with close matches) if the name is
        still unknown after one refresh.
        """
        generation = self._generation
        index = self._index
        if index is None:
            index = await self._refresh(generation)
            generation = -1  # fresh: no second fetch for this call
        found = index.find(name)
        if found is None and generation >= 0:
            index = await self._refresh(generation)
            found = index.find(name)
        if found is None:
            raise UnknownResourceError(name, index.suggest(name))
        return found

    async def _get_index(self) -> _Index:
        index = self._index
        if index is not None:
            return index
        return await self._refresh(self._generation)

    async def _refresh(self, seen_generation: int) -> _Index:
        """Fetch discovery, unless another caller did since ``seen_generation``."""
        async with self._lock:
            if self._generation != seen_generation and self._index is not None:
                return self._index
            resources = await self._fetch()
            index = _Index(resources)
            self._index = index
            self._generation += 1
            logger.debug("discovery: %d resources", len(resources))
            return index

    async def _fetch(self) -> list[ResourceInfo]:
        client = self._client
        core = await client.request("GET", "/api", accept=ACCEPT_AGGREGATED)
        if _is_aggregated(core):
            resources = list(_parse_aggregated(core, self._source("/api")))
        else:
            resources = await self._legacy_core(core)
        try:
            groups = await client.request("GET", "/apis", accept=ACCEPT_AGGREGATED)
        except NotFoundError:
            groups = None
        if _is_aggregated(groups):
            resources.extend(_parse_aggregated(groups, self._source("/apis")))
        elif isinstance(groups, Mapping):
            resources.extend(await self._legacy_groups(groups))
        return resources

    def _source(self, path: str) -> str:
        """The URL of a discovery document, for log lines."""
        return self._client.server + path

    async def _legacy_core(self, versions_doc: Any) -> list[ResourceInfo]:
        versions = versions_doc.get("versions") if isinstance(versions_doc, Mapping) else None
        resources: list[ResourceInfo] = []
        for version in _segments(versions, "version", self._source("/api")) or ["v1"]:
            path = f"/api/{version}"
            doc = await self._client.request("GET", path)
            resources.extend(_parse_resource_list(doc, "", version, self._source(path)))
        return resources

    async def _legacy_groups(self, groups_doc: Mapping[str, Any]) -> list[ResourceInfo]:
        source = self._source("/apis")
        wanted: list[tuple[str, str]] = []
        for group in groups_doc.get("groups") or ():
            if not isinstance(group, Mapping):
                continue
            names = _segments([group.get("name")], "group", source)
            if not names:
                continue
            name = names[0]
            versions = _segments(
                [v.get("version") for v in group.get("versions") or () if isinstance(v, Mapping)],
                f"version of group {name!r}",
                source,
            )
            preferred = group.get("preferredVersion")
            if isinstance(preferred, Mapping) and preferred.get("version") in versions:
                first = str(preferred["version"])
                versions.remove(first)
                versions.insert(0, first)
            wanted.extend((name, v) for v in versions)
        semaphore = asyncio.Semaphore(_LEGACY_FETCH_CONCURRENCY)

        async def fetch(group: str, version: str) -> list[ResourceInfo]:
            path = f"/apis/{group}/{version}"
            async with semaphore:
                try:
                    doc = await self._client.request("GET", path)
                except ApiError as err:
                    logger.warning("discovery: skipping %s/%s: %s", group, version, err)
                    return []
            return list(_parse_resource_list(doc, group, version, self._source(path)))

        pages = await asyncio.gather(*(fetch(g, v) for g, v in wanted))
        return [info for page in pages for info in page]


# -- parsing ----------------------------------------------------------------------
#
# Discovery documents come from the server: every group, version and resource
# name in them goes into API paths later, so each is validated (as one path
# segment, by ResourceInfo) and an entry that fails is logged with the
# document's URL and skipped.


def _is_aggregated(doc: object) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(doc, Mapping) and doc.get("kind") == _AGGREGATED_KIND


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(str(v) for v in value if isinstance(v, str))


def _segments(values: Any, what: str, source: str) -> list[str]:
    """The strings of ``values`` that are valid path segments; others logged and skipped."""
    if not isinstance(values, list):
        return []
    good: list[str] = []
    for value in values:
        if value is None or value == "":
            continue
        try:
            good.append(validate_path_segment(value, what))
        except ValueError as err:
            logger.warning("discovery: %s lists an unusable %s (%s); skipped", source, what, err)
    return good


def _resource_info(source: str, **fields: Any) -> ResourceInfo | None:
    """A ResourceInfo from a discovery document's fields, or ``None`` (logged) if unusable."""
    try:
        return ResourceInfo(**fields)
    except ValueError as err:
        logger.warning("discovery: %s lists an unusable resource (%s); skipped", source, err)
        return None


def _parse_aggregated(doc: Mapping[str, Any], source: str) -> Iterator[ResourceInfo]:
    """Resources of an ``APIGroupDiscoveryList`` (versions come in preference order)."""
    for group_doc in doc.get("items") or ():
        if not isinstance(group_doc, Mapping):
            continue
        meta = group_doc.get("metadata")
        group = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
        for version_doc in group_doc.get("versions") or ():
            if not isinstance(version_doc, Mapping):
                continue
            version = str(version_doc.get("version") or "")
            for res in version_doc.get("resources") or ():
                if not isinstance(res, Mapping) or not res.get("resource"):
                    continue
                plural = str(res["resource"])
                if "/" in plural:
                    continue
                response_kind = res.get("responseKind")
                kind = (
                    str(response_kind.get("kind") or "")
                    if isinstance(response_kind, Mapping)
                    else ""
                )
                info = _resource_info(
                    source,
                    group=group,
                    version=version,
                    resource=plural,
                    kind=kind,
                    namespaced=res.get("scope") == "Namespaced",
                    verbs=_strings(res.get("verbs")),
                    short_names=_strings(res.get("shortNames")),
                    singular=str(res.get("singularResource") or kind.lower()),
                    categories=_strings(res.get("categories")),
                )
                if info is not None:
                    yield info


def _parse_resource_list(doc: Any, group: str, version: str, source: str) -> Iterator[ResourceInfo]:
    """Resources of a legacy ``APIResourceList`` (subresources skipped)."""
    if not isinstance(doc, Mapping):
        return
    for res in doc.get("resources") or ():
        if not isinstance(res, Mapping):
            continue
        plural = str(res.get("name") or "")
        if not plural or "/" in plural:
            continue
        kind = str(res.get("kind") or "")
        info = _resource_info(
            source,
            group=str(res.get("group") or group),
            version=str(res.get("version") or version),
            resource=plural,
            kind=kind,
            namespaced=bool(res.get("namespaced")),
            verbs=_strings(res.get("verbs")),
            short_names=_strings(res.get("shortNames")),
            singular=str(res.get("singularName") or kind.lower()),
            categories=_strings(res.get("categories")),
        )
        if info is not None:
            yield info
