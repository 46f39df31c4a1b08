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
from .handlers import EnqueueRequestsHandler, Mapper, RequestQueue, enqueue_object, enqueue_owner
from .manager import LeaderElection, LeaderElectionLostError, Manager, ManagerError
from .options import ControllerOptions
from .permissions import ManagerDescription, Permission, Permissions, Rule
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

__all__ = [
    "Controller",
    "ControllerOptions",
    "ControllerStoppedError",
    "EnqueueRequestsHandler",
    "FinalizerStep",
    "LeaderElection",
    "LeaderElectionLostError",
    "Manager",
    "ManagerDescription",
    "ManagerError",
    "Mapper",
    "Permission",
    "Permissions",
    "Predicate",
    "ReconcileFunc",
    "Request",
    "RequestQueue",
    "Result",
    "Rule",
    "Runnable",
    "TerminalError",
    "and_",
    "annotations_changed",
    "enqueue_object",
    "enqueue_owner",
    "finalizer",
    "finalizer_step",
    "finalizer_sync",
    "generation_changed",
    "label_selector",
    "labels_changed",
    "not_",
    "or_",
    "remove_finalizer_patch",
    "resource_version_changed",
]
