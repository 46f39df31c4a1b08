"""The handoff of virtual shards between replicas, as an explicit state machine (pure).

One :class:`Handoff` per replica holds the :class:`Phase` of every shard *here*
and turns what the replica sees (a :class:`View`: its membership, the desired
assignment, the Leases' holders, which shards its caches hold, the reconciles in
flight) into :data:`Action` s for the coordinator to carry out: write a Lease,
open or close the gate that hands out a shard's keys. The coordinator reports the
writes' outcomes back (:meth:`Handoff.acquired`, :meth:`Handoff.released`). No
I/O, no clock: every step can be driven and checked on its own.

::

    IDLE ──Acquire (desired here, warm, Lease free)──▶ ACQUIRING ──won──▶ HELD (Open)
      ▲                                                    │lost race        │ desired elsewhere,
      │◀───────────────────────────────────────────────────┘                 │ or stopping (Close)
      │                                                                      ▼
      │◀──released── RELEASING ◀──Release (nothing in flight)────────── DRAINING
      │                                                                      │ desired here again:
      │                                                                      └──▶ HELD (Open)
      └◀── membership lapsed, or the Lease names someone else, from HELD or DRAINING:
           Close(cancel) at once, no write (the others wait out the member Lease)

The safety rule this keeps (argued in ARCHITECTURE.md): a shard's keys are
handed out only in HELD, HELD is entered only by winning the shard Lease's
compare-and-swap while this replica's membership is valid, and the Lease is
freed only from RELEASING, after every reconcile of the shard has ended.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

__all__ = [
    "Acquire",
    "Action",
    "Close",
    "Handoff",
    "Open",
    "Phase",
    "Release",
    "View",
]


class Phase(enum.Enum):
    """Where one shard stands on this replica."""

    IDLE = "idle"
    """Not held here (its keys are not handed out)."""
    ACQUIRING = "acquiring"
    """The Lease write that takes it is under way."""
    HELD = "held"
    """Held: its keys are handed out."""
    DRAINING = "draining"
    """Still held, its keys no longer handed out; waiting for its reconciles to end."""
    RELEASING = "releasing"
    """Drained; the Lease write that frees it is under way."""


@dataclass(frozen=True, slots=True)
class Acquire:
    """Write the shard's Lease with this replica as holder (a compare-and-swap)."""

    shard: int


@dataclass(frozen=True, slots=True)
class Release:
    """Write the shard's Lease with no holder (a compare-and-swap)."""

    shard: int


@dataclass(frozen=True, slots=True)
class Open:
    """Hand out the shard's keys, and queue every object of it (its new owner
    reconciles what changed while it moved)."""

    shard: int


@dataclass(frozen=True, slots=True)
class Close:
    """Stop handing out the shard's keys; with ``cancel``, also cancel its reconciles
    in flight (the shard is lost, or its drain took too long)."""

    shard: int
    cancel: bool = False
    reason: str = "rebalance"


Action: TypeAlias = Acquire | Release | Open | Close
"""What :meth:`Handoff.plan` asks the coordinator to do."""


@dataclass(frozen=True, slots=True)
class View:
    """What the replica sees at one moment (see :meth:`Handoff.plan`).

    * ``valid``: its member Lease is valid (renewed within the renew deadline);
    * ``stopping``: it is shutting down (hand every shard back);
    * ``desired``: the assignment, shard to member;
    * ``holders``: each shard's holder as its Lease says (``""`` or absent: nobody);
    * ``members``: the members alive;
    * ``warm``: the shards whose objects this replica's caches hold, synced;
    * ``in_flight``: the reconciles running per shard here;
    * ``now``: the time on the replica's clock.
    """

    now: float
    valid: bool
    desired: Mapping[int, str]
    holders: Mapping[int, str]
    members: Collection[str]
    warm: Collection[int]
    in_flight: Mapping[int, int]
    stopping: bool = False


@dataclass(slots=True)
class _Drain:
    since: float
    cancelled: bool = False


