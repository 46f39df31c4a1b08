"""The controller runtime: reconcilers, predicates, a manager (controller-runtime for Python)."""

from __future__ import annotations

from .controller import Controller, ControllerStoppedError
from .finalizer import (
    FinalizerStep,
    finalizer,
    finalizer_step,
    finalizer_sync,
    remove_finalizer_patch,
)
from .gate import GateTicket, ReconcileGate, ReconcileRevokedError
from .handlers import EnqueueRequestsHandler, Mapper, RequestQueue, enqueue_object, enqueue_owner
from .manager import LeaderElection, LeaderElectionLostError, Manager, ManagerError
from .manifests import DEFAULT_RESOURCES, Manifest, manifests
from .options import ControllerOptions
from .permissions import (
    ManagerDescription,
    Permission,
    Permissions,
    ResourceRef,
    Rule,
    resolve_resource,
)
from .predicates import (
    Predicate,
    and_,
    annotations_changed,
    generation_changed,
    label_selector,
    labels_changed,
    not_,
    or_,
    resource_version_changed,
)
from .reconcile import ReconcileFunc, Request, Result, TerminalError
from .runnable import Runnable
from .sharding import (
    ClientLeaseStore,
    LeaseStore,
    ShardCoordinator,
    Sharding,
    ShardingStatus,
    ShardSpace,
    assign_shards,
)

__all__ = [
    "DEFAULT_RESOURCES",
    "ClientLeaseStore",
    "Controller",
    "ControllerOptions",
    "ControllerStoppedError",
    "EnqueueRequestsHandler",
    "FinalizerStep",
    "GateTicket",
    "LeaderElection",
    "LeaderElectionLostError",
    "LeaseStore",
    "Manager",
    "ManagerDescription",
    "ManagerError",
    "Manifest",
    "Mapper",
    "Permission",
    "Permissions",
    "Predicate",
    "ReconcileFunc",
    "ReconcileGate",
    "ReconcileRevokedError",
    "Request",
    "RequestQueue",
    "ResourceRef",
    "Result",
    "Rule",
    "Runnable",
    "ShardCoordinator",
    "ShardSpace",
    "Sharding",
    "ShardingStatus",
    "TerminalError",
    "and_",
    "annotations_changed",
    "assign_shards",
    "enqueue_object",
    "enqueue_owner",
    "finalizer",
    "finalizer_step",
    "finalizer_sync",
    "generation_changed",
    "label_selector",
    "labels_changed",
    "manifests",
    "not_",
    "or_",
    "remove_finalizer_patch",
    "resolve_resource",
    "resource_version_changed",
]
