"""The controller runtime: reconcilers, predicates, a manager (controller-runtime for Python),
and the helpers a reconcile writes with: owner references, status conditions, apply and
create-or-update, finalizers, read-your-own-writes."""

from __future__ import annotations

from .conditions import (
    Conditions,
    ConditionStatus,
    find_condition,
    is_condition_false,
    is_condition_true,
    remove_condition,
    set_condition,
)
from .controller import Controller, ControllerStoppedError
from .finalizer import (
    FinalizerStep,
    finalizer,
    finalizer_step,
    finalizer_sync,
    remove_finalizer_patch,
)
from .handlers import (
    EchoFilter,
    EnqueueRequestsHandler,
    Mapper,
    RequestQueue,
    enqueue_object,
    enqueue_owner,
)
from .manager import LeaderElection, LeaderElectionLostError, Manager, ManagerError
from .options import ControllerOptions, InformerOptions
from .owners import (
    AlreadyOwnedError,
    OwnerReferenceError,
    get_controller_of,
    get_owner_references,
    is_controlled_by,
    remove_owner_reference,
    set_controller_reference,
    set_owner_reference,
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
from .read_your_writes import OwnWrites, ReadYourWritesLister, StaleReadError
from .reconcile import ReconcileFunc, Request, Result, TerminalError
from .runnable import Runnable
from .writes import (
    OperationResult,
    apply,
    apply_sync,
    create_or_patch,
    create_or_patch_sync,
    create_or_update,
    create_or_update_sync,
    default_field_manager,
    merge_patch,
)

__all__ = [
    "AlreadyOwnedError",
    "ConditionStatus",
    "Conditions",
    "Controller",
    "ControllerOptions",
    "ControllerStoppedError",
    "EchoFilter",
    "EnqueueRequestsHandler",
    "FinalizerStep",
    "InformerOptions",
    "LeaderElection",
    "LeaderElectionLostError",
    "Manager",
    "ManagerError",
    "Mapper",
    "OperationResult",
    "OwnWrites",
    "OwnerReferenceError",
    "Predicate",
    "ReadYourWritesLister",
    "ReconcileFunc",
    "Request",
    "RequestQueue",
    "Result",
    "Runnable",
    "StaleReadError",
    "TerminalError",
    "and_",
    "annotations_changed",
    "apply",
    "apply_sync",
    "create_or_patch",
    "create_or_patch_sync",
    "create_or_update",
    "create_or_update_sync",
    "default_field_manager",
    "enqueue_object",
    "enqueue_owner",
    "finalizer",
    "finalizer_step",
    "finalizer_sync",
    "find_condition",
    "generation_changed",
    "get_controller_of",
    "get_owner_references",
    "is_condition_false",
    "is_condition_true",
    "is_controlled_by",
    "label_selector",
    "labels_changed",
    "merge_patch",
    "not_",
    "or_",
    "remove_condition",
    "remove_finalizer_patch",
    "remove_owner_reference",
    "resource_version_changed",
    "set_condition",
    "set_controller_reference",
    "set_owner_reference",
]
