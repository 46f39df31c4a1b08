"""Calling user code that may be a plain function or a coroutine function (private)."""

from __future__ import annotations

import inspect

__all__ = ["is_coroutine_callable"]


def is_coroutine_callable(fn: object) -> bool:
    """Whether calling ``fn`` returns a coroutine: a coroutine function, a bound
    one, a ``functools.partial`` of one, or an object with an ``async __call__``."""
    if inspect.iscoroutinefunction(fn):
        return True
    if inspect.isroutine(fn) or inspect.isclass(fn) or not callable(fn):
        return False
    return inspect.iscoroutinefunction(type(fn).__call__)
