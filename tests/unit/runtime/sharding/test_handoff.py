"""The handoff state machine, step by step: what each view makes a replica do."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from kubereflector.runtime.sharding.handoff import (
    Acquire,
    Close,
    Handoff,
    Open,
    Phase,
    Release,
    View,
)

ME, OTHER = "me", "other"


def view(
    *,
    desired: Mapping[int, str],
    holders: Mapping[int, str] | None = None,
    members: Collection[str] = (ME, OTHER),
    warm: Collection[int] = (0, 1),
    in_flight: Mapping[int, int] | None = None,
    valid: bool = True,
    stopping: bool = False,
    now: float = 0.0,
) -> View:
    return View(
        now=now,
        valid=valid,
        desired=desired,
        holders=holders or {},
        members=members,
        warm=warm,
        in_flight=in_flight or {},
        stopping=stopping,
    )


def held_by_me() -> Handoff:
    """A replica holding shard 0 (of 2)."""
    h = Handoff(ME, 2)
    assert h.plan(view(desired={0: ME, 1: OTHER})) == [Acquire(0)]
    assert h.acquired(0, won=True) == [Open(0)]
    assert h.phase(0) is Phase.HELD
    return h


def test_a_free_warm_desired_shard_is_taken_then_opened() -> None:
    h = Handoff(ME, 2)
    assert h.plan(view(desired={0: ME, 1: OTHER})) == [Acquire(0)]
    assert h.phase(0) is Phase.ACQUIRING
    assert h.plan(view(desired={0: ME, 1: OTHER})) == []  # the write is under way
    assert h.acquired(0, won=True) == [Open(0)]
    assert h.held() == {0}
    assert h.owned() == {0}


def test_a_lost_race_goes_back_to_idle() -> None:
    h = Handoff(ME, 1)
    assert h.plan(view(desired={0: ME})) == [Acquire(0)]
    assert h.acquired(0, won=False) == []
    assert h.phase(0) is Phase.IDLE
    assert h.idle()


def test_a_cold_shard_is_not_taken_until_the_caches_hold_it() -> None:
    h = Handoff(ME, 1)
    assert h.plan(view(desired={0: ME}, warm=())) == []
    assert h.plan(view(desired={0: ME}, warm=(0,))) == [Acquire(0)]


def test_a_shard_held_by_a_live_member_is_waited_for() -> None:
    h = Handoff(ME, 1)
    assert h.plan(view(desired={0: ME}, holders={0: OTHER})) == []
    # ... until it frees it, or stops being a member (its Lease expired)
    assert h.plan(view(desired={0: ME}, holders={0: ""})) == [Acquire(0)]
    h = Handoff(ME, 1)
    assert h.plan(view(desired={0: ME}, holders={0: OTHER}, members=(ME,))) == [Acquire(0)]


def test_giving_up_drains_before_it_frees() -> None:
    h = held_by_me()
    mine = {0: ME}
    # the assignment moves shard 0 to OTHER: stop handing out, keep the Lease
    assert h.plan(view(desired={0: OTHER, 1: OTHER}, holders=mine, in_flight={0: 2})) == [
        Close(0, reason="rebalance")
    ]
    assert h.phase(0) is Phase.DRAINING
    assert h.held() == set()
    assert h.owned() == {0}
    # reconciles still in flight: nothing
    assert h.plan(view(desired={0: OTHER, 1: OTHER}, holders=mine, in_flight={0: 1})) == []
    # the last one ended: free the Lease
    assert h.plan(view(desired={0: OTHER, 1: OTHER}, holders=mine)) == [Release(0)]
    assert h.phase(0) is Phase.RELEASING
    h.released(0)
    assert h.idle()


def test_a_drain_cancels_what_is_in_flight_after_its_timeout_once() -> None:
    h = Handoff(ME, 1, drain_timeout=30.0)
    h.plan(view(desired={0: ME}))
    h.acquired(0, won=True)
    mine = {0: ME}
    assert h.plan(view(desired={0: OTHER}, holders=mine, in_flight={0: 1}, now=100.0)) == [
        Close(0, reason="rebalance")
    ]
    assert h.plan(view(desired={0: OTHER}, holders=mine, in_flight={0: 1}, now=129.0)) == []
    assert h.plan(view(desired={0: OTHER}, holders=mine, in_flight={0: 1}, now=130.0)) == [
        Close(0, cancel=True, reason="drain timeout")
    ]
    assert h.plan(view(desired={0: OTHER}, holders=mine, in_flight={0: 1}, now=200.0)) == []
    assert h.plan(view(desired={0: OTHER}, holders=mine, now=201.0)) == [Release(0)]


def test_a_drain_reverses_when_the_shard_is_desired_here_again() -> None:
    h = held_by_me()
    mine = {0: ME}
    h.plan(view(desired={0: OTHER, 1: OTHER}, holders=mine, in_flight={0: 1}))
    assert h.phase(0) is Phase.DRAINING
    assert h.plan(view(desired={0: ME, 1: OTHER}, holders=mine, in_flight={0: 1})) == [Open(0)]
    assert h.phase(0) is Phase.HELD


def test_a_lapsed_membership_drops_everything_at_once_without_a_write() -> None:
    h = held_by_me()
    actions = h.plan(view(desired={0: ME, 1: OTHER}, holders={0: ME}, valid=False))
    assert actions == [Close(0, cancel=True, reason="lost")]
    assert h.idle()
    # draining shards too
    h = held_by_me()
    h.plan(view(desired={1: ME, 0: OTHER}, holders={0: ME}, in_flight={0: 1}))
    assert h.plan(view(desired={}, holders={0: ME}, valid=False, in_flight={0: 1})) == [
        Close(0, cancel=True, reason="lost")
    ]


def test_a_lease_that_names_someone_else_is_given_up_at_once() -> None:
    h = held_by_me()
    assert h.plan(view(desired={0: ME, 1: OTHER}, holders={0: OTHER})) == [
        Close(0, cancel=True, reason="taken")
    ]
    assert h.idle()


def test_a_lease_still_naming_an_idle_replica_is_freed() -> None:
    """After a lapse (or a restart under the same identity) the Lease may name this
    replica though it holds nothing: it frees it, or the new owner waits for ever."""
    h = Handoff(ME, 2)
    assert h.plan(view(desired={0: OTHER, 1: OTHER}, holders={0: ME})) == [Release(0)]
    h.released(0)
    # desired here after all: taken back with a write (a compare-and-swap), not assumed
    h = Handoff(ME, 2)
    assert h.plan(view(desired={0: ME, 1: OTHER}, holders={0: ME})) == [Acquire(0)]


def test_stopping_hands_every_shard_back() -> None:
    h = held_by_me()
    assert h.plan(view(desired={0: ME, 1: OTHER}, holders={0: ME}, stopping=True)) == [
        Close(0, reason="shutdown")
    ]
    assert h.plan(view(desired={0: ME, 1: OTHER}, holders={0: ME}, stopping=True)) == [Release(0)]
    h.released(0)
    assert h.idle()
    # and takes nothing while stopping
    assert h.plan(view(desired={0: ME, 1: ME}, stopping=True)) == []


def test_no_shard_is_taken_while_the_membership_is_invalid() -> None:
    h = Handoff(ME, 2)
    assert h.plan(view(desired={0: ME, 1: ME}, valid=False)) == []


def test_write_outcomes_in_the_wrong_phase_are_ignored() -> None:
    h = Handoff(ME, 1)
    assert h.acquired(0, won=True) == []
    h.released(0)
    assert h.idle()
