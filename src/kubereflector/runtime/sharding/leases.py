"""The Leases of a sharded controller: their names, labels and records, and where they
are kept (:class:`LeaseStore`).

Two kinds, both ``coordination.k8s.io/v1`` Leases in one namespace, labelled
``sharding.kubereflector.io/group=<name>`` (so one list reads them all):

* a **member** Lease per replica (``<name>-member-<digest of its identity>``,
  role ``member``): its ``holderIdentity`` is the replica's identity, renewed
  every retry period; released (holder ``""``) on graceful shutdown. It says the
  replica is alive (multicluster-runtime's peer Leases);
* a **shard** Lease per virtual shard (``<name>-shard-<i>``, role ``shard``): its
  ``holderIdentity`` is the member allowed to reconcile the shard's objects
  (``""``: nobody). It is written only when the shard changes hands, each write
  a compare-and-swap on its ``resourceVersion``, so exactly one of two replicas
  taking a shard at once succeeds (the fence: multicluster-runtime's per-cluster
  fencing Leases, without their renewals: a holder's member Lease is what
  expires).

Both carry the number of virtual shards (``sharding.kubereflector.io/shards``):
replicas configured with a different number refuse to run beside each other.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from ...cache.listwatch import ListOptions
from ...leaderelection.lock import LEASES, micro_time

if TYPE_CHECKING:
    from ...client.rest import Client

__all__ = [
    "GROUP_LABEL",
    "ROLE_LABEL",
    "SHARDS_ANNOTATION",
    "ClientLeaseStore",
    "LeaseRecord",
    "LeaseStore",
    "member_lease",
    "member_lease_name",
    "shard_lease",
    "shard_lease_name",
    "with_holder",
]

GROUP_LABEL: Final = "sharding.kubereflector.io/group"
"""The label naming the sharded controller a Lease belongs to."""
ROLE_LABEL: Final = "sharding.kubereflector.io/role"
"""``member`` or ``shard``."""
SHARDS_ANNOTATION: Final = "sharding.kubereflector.io/shards"
"""The number of virtual shards the writer was configured with."""
SHARD_ANNOTATION: Final = "sharding.kubereflector.io/shard"
"""On a shard Lease: its shard's number."""

_NAME: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
MAX_NAME: Final = 40
"""A name's limit: it is a label value and a prefix of Lease names."""

Role = Literal["member", "shard"]


def check_name(name: object) -> str:
    """``name`` if it can name a sharded controller (lowercase letters, digits and
    ``-``, at most 40, starting and ending with a letter or digit); else
    ``ValueError`` saying so."""
    if not isinstance(name, str) or len(name) > MAX_NAME or not _NAME.fullmatch(name):
        raise ValueError(
            f"a sharded controller's name is at most {MAX_NAME} lowercase letters, digits and "
            f"'-', starting and ending with a letter or digit (it names Leases), not {name!r}"
        )
    return name


def member_lease_name(group: str, identity: str) -> str:
    """The member Lease of ``identity`` (identities may hold any character: a digest)."""
    return f"{group}-member-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


def shard_lease_name(group: str, shard: int) -> str:
    """The Lease of virtual shard ``shard``."""
    return f"{group}-shard-{shard}"


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """What one Lease of a sharded controller says (a snapshot of a listed Lease).

    Two records are equal when the Lease's holder and times are: a record that
    changes is a renewal (see :class:`~kubereflector.runtime.sharding.membership.Observer`).
    """

    name: str
    role: Role
    holder: str
    duration: float
    renew_time: str | None
    acquire_time: str | None
    transitions: int
    shard: int | None
    shards: int | None

    @classmethod
    def of(cls, lease: Mapping[str, Any]) -> LeaseRecord | None:
        """The record of ``lease``; ``None`` for something that is not one of ours."""
        meta = lease.get("metadata")
        if not isinstance(meta, Mapping):
            return None
        labels = meta.get("labels") or {}
        role = labels.get(ROLE_LABEL)
        if role not in ("member", "shard"):
            return None
        annotations = meta.get("annotations") or {}
        spec = lease.get("spec")
        if not isinstance(spec, Mapping):
            spec = {}
        shard = _int(annotations.get(SHARD_ANNOTATION)) if role == "shard" else None
        if role == "shard" and shard is None:
            return None
        return cls(
            name=str(meta.get("name") or ""),
            role=role,
            holder=str(spec.get("holderIdentity") or ""),
            duration=float(_int(spec.get("leaseDurationSeconds")) or 0),
            renew_time=spec.get("renewTime"),
            acquire_time=spec.get("acquireTime"),
            transitions=_int(spec.get("leaseTransitions")) or 0,
            shard=shard,
            shards=_int(annotations.get(SHARDS_ANNOTATION)),
        )


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _lease(
    group: str, namespace: str, name: str, role: Role, shards: int, spec: dict[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": LEASES.api_version,
        "kind": LEASES.kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {GROUP_LABEL: group, ROLE_LABEL: role},
            "annotations": {SHARDS_ANNOTATION: str(shards)},
        },
        "spec": spec,
    }