@dataclass(slots=True)
class Handoff:
    """The phases of ``shards`` virtual shards on the replica ``me``.

    ``drain_timeout``: seconds a drain waits for the reconciles in flight before
    it cancels them (coroutine reconciles end; a plain function runs to its end,
    and the shard stays held until it has). Used from one event loop (its
    :meth:`held` and :meth:`owned` snapshots from any thread).
    """

    me: str
    shards: int
    drain_timeout: float = 30.0
    _phases: dict[int, Phase] = field(default_factory=dict)
    _drains: dict[int, _Drain] = field(default_factory=dict)

    def phase(self, shard: int) -> Phase:
        """Where ``shard`` stands here."""
        return self._phases.get(shard, Phase.IDLE)

    def held(self) -> set[int]:
        """The shards whose keys are handed out here (HELD). Any thread (a snapshot)."""
        return {s for s, p in list(self._phases.items()) if p is Phase.HELD}

    def owned(self) -> set[int]:
        """The shards whose Lease names this replica as far as it knows (every phase
        but IDLE): what its caches must keep holding. Any thread (a snapshot)."""
        return {s for s, p in list(self._phases.items()) if p is not Phase.IDLE}

    def idle(self) -> bool:
        """Whether no shard is held, taken or given back here."""
        return not self.owned()

    def _set(self, shard: int, phase: Phase) -> None:
        if phase is Phase.IDLE:
            self._phases.pop(shard, None)
        else:
            self._phases[shard] = phase
        if phase is not Phase.DRAINING:
            self._drains.pop(shard, None)

    def plan(self, view: View) -> list[Action]:
        """The actions ``view`` calls for now, the phases moved accordingly (see the
        module documentation)."""
        actions: list[Action] = []
        me = self.me
        for shard in range(self.shards):
            phase = self.phase(shard)
            holder = view.holders.get(shard, "")
            mine = view.valid and not view.stopping and view.desired.get(shard) == me
            if phase is Phase.HELD or phase is Phase.DRAINING:
                if not view.valid or holder != me:
                    reason = "lost" if not view.valid else "taken"
                    self._set(shard, Phase.IDLE)
                    actions.append(Close(shard, cancel=True, reason=reason))
                elif phase is Phase.HELD:
                    if not mine:
                        self._set(shard, Phase.DRAINING)
                        self._drains[shard] = _Drain(view.now)
                        reason = "shutdown" if view.stopping else "rebalance"
                        actions.append(Close(shard, reason=reason))
                elif mine:
                    self._set(shard, Phase.HELD)
                    actions.append(Open(shard))
                elif view.in_flight.get(shard, 0) == 0:
                    self._set(shard, Phase.RELEASING)
                    actions.append(Release(shard))
                else:
                    drain = self._drains[shard]
                    if not drain.cancelled and view.now - drain.since >= self.drain_timeout:
                        drain.cancelled = True
                        actions.append(Close(shard, cancel=True, reason="drain timeout"))
            elif phase is Phase.IDLE:
                if mine:
                    free = holder in ("", me) or holder not in view.members
                    if free and shard in view.warm:
                        self._set(shard, Phase.ACQUIRING)
                        actions.append(Acquire(shard))
                elif holder == me and view.valid:
                    # The Lease still names this replica though it holds nothing (its
                    # membership lapsed and came back, or it restarted under its old
                    # identity): free it, or its new owner waits for ever.
                    self._set(shard, Phase.RELEASING)
                    actions.append(Release(shard))
        return actions

    def lapse(self) -> list[Close]:
        """This replica's membership lapsed (it could not renew in time): drop every
        shard held or draining at once, without a write (the others take them over
        when its member Lease expires). The same as :meth:`plan` with an invalid
        view does to them, for a caller that cannot wait for a view."""
        actions: list[Close] = []
        for shard in sorted(self._phases):
            if self._phases[shard] in (Phase.HELD, Phase.DRAINING):
                self._set(shard, Phase.IDLE)
                actions.append(Close(shard, cancel=True, reason="lost"))
        return actions

    def acquired(self, shard: int, won: bool) -> list[Action]:
        """The write that takes ``shard`` ended: ``won`` (this replica holds it now)
        or not (someone else wrote the Lease first, or the write failed)."""
        if self.phase(shard) is not Phase.ACQUIRING:
            return []
        if not won:
            self._set(shard, Phase.IDLE)
            return []
        self._set(shard, Phase.HELD)
        return [Open(shard)]

    def released(self, shard: int) -> None:
        """The write that frees ``shard`` ended (freed, or someone else had written the
        Lease: either way this replica no longer holds it; a write that failed
        leaves the Lease naming this replica, and the next plan frees it again)."""
        if self.phase(shard) is Phase.RELEASING:
            self._set(shard, Phase.IDLE)
