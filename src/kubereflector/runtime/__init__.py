"""The controller runtime: reconcilers, predicates, a manager (controller-runtime for Python)."""

from __future__ import annotations

from .controller import Controller, ControllerStoppedError
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

__all__ = [
    "Controller",
    "ControllerStoppedError",
    "Predicate",
    "ReconcileFunc",
    "Request",
    "Result",
    "TerminalError",
    "and_",
    "annotations_changed",
    "generation_changed",
    "label_selector",
    "labels_changed",
    "not_",
    "or_",
    "resource_version_changed",
]