def member_lease(
    group: str, namespace: str, identity: str, shards: int, duration: float
) -> dict[str, Any]:
    """A new member Lease of ``identity``, held now."""
    now = micro_time()
    spec = {
        "holderIdentity": identity,
        "leaseDurationSeconds": max(1, int(duration)),
        "acquireTime": now,
        "renewTime": now,
        "leaseTransitions": 0,
    }
    return _lease(group, namespace, member_lease_name(group, identity), "member", shards, spec)


def shard_lease(
    group: str, namespace: str, shard: int, shards: int, holder: str, duration: float
) -> dict[str, Any]:
    """A new Lease of ``shard``, held by ``holder`` (``""``: nobody)."""
    now = micro_time()
    spec = {
        "holderIdentity": holder,
        "leaseDurationSeconds": max(1, int(duration)),
        "acquireTime": now,
        "renewTime": now,
        "leaseTransitions": 0,
    }
    lease = _lease(group, namespace, shard_lease_name(group, shard), "shard", shards, spec)
    lease["metadata"]["annotations"][SHARD_ANNOTATION] = str(shard)
    return lease


def with_holder(lease: Mapping[str, Any], holder: str, duration: float) -> dict[str, Any]:
    """``lease`` (as last read or written: its ``resourceVersion`` makes the update a
    compare-and-swap) held by ``holder`` from now, or renewed when it already is;
    a change of holder counts a transition."""
    out = copy.deepcopy(dict(lease))
    spec = out.setdefault("spec", {})
    now = micro_time()
    if spec.get("holderIdentity") != holder:
        spec["acquireTime"] = now
        if holder:
            spec["leaseTransitions"] = (_int(spec.get("leaseTransitions")) or 0) + 1
    spec["holderIdentity"] = holder
    spec["renewTime"] = now
    spec["leaseDurationSeconds"] = max(1, int(duration))
    return out


class LeaseStore(Protocol):
    """Where a sharded controller's Leases are kept: the API server
    (:class:`ClientLeaseStore`), or memory in tests.

    ``list`` reads every Lease of the group (a consistent read: a Lease written
    before the call is in the answer); ``create`` raises a 409
    :class:`~kubereflector.AlreadyExistsError` when the Lease exists;
    ``update`` writes a Lease as last read or written and raises a 409
    :class:`~kubereflector.ConflictError` when it changed since. Each returns the
    Lease as stored. Other failures raise the transport's errors. Use from one
    event loop.
    """

    async def list(self) -> list[dict[str, Any]]:
        """Every Lease of the group."""
        ...

    async def create(self, lease: dict[str, Any]) -> dict[str, Any]:
        """Store a new Lease."""
        ...

    async def update(self, lease: dict[str, Any]) -> dict[str, Any]:
        """Replace a Lease if unchanged since it was read (compare-and-swap)."""
        ...


class ClientLeaseStore:
    """A :class:`LeaseStore` on the API server, through ``client``: the Leases of
    ``group`` in ``namespace``. Raises ``ValueError`` for an invalid namespace."""

    __slots__ = ("_client", "_group", "_namespace")

    def __init__(self, client: Client, namespace: str, group: str) -> None:
        from ...client.paths import validate_namespace

        self._client = client
        self._namespace = validate_namespace(namespace)
        self._group = check_name(group)

    @property
    def namespace(self) -> str:
        """Where the Leases are."""
        return self._namespace

    async def list(self) -> list[dict[str, Any]]:
        """Every Lease labelled with the group (one request: at most a few hundred)."""
        options = ListOptions(label_selector=f"{GROUP_LABEL}={self._group}")
        result = await self._client.list(LEASES.api_path(self._namespace), options)
        return [item for item in result.items if isinstance(item, dict)]

    async def create(self, lease: dict[str, Any]) -> dict[str, Any]:
        """``POST`` the Lease."""
        return await self._client.create(LEASES.api_path(self._namespace), lease)

    async def update(self, lease: dict[str, Any]) -> dict[str, Any]:
        """``PUT`` the Lease (with its resourceVersion: a compare-and-swap)."""
        name = lease["metadata"]["name"]
        return await self._client.update(LEASES.object_path(self._namespace, name), lease)

    def __repr__(self) -> str:
        return f"<ClientLeaseStore {self._namespace}/{self._group}>"
