"""The event handler types (cache/handlers.py) on their own: what each calls.

How informers deliver to them (threads, ordering, filtering transitions through a
cache) is tested in test_controller.py and test_shared_informer.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubereflector import (
    FilteringResourceEventHandler,
    ResourceEventHandler,
    ResourceEventHandlerDetailedFuncs,
    ResourceEventHandlerFuncs,
)


def test_funcs_call_what_was_given_and_skip_the_rest() -> None:
    calls: list[Any] = []
    handler = ResourceEventHandlerFuncs(on_add=calls.append, on_delete=calls.append)
    handler.on_add("x", True)
    handler.on_update("old", "new")
    handler.on_delete("y")
    assert calls == ["x", "y"]
    assert isinstance(handler, ResourceEventHandler)


def test_detailed_funcs_pass_is_in_initial_list() -> None:
    calls: list[Any] = []
    handler = ResourceEventHandlerDetailedFuncs(
        on_add=lambda obj, initial: calls.append((obj, initial)),
        on_update=lambda old, new: calls.append((old, new)),
    )
    handler.on_add("x", True)
    handler.on_update("a", "b")
    handler.on_delete("z")
    assert calls == [("x", True), ("a", "b")]


def test_funcs_refuse_what_is_not_callable() -> None:
    with pytest.raises(TypeError, match="callable"):
        ResourceEventHandlerFuncs(on_add="nope")  # type: ignore[arg-type]


class _Calls:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self.calls.append(("add", obj, is_in_initial_list))

    def on_update(self, old: Any, new: Any) -> None:
        self.calls.append(("update", old, new))

    def on_delete(self, obj: Any) -> None:
        self.calls.append(("delete", obj))


def test_filtering_handler_transitions() -> None:
    inner = _Calls()
    handler = FilteringResourceEventHandler(lambda n: n % 2 == 0, inner)
    handler.on_add(2, True)  # passes
    handler.on_add(3, True)  # fails: dropped
    handler.on_update(2, 4)  # passes -> passes: update
    handler.on_update(3, 4)  # fails -> passes: add of the new object
    handler.on_update(4, 5)  # passes -> fails: delete of the old object
    handler.on_update(5, 7)  # fails -> fails: dropped
    handler.on_delete(6)  # passes
    handler.on_delete(7)  # fails: dropped
    assert inner.calls == [
        ("add", 2, True),
        ("update", 2, 4),
        ("add", 4, False),
        ("delete", 4),
        ("delete", 6),
    ]


def test_filtering_handler_refuses_a_coroutine_filter() -> None:
    async def accept(obj: Any) -> bool:
        return True

    with pytest.raises(TypeError, match="plain function"):
        FilteringResourceEventHandler(accept, _Calls())  # type: ignore[arg-type]
