"""The election record and where it is kept: a ``coordination.k8s.io/v1`` Lease.

client-go's ``tools/leaderelection/resourcelock``. A :class:`ResourceLock` reads,
creates and updates one :class:`LeaderElectionRecord`; updates use optimistic
concurrency (the object's ``resourceVersion``), so of two candidates that read
the same record and both try to take it, exactly one succeeds and the other
gets a 409 Conflict. :class:`LeaseLock` keeps the record in a Lease's ``spec``
(``holderIdentity``, ``leaseDurationSeconds``, ``acquireTime``, ``renewTime``,
``leaseTransitions``), as every Kubernetes component does.

The times in a record are wall-clock timestamps for humans (``kubectl get
lease``); the elector never trusts them for expiry (see
:class:`~kubereflector.leaderelection.LeaderElector`).
"""

from __future__ import annotations

import copy
import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from ..client.discovery import ResourceInfo
from ..client.paths import validate_name, validate_namespace
from ..errors import DecodeError

if TYPE_CHECKING:
    from ..client.rest import Client

__all__ = ["LEASES", "LeaderElectionRecord", "LeaseLock", "ResourceLock", "micro_time"]

LEASES: Final = ResourceInfo(
    group="coordination.k8s.io",
    version="v1",
    resource="leases",
    kind="Lease",
    namespaced=True,
    verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
)
"""The Lease resource (``coordination.k8s.io/v1``), known without discovery."""


def micro_time(moment: datetime.datetime | None = None) -> str:
    """A ``metav1.MicroTime`` string (``2024-05-01T12:00:00.000000Z``) of ``moment``
    (default: now, UTC)."""
    moment = moment or datetime.datetime.now(datetime.timezone.utc)
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class LeaderElectionRecord:
    """The state of one election (client-go's ``LeaderElectionRecord``).

    ``holder_identity`` is ``""`` when nobody holds the lease (a released one).
    ``acquire_time`` and ``renew_time`` are MicroTime strings (or ``None``).
    Two records are equal when every field is: the elector uses that to notice
    that the holder renewed.
    """

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    leader_transitions: int = 0

    @classmethod
    def from_lease_spec(cls, spec: Any) -> LeaderElectionRecord:
        """The record in a Lease's ``spec`` (missing fields are zero)."""
        if not isinstance(spec, dict):
            spec = {}
        return cls(
            holder_identity=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            leader_transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_lease_spec(self) -> dict[str, Any]:
        """The Lease ``spec`` holding this record."""
        spec: dict[str, Any] = {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.leader_transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time is not None:
            spec["renewTime"] = self.renew_time
        return spec


@runtime_checkable
class ResourceLock(Protocol):
    """Where an election keeps its record (client-go's ``resourcelock.Interface``).

    ``get`` raises :class:`~kubereflector.NotFoundError` when there is no record
    yet; ``update`` raises an :class:`~kubereflector.ApiError` with status 409
    when the record changed since this lock last read or wrote it. Other failures
    raise whatever the transport raises. Used from one event loop.
    """

    @property
    def identity(self) -> str:
        """Who this candidate is (unique among the candidates)."""
        ...

    def describe(self) -> str:
        """``namespace/name`` of the lock, for logs."""
        ...

    async def get(self) -> LeaderElectionRecord:
        """The record as stored now; :class:`~kubereflector.NotFoundError` when there is none
        yet."""

    async def create(self, record: LeaderElectionRecord) -> None:
        """Store ``record`` as the first one; a 409 ``ApiError`` (already exists) when another
        candidate was quicker."""

    async def update(self, record: LeaderElectionRecord) -> None:
        """Replace the record last read or written with ``record``; a 409 ``ApiError`` when it
        changed since."""


class LeaseLock:
    """A :class:`ResourceLock` on the Lease ``namespace/name``, through ``client``
    (client-go's ``LeaseLock``).

    ``update`` writes the Lease last read or written with a new ``spec`` (a PUT
    with its ``resourceVersion``), so it needs a ``get`` or ``create`` first and
    fails with 409 if someone else wrote the Lease since. Raises ``ValueError``
    for an invalid namespace or name, or an empty identity. Use it from the
    Client's event loop.
    """

    __slots__ = ("_client", "_identity", "_lease", "_name", "_namespace")

    def __init__(self, client: Client, *, namespace: str, name: str, identity: str) -> None:
        self._client = client
        self._namespace = validate_namespace(namespace)
        self._name = validate_name(name)
        if not isinstance(identity, str) or not identity:
            raise ValueError("a LeaseLock needs a non-empty identity")
        self._identity = identity
        self._lease: dict[str, Any] | None = None

    @property
    def identity(self) -> str:
        """Who this candidate is: the ``holderIdentity`` it writes while leading."""
        return self._identity

    @property
    def namespace(self) -> str:
        """The Lease's namespace."""
        return self._namespace

    @property
    def name(self) -> str:
        """The Lease's name."""
        return self._name

    def describe(self) -> str:
        """``namespace/name`` of the Lease, for logs."""
        return f"{self._namespace}/{self._name}"

    @property
    def lease(self) -> dict[str, Any] | None:
        """A copy of the Lease as last read or written (``None`` before)."""
        return copy.deepcopy(self._lease)

    async def get(self) -> LeaderElectionRecord:
        """Read the Lease and return its record; :class:`~kubereflector.NotFoundError` when it
        does not exist, :class:`~kubereflector.DecodeError` when the answer is not a Lease."""
        lease = await self._client.get(LEASES.object_path(self._namespace, self._name))
        self._lease = _checked(lease, self.describe())
        return LeaderElectionRecord.from_lease_spec(self._lease.get("spec"))

    async def create(self, record: LeaderElectionRecord) -> None:
        """Create the Lease holding ``record``; :class:`~kubereflector.AlreadyExistsError`
        (409) when it exists already."""
        body = {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self._name, "namespace": self._namespace},
            "spec": record.to_lease_spec(),
        }
        created = await self._client.create(LEASES.api_path(self._namespace), body)
        self._lease = _checked(created, self.describe())

    async def update(self, record: LeaderElectionRecord) -> None:
        """Write ``record`` into the Lease last read or written (a PUT with its
        resourceVersion); :class:`~kubereflector.ConflictError` (409) when someone wrote it
        since, ``RuntimeError`` before any :meth:`get` or :meth:`create`."""
        if self._lease is None:
            raise RuntimeError(f"lease {self.describe()} not read yet: call get or create first")
        body = dict(self._lease)
        body["spec"] = record.to_lease_spec()
        updated = await self._client.update(LEASES.object_path(self._namespace, self._name), body)
        self._lease = _checked(updated, self.describe())

    def __repr__(self) -> str:
        return f"<LeaseLock {self.describe()} identity={self._identity!r}>"


def _checked(lease: Any, where: str) -> dict[str, Any]:
    if not isinstance(lease, dict) or not isinstance(lease.get("metadata"), dict):
        raise DecodeError(f"lease {where}: the API server answered something that is not a Lease")
    return lease
