"""``kubereflector demo``: an informer against the bundled emulator, under churn and faults.

The emulator runs in-process, seeded with pods. A SharedIndexInformer watches
every pod through the HTTP client while a churn generator creates, updates and
deletes pods, and the emulator injects faults one after another:

1. every watch is dropped (the Reflector re-watches from its last resourceVersion);
2. the watch is stalled, pods are deleted behind its back, history is compacted
   and the watch is dropped: the re-watch gets 410 Expired, the informer relists
   and learns of the deletions it missed as tombstones;
3. the next request gets 429 Too Many Requests with Retry-After, then watches drop;
4. the next request gets 500, then watches drop.

What happens is narrated from the outside: an observer (:mod:`._observer`) around
the HTTP ListerWatcher, a Backoff that reports its waits, and the
handler's tombstones. At the end the churn stops, the demo waits (with a
deadline) for the cache to catch up, compares its keys and resourceVersions
with the server's objects, and prints the verdict; the exit status is 0 when
they are equal.

A program, not a test: it runs on the real clock and may sleep briefly. The
emulator is imported only when the demo runs, so the other commands do not pay
for loading it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from .._aio.tasks import cancel_and_wait
from ..backoff import Backoff
from ..cache._relist import (
    VeryShortWatchError,
    is_expired,
    is_internal_error,
    is_too_many_requests,
)
from ..cache.keys import DeletedFinalStateUnknown, get_name, get_namespace, get_resource_version
from ..cache.listwatch import ListOptions, ListResult, WatchEvent
from ..cache.reflector import Reflector
from ..cache.shared_informer import SharedIndexInformer, wait_for_cache_sync
from ..cache.transforms import strip_managed_fields
from ..client import Client, ResourceListWatch, load_config
from ..clock import RealClock
from ..errors import ApiError
from ._context import CommandContext
from ._observer import ListWatchObserver, ObservedListWatch
from ._parser import Parser, duration_arg

if TYPE_CHECKING:
    from ..testing.apiserver import ApiServerEmulator

__all__ = ["add_parser", "run"]

NAMESPACE = "default"
CHURN_INTERVAL = 0.08
"""Seconds between churn operations (about 12 a second)."""
RECOVERY_TIMEOUT = 15.0
CATCH_UP_TIMEOUT = 10.0
FOREVER_FAULT_GAP = 3.0

Say = Callable[[str], None]


class _Narrator:
    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._clock = RealClock()
        self._t0 = self._clock.now()

    def elapsed(self) -> float:
        return self._clock.now() - self._t0

    def say(self, text: str) -> None:
        self.line(f"[{self.elapsed():4.1f}s] {text}")

    def line(self, text: str) -> None:
        self._out.write(text + "\n")
        self._out.flush()


class _Changes:
    """Wake-ups for waits on the observer's state (event-driven, no polling)."""

    def __init__(self, stop: asyncio.Event) -> None:
        self._event = asyncio.Event()
        self._stop = stop

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` holds (True), the stop event, or ``timeout`` (False)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0 or self._stop.is_set():
                return False
            waiters = {
                asyncio.ensure_future(self._event.wait()),
                asyncio.ensure_future(self._stop.wait()),
            }
            try:
                await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    await cancel_and_wait(waiter)
        return True


def _short(err: BaseException) -> str:
    if isinstance(err, ApiError):
        return f"{err.status} {err.reason}".strip()
    return str(err) or type(err).__name__


class _Observer(ListWatchObserver):
    """Narrates what passes between the Reflector and the server."""

    def __init__(self, say: Say, changes: _Changes) -> None:
        self._say = say
        self._changes = changes
        self.watches_opened = 0
        self.events_on_watch = 0
        self.syncs = 0
        self._listed = 0
        self._server_closed = False
        self._failed = False

    # full syncs ----------------------------------------------------------------------

    def list_succeeded(self, options: ListOptions, result: ListResult) -> None:
        if not options.continue_:
            self._listed = 0
        self._listed += len(result.items)
        if not result.continue_:
            self._synced(self._listed, result.resource_version, "list")

    def list_failed(self, options: ListOptions, err: Exception) -> None:
        self._say(f"list failed ({_short(err)})")

    def initial_events_ended(self, options: ListOptions, count: int, resource_version: str) -> None:
        self._synced(count, resource_version, "watch-list")

    def _synced(self, count: int, resource_version: str, how: str) -> None:
        self.syncs += 1
        if self.syncs == 1:
            self._say(f"initial {how}: {count} pods at resourceVersion {resource_version}")
        else:
            self._say(f"relisted {count} pods at resourceVersion {resource_version} ({how})")
        self._changes.notify()

    # watches -------------------------------------------------------------------------

    def watch_opening(self, options: ListOptions) -> None:
        if not self._server_closed:
            return
        self._server_closed = False
        if options.send_initial_events:
            self._say("watch dropped by the server; relisting through a watch-list")
        else:
            self._say(
                "watch dropped by the server; re-watching from resourceVersion "
                f"{options.resource_version}"
            )

    def watch_opened(self, options: ListOptions) -> None:
        self.watches_opened += 1
        self.events_on_watch = 0
        if self._failed and not options.send_initial_events:
            self._say(f"watching again from resourceVersion {options.resource_version}")
        self._failed = False
        self._changes.notify()

    def watch_event(self, options: ListOptions, event: WatchEvent) -> None:
        self.events_on_watch += 1
        if self.events_on_watch == 1:
            self._changes.notify()

    def watch_error_event(self, options: ListOptions, status: Any) -> None:
        code = status.get("code") if isinstance(status, dict) else None
        reason = status.get("reason") if isinstance(status, dict) else None
        if code == 410 or reason in ("Expired", "Gone"):
            self._say("history expired (410): relisting")
        else:
            self._say(f"the server ended the watch with an error ({code} {reason})")
        self._failed = True

    def watch_failed(self, options: ListOptions, err: Exception) -> None:
        self._failed = True
        if is_expired(err):
            self._say("history expired (410): relisting")
        elif is_too_many_requests(err):
            self._say("server said 429 Too Many Requests: backing off")
        elif is_internal_error(err):
            status = err.status if isinstance(err, ApiError) else 500
            self._say(f"server error {status}: retrying")
        else:
            self._say(f"watch failed ({_short(err)}): retrying")

    def watch_closed(self, options: ListOptions, count: int) -> None:
        self._server_closed = True


class _NarratingBackoff(Backoff):
    """The Reflector's backoff, saying how long it waits."""

    __slots__ = ("_say",)

    def __init__(self, say: Say) -> None:
        # Faster than the Reflector's default (0.8 s doubling to 30 s): the demo is short.
        super().__init__(initial=0.2, factor=2.0, cap=2.0, jitter=0.5, reset_after=3.0)
        self._say = say

    async def wait(self, at_least: float = 0.0) -> float:
        delay = max(self.next_delay(), at_least)
        why = " (the server's Retry-After)" if at_least > 0 and delay <= at_least else ""
        self._say(f"backing off {delay:.2f}s{why}")
        await self.clock.sleep(delay)
        return delay


class _Handler:
    """Counts notifications and narrates tombstones."""

    def __init__(self, say: Say) -> None:
        self._say = say
        self.notifications = 0
        self.tombstones = 0

    async def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self.notifications += 1

    async def on_update(self, old: Any, new: Any) -> None:
        self.notifications += 1

    async def on_delete(self, obj: Any) -> None:
        self.notifications += 1
        if isinstance(obj, DeletedFinalStateUnknown):
            self.tombstones += 1
            self._say(f"tombstone: {obj.key} was deleted while we were not watching")


def _demo_pod(name: str) -> dict[str, Any]:
    from ..testing.apiserver import sample_pod

    return sample_pod(name, NAMESPACE, labels={"app": "demo"})


class _Churn:
    """Creates, updates and deletes pods through the emulator's data API."""

    def __init__(self, server: ApiServerEmulator, rng: random.Random, target: int) -> None:
        self._server = server
        self._rng = rng
        self._target = max(4, target)
        self.names = {str(get_name(obj)) for obj in server.objects("pods", NAMESPACE)}
        self.created = self.updated = self.deleted = 0
        self._serial = itertools.count()

    def step(self) -> None:
        size = len(self.names)
        weights = [1.0, 3.0, 1.0]  # create, update, delete
        if size < self._target * 0.8:
            weights[0] = 3.0
        elif size > self._target * 1.2:
            weights[2] = 3.0
        if size == 0:
            weights = [1.0, 0.0, 0.0]
        operation = self._rng.choices(("create", "update", "delete"), weights)[0]
        if operation == "create":
            name = f"churn-{next(self._serial):03d}"
            self._server.create("pods", _demo_pod(name))
            self.names.add(name)
            self.created += 1
        elif operation == "update":
            name = self._rng.choice(sorted(self.names))
            patch = {"metadata": {"labels": {"churn": str(self.updated)}}}
            self._server.patch("pods", name, patch, namespace=NAMESPACE)
            self.updated += 1
        else:
            self.delete(self._rng.choice(sorted(self.names)))

    def delete(self, name: str) -> None:
        self._server.delete("pods", name, namespace=NAMESPACE)
        self.names.discard(name)
        self.deleted += 1

    def delete_some(self, count: int) -> list[str]:
        victims = self._rng.sample(sorted(self.names), min(count, len(self.names)))
        for name in victims:
            self.delete(name)
        return [f"{NAMESPACE}/{name}" for name in victims]

    async def run(self) -> None:
        while True:
            await asyncio.sleep(CHURN_INTERVAL)
            self.step()


def _diff(server: ApiServerEmulator, informer: SharedIndexInformer) -> dict[str, list[str]]:
    """What differs between the server's pods and the cache (empty lists: nothing)."""
    want = {_key(obj): get_resource_version(obj) for obj in server.objects("pods")}
    have = {_key(obj): get_resource_version(obj) for obj in informer.indexer.list()}
    return {
        "missing from the cache": sorted(want.keys() - have.keys()),
        "extra in the cache": sorted(have.keys() - want.keys()),
        "stale in the cache": sorted(k for k in want.keys() & have.keys() if want[k] != have[k]),
    }


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _key(obj: Any) -> str:
    namespace = get_namespace(obj)
    name = str(get_name(obj))
    return f"{namespace}/{name}" if namespace else name


class _Demo:
    def __init__(self, out: TextIO, stop: asyncio.Event, duration: float | None, pods: int) -> None:
        self.narrator = _Narrator(out)
        self.say = self.narrator.say
        self.stop = stop
        self.duration = duration
        self.pods = pods
        self.rng = random.Random()
        self.changes = _Changes(stop)
        self.observer = _Observer(self.say, self.changes)
        self.handler = _Handler(self.say)

    async def run(self) -> int:
        from ..testing.apiserver import ApiServerEmulator

        server = ApiServerEmulator()
        for i in range(self.pods):
            server.create("pods", _demo_pod(f"web-{i:03d}"))
        async with server:
            self.say(f"emulator listening on {server.url} with {self.pods} pods")
            async with Client(load_config(server.kubeconfig_path)) as client:
                informer = SharedIndexInformer(
                    ObservedListWatch(ResourceListWatch(client, "pods"), self.observer),
                    expected_kind="Pod",
                    backoff=_NarratingBackoff(self.say),
                )
                informer.set_transform(strip_managed_fields)
                informer.set_watch_error_handler(self._on_watch_error)
                informer.add_event_handler(self.handler)
                task = asyncio.create_task(informer.run(), name="demo informer")
                try:
                    return await self._scenario(server, informer)
                finally:
                    await cancel_and_wait(task)

    def _on_watch_error(self, reflector: Reflector, err: BaseException) -> None:
        if is_expired(err):
            return  # narrated as it arrived
        if isinstance(err, VeryShortWatchError):
            self.say("the watch closed at once without an event: relisting")
        else:
            self.say(f"list-and-watch failed ({_short(err)}): relisting")

    async def _scenario(self, server: ApiServerEmulator, informer: SharedIndexInformer) -> int:
        if not await wait_for_cache_sync(informer, timeout=RECOVERY_TIMEOUT):
            self.narrator.line("verdict: the informer never synced")
            return 1
        self.say(f"cache synced: {len(informer.indexer.list_keys())} pods")
        churn = _Churn(server, self.rng, self.pods)
        churn_task = asyncio.create_task(churn.run(), name="demo churn")
        self.say(f"churn: creating, updating and deleting pods ~{1 / CHURN_INTERVAL:.0f}/s")
        try:
            await self._faults(server, churn)
        finally:
            await cancel_and_wait(churn_task)
        self.say(
            f"churn stopped: {churn.created} created, {churn.updated} updated, "
            f"{churn.deleted} deleted"
        )
        return await self._verify(server, informer)

    async def _faults(self, server: ApiServerEmulator, churn: _Churn) -> None:
        steps: list[Callable[[], Awaitable[None]]] = [
            lambda: self._drop(server),
            lambda: self._expire(server, churn),
            lambda: self._throttle(server),
            lambda: self._server_error(server),
        ]
        start = self.narrator.elapsed()
        duration = self.duration
        if duration is None:
            for i, step in enumerate(itertools.cycle(steps)):
                if not await self._until(start + (i + 1) * FOREVER_FAULT_GAP):
                    return
                await step()
            return
        first = start + max(0.8, duration * 0.12)
        last = max(first, start + duration * 0.82)
        gap = (last - first) / (len(steps) - 1)
        for i, step in enumerate(steps):
            if not await self._until(first + i * gap):
                return
            await step()
        await self._until(start + duration * 0.92)

    async def _until(self, at: float) -> bool:
        """Wait for the informer to be watching again (a watch opened since the last
        fault, with an event on it) and for time ``at``; False when stopped."""
        if not await self.changes.until(
            lambda: self.observer.events_on_watch > 0, RECOVERY_TIMEOUT
        ):
            if self.stop.is_set():
                return False
            self.say(f"the informer did not recover within {RECOVERY_TIMEOUT:g}s")
            return False
        delay = at - self.narrator.elapsed()
        if delay > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stop.wait(), delay)
        return not self.stop.is_set()

    def _fault(self, text: str) -> None:
        self.observer.events_on_watch = 0  # wait for the next watch's events after this
        self.say(f">> fault: {text}")

    async def _drop(self, server: ApiServerEmulator) -> None:
        self._fault("the server drops every watch")
        server.drop_watches()

    async def _expire(self, server: ApiServerEmulator, churn: _Churn) -> None:
        self._fault("the watch goes silent, pods are deleted, history is compacted")
        server.stall_watches()
        victims = churn.delete_some(3)
        self.say(f"   deleted behind the watch's back: {', '.join(victims)}")
        server.compact()
        server.drop_watches()

    async def _throttle(self, server: ApiServerEmulator) -> None:
        self._fault("the next request gets 429 (Retry-After: 1s); watches drop")
        server.fail_next(1, 429, retry_after=1)
        server.drop_watches()

    async def _server_error(self, server: ApiServerEmulator) -> None:
        self._fault("the next request gets 500; watches drop")
        server.fail_next(1, 500)
        server.drop_watches()

    async def _verify(self, server: ApiServerEmulator, informer: SharedIndexInformer) -> int:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CATCH_UP_TIMEOUT
        diff = _diff(server, informer)
        while any(diff.values()) and loop.time() < deadline:
            await asyncio.sleep(0.05)
            diff = _diff(server, informer)
        stats = informer.stats()
        count = len(server.objects("pods"))
        if not any(diff.values()):
            self.say(f"cache caught up: {count} pods, resourceVersion {server.resource_version}")
        self.say(
            f"informer: {_plural(stats.events, 'watch event')}, "
            f"{_plural(self.handler.notifications, 'notification')}, "
            f"{_plural(stats.relists, 'relist')}, "
            f"{_plural(stats.watch_restarts, 'watch restart')}, "
            f"{_plural(self.handler.tombstones, 'tombstone')}"
        )
        if not any(diff.values()):
            self.narrator.line(f"verdict: consistent ({count} pods, cache == server)")
            return 0
        parts = [
            f"{len(keys)} {what} ({', '.join(keys[:5])}{', ...' if len(keys) > 5 else ''})"
            for what, keys in diff.items()
            if keys
        ]
        self.narrator.line(f"verdict: INCONSISTENT after {CATCH_UP_TIMEOUT:g}s: {'; '.join(parts)}")
        return 1


def add_parser(commands: argparse._SubParsersAction[Parser], parents: Sequence[Parser]) -> Parser:
    """Add the ``demo`` sub-command (``parents``: the ``--debug`` flag)."""
    demo = commands.add_parser(
        "demo",
        parents=parents,
        help="an informer against the emulator, under churn and injected faults",
        description=(
            "Start the emulator in-process, run an informer against it while pods are "
            "created, updated and deleted and the server drops watches, expires history "
            "and answers 429 and 500; narrate the recovery and verify that the cache "
            "equals the server's objects at the end (exit 0 when it does)."
        ),
    )
    demo.add_argument("--duration", default="20", metavar="S", help="seconds to run (20)")
    demo.add_argument("--forever", action="store_true", help="run until Ctrl-C")
    demo.add_argument("--pods", type=int, default=40, help=argparse.SUPPRESS)
    demo.set_defaults(handler=run)
    return demo


async def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    """Run the demo; returns 0 when the cache ends equal to the server's objects.

    ``--duration`` in seconds (about; the faults wait for the informer to recover);
    ``--forever``: until the stop event. The stop event ends the churn and faults
    early; the verification still runs.
    """
    duration = None if args.forever else duration_arg(args.duration, "--duration")
    return await _Demo(ctx.stdout, ctx.stop, duration, args.pods).run()
