"""LeaderElector on an in-memory lock and a FakeClock: client-go's transitions.

``FakeLeaseServer`` keeps one record with a resourceVersion and answers each
candidate's ``FakeLock`` as the API server answers a LeaseLock: 404 before the
record exists, 409 for an update based on a stale read, and injected failures.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubereflector import AlreadyExistsError, ApiError, NotFoundError
from kubereflector.leaderelection import LeaderElectionRecord, LeaderElector
from kubereflector.testing import FakeClock, settle

pytestmark = pytest.mark.asyncio


class FakeLeaseServer:
    def __init__(self) -> None:
        self.record: LeaderElectionRecord | None = None
        self.rv = 0
        self.writes: list[LeaderElectionRecord] = []
        self.fail_writes_of: set[str] = set()
        self.hang_writes_of: set[str] = set()
        self.hang_reads_of: set[str] = set()
        self.hang_next_write_of: set[str] = set()
        """The next write of these candidates hangs for ever (a dead connection)."""
        self.hold_answers_of: dict[str, asyncio.Event] = {}
        """Writes of these candidates are applied at once; the answer waits for the event."""
        self.created_after_read: LeaderElectionRecord | None = None
        """Written by a rival right after the next read that finds no record (two
        candidates starting together)."""

    def write(self, record: LeaderElectionRecord) -> None:
        self.record = record
        self.rv += 1
        self.writes.append(record)


class FakeLock:
    def __init__(self, server: FakeLeaseServer, identity: str) -> None:
        self.server = server
        self._identity = identity
        self.read_rv: int | None = None
        self.calls: list[str] = []

    @property
    def identity(self) -> str:
        return self._identity

    def describe(self) -> str:
        return "ns/lease"

    async def get(self) -> LeaderElectionRecord:
        self.calls.append("get")
        if self._identity in self.server.hang_reads_of:
            await asyncio.Event().wait()
        if self.server.record is None:
            rival, self.server.created_after_read = self.server.created_after_read, None
            if rival is not None:
                self.server.write(rival)
            raise NotFoundError(404, "NotFound", "leases.coordination.k8s.io not found")
        self.read_rv = self.server.rv
        return self.server.record

    async def create(self, record: LeaderElectionRecord) -> None:
        self.calls.append("create")
        if self._identity in self.server.fail_writes_of:
            raise ConnectionResetError("injected")
        if self.server.record is not None:
            raise AlreadyExistsError(409, "AlreadyExists", "already exists")
        self.server.write(record)
        self.read_rv = self.server.rv
        await self._answer()

    async def _answer(self) -> None:
        held = self.server.hold_answers_of.get(self._identity)
        if held is not None:
            await held.wait()

    async def update(self, record: LeaderElectionRecord) -> None:
        self.calls.append("update")
        if self._identity in self.server.hang_next_write_of:
            self.server.hang_next_write_of.discard(self._identity)
            await asyncio.Event().wait()
        if self._identity in self.server.hang_writes_of:
            await asyncio.Event().wait()
        if self._identity in self.server.fail_writes_of:
            raise ConnectionResetError("injected")
        if self.read_rv != self.server.rv:
            raise ApiError(409, "Conflict", "the object has been modified")
        self.server.write(record)
        self.read_rv = self.server.rv
        await self._answer()


class Metrics:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on(self, name: str) -> None:
        self.events.append(("on", name))

    def off(self, name: str) -> None:
        self.events.append(("off", name))

    def slowpath_exercised(self, name: str) -> None:
        self.events.append(("slowpath", name))


class Candidate:
    """An elector with its callbacks recorded."""

    def __init__(
        self, server: FakeLeaseServer, identity: str, clock: FakeClock, **kwargs: Any
    ) -> None:
        self.lock = FakeLock(server, identity)
        self.started = 0
        self.stopped = 0
        self.new_leaders: list[str] = []
        self.work_cancelled = False
        self.metrics = Metrics()
        self.elector = LeaderElector(
            self.lock,
            clock=clock,
            random=lambda: 0.0,
            on_started_leading=self._lead,
            on_stopped_leading=self._stop,
            on_new_leader=self.new_leaders.append,
            metrics=self.metrics,
            **kwargs,
        )
        self.task: asyncio.Task[None] | None = None

    async def _lead(self) -> None:
        self.started += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.work_cancelled = True
            raise

    def _stop(self) -> None:
        self.stopped += 1

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run())

    async def cancel(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def server() -> FakeLeaseServer:
    return FakeLeaseServer()


@contextlib.asynccontextmanager
async def candidates(*cands: Candidate) -> AsyncIterator[None]:
    try:
        for c in cands:
            c.start()
            await settle()
        yield
    finally:
        for c in cands:
            if c.task is not None and not c.task.done():
                await c.cancel()


async def test_first_candidate_creates_the_lease_and_leads(
    clock: FakeClock, server: FakeLeaseServer
) -> None:
    a = Candidate(server, "a", clock)
    async with candidates(a):
        assert a.elector.is_leader()
        assert a.started == 1
        # As client-go, the renew loop starts with an immediate renewal.
        assert a.lock.calls == ["get", "create", "update"]
        assert server.record is not None
        assert server.record.holder_identity == "a"
        assert server.record.lease_duration_seconds == 15
        assert server.record.leader_transitions == 0
        assert a.new_leaders == ["a"]
        assert a.metrics.events == [("off", "ns/lease"), ("on", "ns/lease")]
        # The leader renews every retry period on the fast path (no read).
        await clock.advance(2)
        assert a.lock.calls == ["get", "create", "update", "update"]
        assert server.record.acquire_time == server.writes[0].acquire_time
        await clock.advance(60)
        assert a.elector.is_leader()
        assert len(server.writes) == 2 + 31
    assert a.work_cancelled
    assert a.stopped == 1


async def test_standby_waits_a_full_lease_duration_after_the_last_change(
    clock: FakeClock, server: FakeLeaseServer
) -> None:
    a = Candidate(server, "a", clock)
    b = Candidate(server, "b", clock)
    async with candidates(a, b):
        assert a.elector.is_leader()
        assert not b.elector.is_leader()
        assert b.new_leaders == ["a"]
        assert b.elector.get_leader() == "a"
        await clock.advance(30)  # a keeps renewing: b never takes over
        assert not b.elector.is_leader()
        assert b.started == 0
        # a dies without releasing at t=31; its last renewal was at t=30, which b
        # observes at its next try (t=30 or t=32) and counts a lease duration from.
        await clock.advance(1)
        await a.cancel()
        await clock.advance(13.9)  # t=44.9 < 30 + 15
        assert not b.elector.is_leader()
        await clock.advance(4.1)  # t=49: b's first try after 32 + 15
        assert b.elector.is_leader()
        assert b.started == 1
        assert server.record is not None
        assert server.record.holder_identity == "b"
        assert server.record.leader_transitions == 1
        assert b.new_leaders == ["a", "b"]


async def test_expiry_is_judged_by_local_observation_not_record_times(
    clock: FakeClock, server: FakeLeaseServer
) -> None:
    """A holder whose clock is years off still holds the lease while it renews,
    and a record stamped in the future does not keep a dead holder in place."""
    server.write(
        LeaderElectionRecord(
            holder_identity="skewed",
            lease_duration_seconds=15,
            acquire_time="2001-01-01T00:00:00.000000Z",
            renew_time="2001-01-01T00:00:00.000000Z",
        )
    )
    b = Candidate(server, "b", clock)
    async with candidates(b):
        for second in range(1, 40):
            # The skewed holder renews (with stale timestamps) every second.
            server.write(
                LeaderElectionRecord(
                    "skewed", 15, "2001-01-01T00:00:00.000000Z", f"2001-01-01T00:00:{second:02}Z"
                )
            )
            await clock.advance(1)
        assert not b.elector.is_leader()
        # It stops renewing, its last write claiming a renewal far in the future.
        server.write(
            LeaderElectionRecord("skewed", 15, "2099-01-01T00:00:00Z", "2099-01-01T00:00:00Z")
        )
        await clock.advance(14)
        assert not b.elector.is_leader()
        await clock.advance(4)
        assert b.elector.is_leader()


async def test_release_on_cancel_hands_over_within_one_retry_period(
    clock: FakeClock, server: FakeLeaseServer
) -> None:
    a = Candidate(server, "a", clock, release_on_cancel=True)
    b = Candidate(server, "b", clock)
    async with candidates(a, b):
        await clock.advance(5)
        await a.cancel()
        assert a.work_cancelled
        assert a.stopped == 1
        assert server.record is not None
        assert server.record.holder_identity == ""
        assert server.record.lease_duration_seconds == 1
        assert a.metrics.events[-1] == ("off", "ns/lease")
        await clock.advance(2)  # b's next retry, long before a lease duration
        assert b.elector.is_leader()
        assert server.record.leader_transitions == 1


async def test_lost_renewal_stops_leading_after_the_renew_deadline(
    clock: FakeClock, server: FakeLeaseServer
) -> None:
    a = Candidate(server, "a", clock)
    async with candidates(a):
        await clock.advance(2)
        assert a.elector.is_leader()
        server.fail_writes_of.add("a")  # the API server stops accepting a's writes
        await clock.advance(11.9)  # renewal started at t=4; deadline t=14
        assert a.task is not None
        assert not a.task.done()
        assert not a.work_cancelled
        assert a.elector.is_leader()
        await clock.advance(0.2)
        assert a.task.done()
        assert a.task.exception() is None
        assert a.work_cancelled
        assert a.stopped == 1
        assert a.metrics.events[-1] == ("off", "ns/lease")


async def test_a_renewal_that_hangs_counts_against_the_deadline(
    clock: FakeClock, server: FakeLeaseServer
) -> None:
    a = Candidate(server, "a", clock)
    async with candidates(a):
        server.hang_writes_of.add("a")
        await clock.advance(2 + 10 + 0.1)
        assert a.task is not None
        assert a.task.done()
        assert a.work_cancelled


async def test_a_renewal_stuck_on_a_dead_connection_is_retried_in_time(
    clock: FakeClock, server: FakeLeaseServer
) -> None:
    """Each request is given up after renew_deadline / 2 (client-go's leader-election
    client timeout): the renewal at t=2 hangs, is given up at t=7, and the retry
    at t=9 keeps the lease (the deadline is t=12)."""
    a = Candidate(server, "a", clock)
    async with candidates(a):
        server.hang_next_write_of.add("a")
        for _ in range(40):
            await clock.advance(0.5)
        assert a.task is not None
        assert not a.task.done()
        assert a.elector.is_leader()
        assert not a.work_cancelled
        assert a.lock.calls.count("update") >= 3  # the stuck one, the retry, and on


async def test_a_renewal_answered_late_cannot_stretch_leadership_into_the_next(
    clock: FakeClock, server: FakeLeaseServer
) -> None:
    """The server applies a's renewal at t=2, but its answer comes only at t=9
    (a partition that heals); a's writes then fail. b saw the renewed record at
    t=2 and may take over at 2 + 15 = 17: a must have stopped leading by then
    (client-go's deadline, 10 s from the round after the late answer, would be
    t=21)."""
    a = Candidate(server, "a", clock)
    b = Candidate(server, "b", clock)
    async with candidates(a, b):
        assert a.elector.is_leader()
        held = server.hold_answers_of["a"] = asyncio.Event()
        await clock.advance(2)  # a renews: applied now, answered at t=9
        await clock.advance(7)
        server.fail_writes_of.add("a")
        held.set()
        await settle()
        assert a.elector.is_leader()  # the late answer said yes
        a_stopped_at = b_started_at = None
        while b_started_at is None:
            await clock.advance(0.5)
            assert a.task is not None
            if a_stopped_at is None and a.task.done():
                a_stopped_at = clock.now()
            if b.started:
                b_started_at = clock.now()
        assert a_stopped_at is not None
        assert a.work_cancelled
        assert a_stopped_at < b_started_at
        assert b_started_at >= 2 + 15


async def test_a_lock_taken_with_an_answer_too_late_is_not_believed(
    clock: FakeClock, server: FakeLeaseServer
) -> None:
    """a creates the lease at t=0, and then its network holds everything: the
    answer, and its next requests (unapplied). b takes over at t=15 (the lease
    unchanged for its duration); at t=20 the answer "created" would reach a.
    The try was given up at the renew deadline: a never leads."""
    held = server.hold_answers_of["a"] = asyncio.Event()
    a = Candidate(server, "a", clock)
    b = Candidate(server, "b", clock)
    async with candidates(a, b):
        assert server.record is not None
        assert server.record.holder_identity == "a"
        server.hang_reads_of.add("a")
        server.hang_writes_of.add("a")
        for _ in range(40):
            await clock.advance(0.5)
        assert b.started == 1
        held.set()  # the network heals
        server.hang_reads_of.clear()
        server.hang_writes_of.clear()
        for _ in range(20):
            await clock.advance(0.5)
        assert a.started == 0
        assert not a.elector.is_leader()
        assert a.elector.get_leader() == "b"
        assert b.elector.is_leader()


async def test_conflicting_update_takes_the_slow_path_and_loses(
    clock: FakeClock, server: FakeLeaseServer
) -> None:
    a = Candidate(server, "a", clock)
    async with candidates(a):
        await clock.advance(2)
        # Someone else writes the lease (an operator forcing a handover).
        server.write(LeaderElectionRecord("intruder", 15, "t0", "t0", 7))
        await clock.advance(2)
        # The fast-path update hit 409, the slow path read the intruder's record.
        assert a.lock.calls[-2:] == ["update", "get"]
        assert a.elector.get_leader() == "intruder"
        assert not a.elector.is_leader()
        await clock.advance(10)
        assert a.task is not None
        assert a.task.done()
        assert a.work_cancelled
        assert a.new_leaders == ["a", "intruder"]


async def test_slow_path_renewal_after_a_stale_read(
    clock: FakeClock, server: FakeLeaseServer
) -> None:
    """A fast-path update that fails (stale resourceVersion) but finds the lease
    still ours renews through the slow path and reports it."""
    a = Candidate(server, "a", clock)
    async with candidates(a):
        server.rv += 1  # the lease changed under a (say, a label was added)
        await clock.advance(2)
        assert a.elector.is_leader()
        assert a.lock.calls[-3:] == ["update", "get", "update"]
        assert ("slowpath", "ns/lease") in a.metrics.events
        assert server.record is not None
        assert server.record.leader_transitions == 0


async def test_racing_candidates_exactly_one_wins(
    clock: FakeClock, server: FakeLeaseServer
) -> None:
    cands = [Candidate(server, name, clock) for name in "abcd"]
    for c in cands:
        c.start()
    try:
        await settle()
        await clock.advance(20)
        assert sum(c.elector.is_leader() for c in cands) == 1
        assert sum(c.started for c in cands) == 1
        leader = next(c for c in cands if c.elector.is_leader())
        assert all(c.elector.get_leader() == leader.lock.identity for c in cands)
    finally:
        for c in cands:
            await c.cancel()


async def test_a_create_that_loses_the_race_is_no_error(
    clock: FakeClock, server: FakeLeaseServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Two candidates starting together both find no Lease; the second create is
    told AlreadyExists: a lost race, said at INFO (as a failed update is), and the
    next try reads the winner's record. Any other failure to create is an error."""
    caplog.set_level(logging.INFO, logger="kubereflector.leaderelection")
    server.created_after_read = LeaderElectionRecord("b", 15, "t0", "t0")
    a = Candidate(server, "a", clock)
    async with candidates(a):
        assert a.lock.calls == ["get", "create"]
        assert not a.elector.is_leader()
        await clock.advance(2)  # one retry period
        assert a.lock.calls == ["get", "create", "get"]
        assert a.elector.get_leader() == "b"
        assert not a.elector.is_leader()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert "a: lock ns/lease was created by another candidate first" in caplog.messages

    caplog.clear()
    other = FakeLeaseServer()
    other.fail_writes_of.add("c")
    c = Candidate(other, "c", clock)
    async with candidates(c):
        assert c.lock.calls == ["get", "create"]
        assert not c.elector.is_leader()
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == ["c: could not create lock ns/lease: injected"]


