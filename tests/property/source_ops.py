"""What the convergence properties do to a FakeControllerSource: the operations
Hypothesis draws (writes, some missed by the open watches; faults; the passing of
fake time) and :func:`apply`, which performs one of them, and :func:`end_outage`.

A write is ``("write" | "write-missed", namespace, name, label)``: it adds the
object when the source lacks it, deletes it for label ``"z"``, and modifies it
otherwise; a missed write reaches the store but no open watch.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from kubereflector import ApiError, ExpiredError, TooManyRequestsError
from kubereflector.testing import FakeClock, FakeControllerSource

NAMESPACES = ["a", "b"]

FAULTS = [
    ("reset_watch",),
    ("compact",),
    ("stall",),
    ("fail_watch", "410"),
    ("fail_watch", "429"),
    ("fail_watch", "500"),
    ("fail_list", "500"),
    ("error_event", "410"),
]
"""The faults both properties draw (one may add its own)."""

ERRORS: dict[str, Any] = {
    "410": lambda: ExpiredError(),
    "429": lambda: TooManyRequestsError(retry_after=2),
    "500": lambda: ApiError(500, "InternalError", "injected"),
}


def writes(names: list[str]) -> st.SearchStrategy[tuple[str, str, str, str]]:
    """Writes of the pods ``names`` in :data:`NAMESPACES`."""
    return st.tuples(
        st.sampled_from(["write", "write-missed"]),
        st.sampled_from(NAMESPACES),
        st.sampled_from(names),
        st.sampled_from(["x", "y", "z"]),
    )


def pod(namespace: str, name: str, label: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": label}},
    }


async def apply(source: FakeControllerSource, clock: FakeClock, op: tuple[Any, ...]) -> None:
    """Perform ``op`` (a write, a fault or ``("advance", seconds)``) on ``source`` and
    ``clock``. Raises ``ValueError`` for an operation of another kind."""
    kind = op[0]
    if kind in ("write", "write-missed"):
        _, namespace, name, label = op
        obj = pod(namespace, name, label)
        missed = kind == "write-missed"
        if source.get(f"{namespace}/{name}") is None:
            (source.add_drop_watch if missed else source.add)(obj)
        elif label == "z":
            (source.delete_drop_watch if missed else source.delete)(obj)
        else:
            (source.modify_drop_watch if missed else source.modify)(obj)
    elif kind == "reset_watch":
        source.reset_watch()
    elif kind == "compact":
        source.compact()
    elif kind == "stall":
        source.stall_watches()
    elif kind == "fail_watch":
        source.fail_next_watch(ERRORS[op[1]]())
    elif kind == "fail_list":
        source.fail_next_list(ERRORS[op[1]]())
    elif kind == "error_event":
        source.error_watches({"kind": "Status", "code": 410, "reason": "Expired"})
    elif kind == "advance":
        await clock.advance(op[1])
    else:
        raise ValueError(f"not an operation on the source: {op!r}")


def end_outage(source: FakeControllerSource) -> None:
    """End as a real outage ends. A real server never skips an event inside a stream;
    the missed writes stand for events lost while disconnected, which only a relist
    recovers. So the history behind the watch expires (the next watch gets a 410)
    and the watch breaks; the caller then lets fake time run past every backoff."""
    source.fail_next_watch(ExpiredError())
    source.reset_watch()
