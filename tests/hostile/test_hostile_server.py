"""An informer against a server that misbehaves: it keeps running, says what was wrong,
converges once the server behaves again, and never shows the client's token.

Each case runs a SharedIndexInformer (in both object modes) over HTTP against
:mod:`hostile_server`:
the cache syncs, one fault is queued (a list fault is reached through an
ERROR 410 event that makes the Reflector relist), the open watch is ended so
that the fault is met, the server's pods change meanwhile, and the loop is
driven (real loopback I/O, timers on a FakeClock) until the cache equals the
server's pods. Then: the informer is still running; the error (handed to the
watch error handler, or logged) is the specific one; handlers saw no delete
the server did not make; the token appears in no log record (every record of
every level, formatted with its traceback) and in no error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hostile_server import (
    NAMESPACE,
    Fault,
    HostileServer,
    echo_error_event,
    echo_error_page,
    echo_status_line,
    event_line,
    list_answer,
    list_bytes,
    list_oversized,
    list_truncated,
    running,
    status_body,
    watch_oversized_line,
    watch_silent,
    watch_then,
    watch_trickle,
)

from kubereflector import (
    Backoff,
    DeletedFinalStateUnknown,
    ObjectMode,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    default_watch_error_handler,
)
from kubereflector.cache.reflector import Reflector
from kubereflector.client import Client, ClientConfig, ResourceInfo, ResourceListWatch, StaticAuth
from kubereflector.testing import FakeClock, settle

pytestmark = pytest.mark.asyncio

TOKEN = "hostile-test-token-" + "Zm9vYmFy" * 12
PODS = ResourceInfo("", "v1", "pods", "Pod", namespaced=True)
MAX_EVENT_BYTES = 64 * 1024
MAX_BODY_BYTES = 256 * 1024


@dataclass
class Case:
    """A fault on the next list (reached by a relist) or the next watch, and the
    error it must produce (a regex, searched in the errors and the log lines)."""

    faults: list[Fault]
    expected: str | None
    """None: the fault is not an error (a slow stream), only convergence counts."""
    on_list: bool = False


EXPIRED = status_body(410, "Expired", "too old resource version")
GOOD = {"kind": "Pod", "metadata": {"name": "x", "namespace": NAMESPACE, "resourceVersion": "1"}}


def odd_rv(rv: Any) -> dict[str, Any]:
    """Pod ``b`` (which the server has) with a resourceVersion that is not a string."""
    return {"kind": "Pod", "metadata": {"name": "b", "namespace": NAMESPACE, "resourceVersion": rv}}


CASES: dict[str, Case] = {
    # -- list answers that are not lists -----------------------------------------------
    "list: a Failure Status with 200": Case(
        [list_answer(200, status_body(500, "InternalError", "etcd is unhappy"))],
        r"500 InternalError: etcd is unhappy \(http://127\.0\.0\.1:\d+/api/v1/namespaces/",
        on_list=True,
    ),
    "list: an object that is not a list": Case(
        [list_answer(200, GOOD)], r"the list response is a 'Pod', not a list", on_list=True
    ),
    "list: no items": Case(
        [list_answer(200, {"kind": "PodList", "metadata": {"resourceVersion": "5"}})],
        r"the list response has no items array",
        on_list=True,
    ),
    "list: items that are not objects": Case(
        [list_answer(200, {"kind": "PodList", "items": ["a", 1]})],
        r"item 0 of the list response is str, not an object",
        on_list=True,
    ),
    "list: malformed JSON": Case(
        [list_bytes(b'{"kind": "PodList", "items": [{"metadata": ')],
        r"could not decode the list response \(\d+ bytes\)",
        on_list=True,
    ),
    "list: deeply nested JSON": Case(
        [list_bytes(b'{"kind": "PodList", "items": [' + b"[" * 50_000 + b"]" * 50_000 + b"]}")],
        r"could not decode the list response .*recursion",
        on_list=True,
    ),
    "list: a resourceVersion that is not a string": Case(
        [list_answer(200, {"kind": "PodList", "metadata": {"resourceVersion": 7}, "items": []})],
        r"Expected `str`, got `int` - at `\$\.metadata\.resourceVersion`",
        on_list=True,
    ),
    "list: truncated": Case(
        [list_truncated],
        r"truncated response body: Response payload is not completed",
        on_list=True,
    ),
    "list: over the size limit": Case(
        [list_oversized],
        rf"response body longer than the limit of {MAX_BODY_BYTES} bytes",
        on_list=True,
    ),
    "list: an error page echoing the credentials": Case(
        [echo_error_page], r"502 Bad Gateway: .*[Aa]uthorization: <redacted>", on_list=True
    ),
    "list: not HTTP, echoing the credentials": Case(
        [echo_status_line], r"the answer is not valid HTTP: .*<redacted>", on_list=True
    ),
    # -- watch streams -----------------------------------------------------------------
    "watch: a malformed line": Case(
        [watch_then(b'{"type": "ADDED", "object": {"kind": "Po\n')],
        r"malformed watch event at byte \d+ of the stream",
    ),
    "watch: a deeply nested line": Case(
        [watch_then(b'{"type": "ADDED", "object": ' + b"[" * 20_000 + b"]" * 20_000 + b"}\n")],
        r"malformed watch event .*recursion",
    ),
    "watch: a line over the size limit": Case(
        [watch_oversized_line],
        rf"watch event at byte \d+ of the stream is longer than the limit of {MAX_EVENT_BYTES}",
    ),
    "watch: cut off inside a line": Case(
        [watch_then(b'{"type": "MODIFIED", "object": {"kind": "Pod", "metad')],
        r"truncated watch stream: it ended inside a line of \d+ bytes",
    ),
    "watch: an ERROR event that is not a Status": Case(
        [watch_then(event_line("ERROR", GOOD))],
        r"a watch ERROR event carried a 'Pod' instead of a Status",
    ),
    "watch: a Status instead of events": Case(
        [watch_then(json.dumps(EXPIRED).encode() + b"\n")],
        r"410 Expired: too old resource version \(http://",
    ),
    "watch: an ERROR event echoing the credentials": Case(
        [echo_error_event(500)], r"500 InternalError: upstream rejected <redacted>"
    ),
    "watch: an error page echoing the credentials": Case(
        [echo_error_page], r"502 Bad Gateway: .*[Aa]uthorization: <redacted>"
    ),
    "watch: not HTTP, echoing the credentials": Case(
        [echo_status_line], r"the answer is not valid HTTP: .*<redacted>"
    ),
    "watch: events of an unknown type or without metadata": Case(
        [
            watch_then(
                event_line("WEIRD", GOOD),
                event_line("ADDED", {"kind": "Pod"}),
                event_line("ADDED", {"kind": "ConfigMap", "metadata": {"name": "cm"}}),
            )
        ],
        r"unknown watch event type 'WEIRD' from http://127\.0\.0\.1:\d+/api/v1/"
        r"namespaces/hostile/pods; skipped",
    ),
    "watch: a resourceVersion that is an object": Case(
        [watch_then(event_line("MODIFIED", odd_rv({"rv": 9})))],
        # In compact mode the object's metadata is read-only: a ReadOnlyDict.
        r"the resourceVersion of a MODIFIED from http://\S+/pods is not a string "
        r"\((ReadOnly)?[Dd]ict",
    ),
    "watch: a resourceVersion that is a number": Case(
        [watch_then(event_line("MODIFIED", odd_rv(10**6)))],
        r"the resourceVersion of a MODIFIED from http://\S+/pods is not a string \(int",
    ),
    "watch: silent": Case(
        [watch_silent],
        r"the watch of http://\S+/pods was silent for at least 90 s .*; watching again",
    ),
    "watch: slow (one byte per write)": Case([watch_trickle], None),
}


# -- the harness ----------------------------------------------------------------------------


class Records(logging.Handler):
    """Every record of the ``kubereflector`` loggers, of every level."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def texts(self) -> list[str]:
        return [self.format(record) for record in self.records]  # tracebacks included