async def test_check_reports_a_stuck_leader(clock: FakeClock, server: FakeLeaseServer) -> None:
    a = Candidate(server, "a", clock)
    async with candidates(a):
        assert a.elector.check()
    # Not running any more but still believing it leads (nothing released it).
    assert a.elector.is_leader()
    await clock.advance(16)
    assert not a.elector.check()
    assert a.elector.check(max_tolerable_expired_lease=5)


async def test_run_twice_at_once_is_refused(clock: FakeClock, server: FakeLeaseServer) -> None:
    a = Candidate(server, "a", clock)
    async with candidates(a):
        with pytest.raises(RuntimeError, match="already running"):
            await a.elector.run()


async def test_settings_are_validated(server: FakeLeaseServer) -> None:
    lock = FakeLock(server, "a")
    with pytest.raises(ValueError, match="greater than renew_deadline"):
        LeaderElector(lock, lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match=r"retry_period \* 1.2"):
        LeaderElector(lock, renew_deadline=2.4, retry_period=2)
    with pytest.raises(ValueError, match="at least 1 second"):
        LeaderElector(lock, lease_duration=0.5, renew_deadline=0.2, retry_period=0.1)
    with pytest.raises(ValueError, match="identity is empty"):
        LeaderElector(FakeLock(server, ""))
    with pytest.raises(TypeError, match="ResourceLock"):
        LeaderElector(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_new_leader"):
        LeaderElector(lock, on_new_leader="x")  # type: ignore[arg-type]


async def test_failing_callbacks_are_logged_not_raised(
    clock: FakeClock, server: FakeLeaseServer, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(*_args: Any) -> None:
        raise RuntimeError("callback failed")

    elector = LeaderElector(
        FakeLock(server, "a"),
        clock=clock,
        on_started_leading=boom,
        on_new_leader=boom,
        on_stopped_leading=boom,
    )
    task = asyncio.create_task(elector.run())
    await settle()
    assert elector.is_leader()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    failed = [r.getMessage() for r in caplog.records if r.exc_info]
    assert [m.split(": ")[1] for m in failed] == [
        "on_new_leader failed",
        "on_started_leading failed",
        "on_stopped_leading failed",
    ]
