"""Predicates: which changes of a watched object deserve a reconcile.

controller-runtime's ``pkg/predicate`` and kube-rs's ``predicates``. A
:class:`Predicate` answers three questions, one per kind of change: should an
added object, an updated one (old and new state) and a deleted one enqueue
anything? The ready-made ones:

* :data:`generation_changed`: updates only when ``metadata.generation``
  changed (a spec change, not a status or metadata change);
* :data:`resource_version_changed`: updates only when ``metadata.resourceVersion``
  changed (drops the periodic resyncs and relists that replay an unchanged object);
* :data:`labels_changed`, :data:`annotations_changed`: updates only when the
  labels (annotations) changed;
* :func:`label_selector`: only objects whose labels match a selector
  (for an update, the new state).

The four ``*_changed`` predicates let every add and delete through, as
controller-runtime's do. Combine them with :func:`and_`, :func:`or_` and
:func:`not_`, or write one with :class:`Predicate` (``Predicate(update=lambda
old, new: ...)``) or :meth:`Predicate.from_filter`.

Predicates are pure, fast, plain functions (never coroutines): the runtime calls
them for every event of a watched resource, on the event loop. They see the
cache's own objects and must not mutate them. A deleted object may arrive as a
:class:`~kubereflector.DeletedFinalStateUnknown` (its delete was only noticed by a
relist); the ready-made predicates look at its last known state. Thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from ..cache.keys import (
    DeletedFinalStateUnknown,
    _meta_field,
    get_labels,
    get_metadata,
    get_resource_version,
)
from ..selectors import LabelSelector, label_selector_from_dict

__all__ = [
    "Predicate",
    "and_",
    "annotations_changed",
    "generation_changed",
    "label_selector",
    "labels_changed",
    "not_",
    "or_",
    "resource_version_changed",
]


def _always(*_objects: Any) -> bool:
    return True


class Predicate:
    """Three filters, one per kind of change; an absent one lets everything through.

    * ``create(obj) -> bool``: an object appeared (also each object of an initial list);
    * ``update(old, new) -> bool``: an object changed (or a resync replayed it);
    * ``delete(obj) -> bool``: an object went (``obj`` may be a
      :class:`~kubereflector.DeletedFinalStateUnknown`).

    Immutable; calling a method never has side effects of its own.
    """

    __slots__ = ("create", "delete", "name", "update")

    create: Callable[[Any], bool]
    update: Callable[[Any, Any], bool]
    delete: Callable[[Any], bool]
    name: str

    def __init__(
        self,
        *,
        create: Callable[[Any], bool] | None = None,
        update: Callable[[Any, Any], bool] | None = None,
        delete: Callable[[Any], bool] | None = None,
        name: str = "Predicate",
    ) -> None:
        for what, fn in (("create", create), ("update", update), ("delete", delete)):
            if fn is not None and not callable(fn):
                raise TypeError(f"Predicate {what} must be callable, not {type(fn).__name__}")
        object.__setattr__(self, "create", create or _always)
        object.__setattr__(self, "update", update or _always)
        object.__setattr__(self, "delete", delete or _always)
        object.__setattr__(self, "name", name)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Predicate is immutable")

    @classmethod
    def from_filter(cls, accept: Callable[[Any], bool], *, name: str | None = None) -> Predicate:
        """One test of a single object for every change (controller-runtime's
        ``NewPredicateFuncs``): adds and deletes test their object (a tombstone's
        last known state), updates test the new state."""
        if not callable(accept):
            raise TypeError(f"a filter must be callable, not {type(accept).__name__}")

        def on_one(obj: Any) -> bool:
            return bool(accept(_last_state(obj)))

        def on_update(_old: Any, new: Any) -> bool:
            return bool(accept(new))

        return cls(
            create=on_one,
            update=on_update,
            delete=on_one,
            name=name or str(getattr(accept, "__name__", "filter")),
        )

    def __repr__(self) -> str:
        return f"<Predicate {self.name}>"


def _last_state(obj: Any) -> Any:
    """The object itself, or the last known state inside a tombstone."""
    if type(obj) is DeletedFinalStateUnknown:
        return obj.obj
    return obj


def _meta_value(obj: Any, json_name: str, attr_name: str) -> Any:
    return _meta_field(get_metadata(obj), json_name, attr_name)


def _changed(json_name: str, attr_name: str, label: str) -> Predicate:
    def update(old: Any, new: Any) -> bool:
        # Absent and empty are the same (no annotations == {}).
        before = _meta_value(old, json_name, attr_name) or None
        return before != (_meta_value(new, json_name, attr_name) or None)

    return Predicate(update=update, name=label)


def _resource_version_update(old: Any, new: Any) -> bool:
    return get_resource_version(old) != get_resource_version(new)


def _labels_update(old: Any, new: Any) -> bool:
    return get_labels(old) != get_labels(new)


generation_changed: Final = _changed("generation", "generation", "generation_changed")
"""Updates pass only when ``metadata.generation`` changed (controller-runtime's
``GenerationChangedPredicate``; kube-rs's ``predicates::generation``). The API
server bumps the generation on spec changes, not on status or metadata changes;
resources without a generation (ConfigMaps, Secrets on a real cluster) then pass
no update at all. Adds and deletes pass."""

resource_version_changed: Final = Predicate(
    update=_resource_version_update, name="resource_version_changed"
)
"""Updates pass only when ``metadata.resourceVersion`` changed (controller-runtime's
``ResourceVersionChangedPredicate``): drops resyncs. Adds and deletes pass."""

labels_changed: Final = Predicate(update=_labels_update, name="labels_changed")
"""Updates pass only when ``metadata.labels`` changed (controller-runtime's
``LabelChangedPredicate``; kube-rs's ``predicates::labels``). Adds and deletes pass."""

annotations_changed: Final = _changed("annotations", "annotations", "annotations_changed")
"""Updates pass only when ``metadata.annotations`` changed (controller-runtime's
``AnnotationChangedPredicate``; kube-rs's ``predicates::annotations``). Adds and
deletes pass."""


def label_selector(
    selector: str | LabelSelector | Mapping[str, Any],
) -> Predicate:
    """Only objects whose labels match ``selector`` (controller-runtime's
    ``LabelSelectorPredicate``): adds and deletes test their object, updates the
    new state (so an object relabelled out of the selection is no longer seen).

    ``selector``: the text (``"app=web,tier in (a,b)"``), a parsed
    :class:`~kubereflector.LabelSelector`, or a ``metav1.LabelSelector`` mapping
    (``{"matchLabels": {...}, "matchExpressions": [...]}``). Raises ``ValueError``
    for a malformed selector, ``TypeError`` for anything else.
    """
    if isinstance(selector, str):
        parsed = LabelSelector.parse(selector)
    elif isinstance(selector, LabelSelector):
        parsed = selector
    elif isinstance(selector, Mapping):
        unknown = set(selector) - {"matchLabels", "matchExpressions"}
        if unknown:
            raise ValueError(
                f"a label selector mapping has matchLabels and matchExpressions, "
                f"not {sorted(unknown)}"
            )
        parsed = label_selector_from_dict(
            selector.get("matchLabels"), selector.get("matchExpressions")
        )
    else:
        raise TypeError(
            "label_selector takes a selector string, a LabelSelector or a "
            f"metav1.LabelSelector mapping, not {type(selector).__name__}"
        )
    matches = parsed.matches

    def accept(obj: Any) -> bool:
        return obj is not None and matches(get_labels(obj))

    return Predicate.from_filter(accept, name=f"label_selector({str(parsed)!r})")


def _check(predicates: tuple[Predicate, ...], what: str) -> None:
    for p in predicates:
        if not isinstance(p, Predicate):
            raise TypeError(f"{what} takes Predicates, not {type(p).__name__}")


def and_(*predicates: Predicate) -> Predicate:
    """Passes a change only when every one of ``predicates`` does (none: everything),
    asking them in order and stopping at the first refusal."""
    return _combined(predicates, all, "and_")


def or_(*predicates: Predicate) -> Predicate:
    """Passes a change when at least one of ``predicates`` does (none: nothing),
    asking them in order and stopping at the first that passes it."""
    return _combined(predicates, any, "or_")


def _combined(
    predicates: tuple[Predicate, ...], quantifier: Callable[[Iterable[bool]], bool], what: str
) -> Predicate:
    """``predicates`` asked in order about each change, their answers reduced by
    ``quantifier`` (``all`` or ``any``, which stop at the first answer that decides),
    named ``what(...)``. Raises ``TypeError`` for an argument that is no Predicate."""
    _check(predicates, what)
    ps = predicates
    return Predicate(
        create=lambda obj: quantifier(p.create(obj) for p in ps),
        update=lambda old, new: quantifier(p.update(old, new) for p in ps),
        delete=lambda obj: quantifier(p.delete(obj) for p in ps),
        name=f"{what}({', '.join(p.name for p in ps)})",
    )


def not_(predicate: Predicate) -> Predicate:
    """Passes exactly the changes ``predicate`` refuses."""
    _check((predicate,), "not_")
    p = predicate
    return Predicate(
        create=lambda obj: not p.create(obj),
        update=lambda old, new: not p.update(old, new),
        delete=lambda obj: not p.delete(obj),
        name=f"not_({p.name})",
    )