@contextlib.contextmanager
def capture_logs() -> Any:
    logger = logging.getLogger("kubereflector")
    handler = Records()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@dataclass
class Run:
    server: HostileServer
    informer: SharedIndexInformer
    clock: FakeClock
    task: asyncio.Task[None] | None = None
    errors: list[BaseException] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)

    def cache(self) -> dict[str, str]:
        return {
            f"{obj['metadata']['namespace']}/{obj['metadata']['name']}": obj["metadata"][
                "resourceVersion"
            ]
            for obj in self.informer.indexer.list()
        }

    async def converge(self) -> None:
        """Drive real I/O and the fake clock until the cache holds the server's pods."""
        assert self.task is not None
        while self.cache() != self.server.keys():
            assert not self.task.done(), "the informer stopped"
            await settle(20)
            if self.cache() == self.server.keys():
                break
            deadline = self.clock.next_deadline()
            if deadline is not None:
                await self.clock.advance(max(0.0, deadline - self.clock.now()))


@contextlib.asynccontextmanager
async def informer_run(mode: ObjectMode) -> AsyncIterator[Run]:
    async with running() as server:
        for name in ("a", "b", "c"):
            server.put(name, n=0)
        clock = FakeClock()
        config = ClientConfig(server=server.url, auth=StaticAuth(token=TOKEN))
        async with Client(
            config, max_event_bytes=MAX_EVENT_BYTES, max_body_bytes=MAX_BODY_BYTES
        ) as client:
            informer = SharedIndexInformer(
                ResourceListWatch(client, PODS, namespace=NAMESPACE),
                expected_kind="Pod",
                clock=clock,
                backoff=Backoff(clock=clock, random=lambda: 0.0),
                object_mode=mode,
            )
            run = Run(server, informer, clock)

            def on_error(reflector: Reflector, err: BaseException) -> None:
                run.errors.append(err)
                default_watch_error_handler(reflector, err)

            informer.set_watch_error_handler(on_error)

            async def on_delete(obj: Any) -> None:
                key = obj.key if isinstance(obj, DeletedFinalStateUnknown) else obj["metadata"]
                run.deletes.append(key.split("/")[-1] if isinstance(key, str) else key["name"])

            informer.add_event_handler(ResourceEventHandlerFuncs(on_delete=on_delete))
            run.task = task = asyncio.create_task(informer.run())
            try:
                await run.converge()
                yield run
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


