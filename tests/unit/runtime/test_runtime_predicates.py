"""Predicates: each ready-made one, combinators, and tombstones."""

from __future__ import annotations

from typing import Any

import pytest

from kubereflector import DeletedFinalStateUnknown, LabelSelector
from kubereflector.runtime import (
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


def cm(
    *,
    rv: str = "1",
    generation: int | None = 1,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "a", "namespace": "ns", "resourceVersion": rv}
    if generation is not None:
        meta["generation"] = generation
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta}


def test_generation_changed() -> None:
    assert generation_changed.update(cm(generation=1), cm(generation=2, rv="2"))
    assert not generation_changed.update(cm(generation=1), cm(generation=1, rv="2"))
    # No generation on either side (a ConfigMap on a real cluster): no update passes.
    assert not generation_changed.update(cm(generation=None), cm(generation=None, rv="2"))
    assert generation_changed.create(cm())
    assert generation_changed.delete(cm())


def test_resource_version_changed_drops_resyncs() -> None:
    assert resource_version_changed.update(cm(rv="1"), cm(rv="2"))
    assert not resource_version_changed.update(cm(rv="1"), cm(rv="1"))
    assert resource_version_changed.create(cm())
    assert resource_version_changed.delete(cm())


def test_labels_changed() -> None:
    assert labels_changed.update(cm(labels={"a": "1"}), cm(labels={"a": "2"}))
    assert labels_changed.update(cm(), cm(labels={"a": "1"}))
    assert not labels_changed.update(cm(labels={"a": "1"}), cm(labels={"a": "1"}, rv="2"))
    # Absent and empty are the same.
    assert not labels_changed.update(cm(), cm(labels={}))


def test_annotations_changed() -> None:
    assert annotations_changed.update(cm(annotations={"x": "1"}), cm(annotations={"x": "2"}))
    assert not annotations_changed.update(cm(annotations={"x": "1"}), cm(annotations={"x": "1"}))
    assert not annotations_changed.update(cm(), cm(annotations={}))
    assert annotations_changed.update(cm(), cm(annotations={"x": ""}))


@pytest.mark.parametrize(
    "selector",
    ["app=web", LabelSelector.parse("app=web"), {"matchLabels": {"app": "web"}}],
)
def test_label_selector_accepts_text_parsed_and_mapping(selector: Any) -> None:
    p = label_selector(selector)
    assert p.create(cm(labels={"app": "web"}))
    assert not p.create(cm(labels={"app": "db"}))
    # An update tests the new state: relabelled out of the selection, it is dropped.
    assert not p.update(cm(labels={"app": "web"}), cm(labels={"app": "db"}))
    assert p.update(cm(labels={"app": "db"}), cm(labels={"app": "web"}))
    assert p.delete(cm(labels={"app": "web"}))


def test_label_selector_expressions_and_errors() -> None:
    p = label_selector({"matchExpressions": [{"key": "tier", "operator": "Exists"}]})
    assert p.create(cm(labels={"tier": "x"}))
    assert not p.create(cm())
    with pytest.raises(ValueError, match="matchLabels and matchExpressions"):
        label_selector({"matchLabel": {"a": "b"}})
    with pytest.raises(ValueError, match="a in"):
        label_selector("a in (")
    with pytest.raises(TypeError, match="not int"):
        label_selector(3)  # type: ignore[arg-type]


def test_predicates_look_inside_tombstones() -> None:
    p = label_selector("app=web")
    assert p.delete(DeletedFinalStateUnknown("ns/a", cm(labels={"app": "web"})))
    assert not p.delete(DeletedFinalStateUnknown("ns/a", cm(labels={"app": "db"})))
    # A tombstone without a last state cannot match a selector.
    assert not p.delete(DeletedFinalStateUnknown("ns/a", None))
    assert generation_changed.delete(DeletedFinalStateUnknown("ns/a", None))


def test_combinators() -> None:
    web = label_selector("app=web")
    both = and_(web, generation_changed)
    assert both.update(cm(labels={"app": "web"}), cm(labels={"app": "web"}, generation=2))
    assert not both.update(cm(labels={"app": "web"}), cm(labels={"app": "web"}, rv="2"))
    assert not both.update(cm(), cm(generation=2))

    either = or_(generation_changed, labels_changed)
    assert either.update(cm(), cm(labels={"a": "b"}))
    assert either.update(cm(), cm(generation=2))
    assert not either.update(cm(), cm(rv="2"))

    assert not_(web).create(cm(labels={"app": "db"}))
    assert not not_(web).create(cm(labels={"app": "web"}))
    assert not_(generation_changed).update(cm(), cm(rv="2"))

    # Empty combinations: and_ lets everything through, or_ nothing.
    assert and_().create(cm())
    assert not or_().create(cm())


def test_combinators_stop_early() -> None:
    asked: list[str] = []

    def recording(label: str, answer: bool) -> Predicate:
        def create(_obj: Any) -> bool:
            asked.append(label)
            return answer

        return Predicate(create=create, name=label)

    assert not and_(recording("no", False), recording("never", True)).create(cm())
    assert or_(recording("yes", True), recording("never", False)).create(cm())
    assert asked == ["no", "yes"]


def test_custom_predicates() -> None:
    only_updates = Predicate(create=lambda _o: False, delete=lambda _o: False)
    assert not only_updates.create(cm())
    assert only_updates.update(cm(), cm())
    named = Predicate.from_filter(lambda obj: obj["metadata"]["name"] == "a")
    assert named.create(cm())
    assert named.update(cm(), cm())
    assert named.delete(cm())
    assert "lambda" in repr(named)
    assert "and_(label_selector" in repr(and_(label_selector("a=b"), labels_changed))
    with pytest.raises(TypeError):
        Predicate(create=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Predicates"):
        and_(lambda _o: True)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        generation_changed.create = lambda _o: False