def shown(err: BaseException) -> str:
    """Everything an error shows: str and repr of it and of every exception it chains."""
    texts = []
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        texts += [str(current), repr(current), repr(current.args)]
        current = current.__cause__ or current.__context__
    return "\n".join(texts)


@pytest.mark.parametrize("mode", ["dict", "compact"])
@pytest.mark.parametrize("name", list(CASES))
async def test_an_informer_survives_a_hostile_server(name: str, mode: ObjectMode) -> None:
    case = CASES[name]
    with capture_logs() as logs:
        async with informer_run(mode) as run:
            server = run.server
            assert run.cache() == server.keys()
            if case.on_list:
                # An ERROR 410 on the next watch makes the Reflector relist: the fault answers.
                server.fail_next_watch(watch_then(event_line("ERROR", EXPIRED), close=False))
                server.fail_next_list(*case.faults)
            else:
                server.fail_next_watch(*case.faults)
            lists_before = sum(not r.is_watch for r in server.requests)
            server.close_watches()
            server.put("d", n=1)
            server.put("b", n=2)
            server.delete("a")
            await run.converge()
            if case.on_list:
                assert sum(not r.is_watch for r in server.requests) >= lists_before + 2
            # It keeps running, and it keeps converging.
            server.put("e", n=3)
            server.delete("c")
            await run.converge()
            assert run.task is not None
            assert not run.task.done()
            # Only the server's own deletes reached the handlers: nothing was wiped.
            while len(run.deletes) < 2:
                await settle(5)
            await settle()
            assert sorted(run.deletes) == ["a", "c"]
        errors = [shown(err) for err in run.errors]
        texts = logs.texts()
    if case.expected is not None:
        found = [t for t in errors + texts if re.search(case.expected, t)]
        assert found, f"no {case.expected!r} in errors {errors} or log lines {texts}"
    pieces = {TOKEN[i : i + 16] for i in range(len(TOKEN) - 15)}
    for text in errors + texts:
        assert not [piece for piece in pieces if piece in text]  # not even a piece of it
    assert server.requests, "the server saw no request"
    assert all(r.authorization == f"Bearer {TOKEN}" for r in server.requests)
