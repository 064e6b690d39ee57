"""Budget and rate-limit counters behind one small interface, with the in-process backend.

`BudgetStore.admit` checks every rate limit and every budget of a request and, only if all of
them pass, counts the request and holds its worst-case cost against every budget — all at once,
so no two requests can both see room that only one of them fits in (the check-then-increment
race). `settle` commits the true cost and releases the hold.

Every hold has an owner, the replica that admitted it (`Lease`): each replica renews a lease
of a few seconds while it lives (`renew`), and the holds of an owner whose lease has ended —
a replica that died — are released by `reclaim`, which every replica runs every few seconds
(gateway/spend/leases.py), and by `admit` itself before it refuses a request for its budget. A hold
also carries a deadline (`reservation_timeout_s`), a backstop for a live replica's hold that
is never settled. A replica that stops cleanly `retire`s: its holds go and its lease ends.

Counters start uninitialized: `admit` reports them as `missing` and the caller seeds them from
the ledger (`initialize`), so a fresh process or a restarted Redis starts from what was really
spent instead of from zero. `settle` never creates a counter (a later seed from the ledger
would count that cost twice).

Two backends: `InProcessStore` here (one replica; each method runs without awaiting, so it is
atomic under asyncio) and `RedisStore` (gateway/storage/redis_counters.py: one Lua script per
call, shared by every replica).
"""

from __future__ import annotations

import enum
import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from policies.budgets import fits
from policies.rate_limits import Limit, RateCheck, allows, estimate, retry_after


class StoreUnavailable(Exception):
    """The backend cannot be reached; the caller decides to fail open or closed."""


@dataclass(frozen=True, slots=True)
class BudgetCheck:
    counter: str  # Budget.counter(now)
    amount_pusd: int  # the budget's limit
    ttl_s: int | None  # how long the counter must outlive its period's end; None: forever


@dataclass(frozen=True, slots=True)
class Lease:
    owner: str  # a replica's identity for its lifetime
    until: float  # its holds are reclaimed once this passes without a renewal


@dataclass(frozen=True, slots=True)
class Admission:
    reservation_id: str
    now: float
    deadline: float  # after this the hold may be reclaimed
    want_pusd: int  # the worst-case cost held against every budget
    rates: tuple[RateCheck, ...] = ()
    budgets: tuple[BudgetCheck, ...] = ()
    lease: Lease | None = None  # whose hold it is; None: owned by no replica (deadline only)
    # What to charge if the owner dies before its stream checkpoints anything (the whole hold:
    # gateway/upstream/inflight.py `held_record`); kept on the hold, like a stream's checkpoints.
    checkpoint: str | None = None


class Outcome(enum.Enum):
    ADMITTED = "admitted"
    RATE_LIMITED = "rate_limited"
    OVER_BUDGET = "over_budget"
    UNINITIALIZED = "uninitialized"  # seed `missing` from the ledger, then admit again


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    failed: int | None = None  # index into rates or budgets of the check that failed
    retry_after_s: int | None = None
    missing: tuple[str, ...] = ()
    used: tuple[int, ...] = ()  # admitted: each rate limit's use in its window, this request counted


@dataclass(frozen=True, slots=True)
class RateAdjustment:
    counter: str  # the window counter the admission counted into
    delta: int  # true tokens minus the estimate counted at admission
    ttl_s: int


@dataclass(frozen=True, slots=True)
class Settlement:
    reservation_id: str
    now: float
    cost_pusd: int
    budgets: tuple[str, ...]  # the budget counters the admission held against
    spend_counters: tuple[tuple[str, int], ...] = ()  # (counter, ttl) summing spend, e.g. per hour
    rates: tuple[RateAdjustment, ...] = ()


@dataclass(frozen=True, slots=True)
class CounterState:
    spent_pusd: int
    reserved_pusd: int
    initialized: bool


class BudgetStore(Protocol):
    async def admit(self, admission: Admission) -> Verdict: ...

    async def settle(self, settlement: Settlement) -> list[int]:
        """Commit the cost, release the hold; returns the spend after it of each budget
        counter, then of each spend counter. A backend that can fail (Redis) makes this
        idempotent — settling one id again returns [] and changes nothing — so a settlement
        whose reply was lost can be retried."""
        ...

    async def initialize(self, seeds: Mapping[str, tuple[int, int | None]]) -> None:
        """Seed counters that do not exist yet: counter -> (spent, ttl). Existing ones win."""
        ...

    async def read(self, counters: Sequence[str]) -> list[CounterState]: ...

    async def reclaim(self, now: float) -> int:
        """Release holds past their deadline and those of owners whose lease has ended;
        returns how many."""
        ...

    async def renew(self, lease: Lease) -> None:
        """Extend `lease.owner`'s lease to `lease.until`: its holds stay while it lives."""
        ...

    async def retire(self, owner: str) -> int:
        """`owner` stops: release what it still holds, end its lease; returns how many."""
        ...

    async def checkpoint(self, reservation_id: str, record: str) -> bool:
        """Keep `record` (a stream's progress) on the hold while it is held; False: it is gone.
        A hold reclaimed from a dead owner queues its checkpoint for `stopped`."""
        ...

    async def stopped(self, limit: int) -> list[str]:
        """Take up to `limit` checkpoints of dead owners' reclaimed holds: each is taken once,
        by whichever replica asks first."""
        ...

    async def claim_alert(self, counter: str, label: str, now: float, ttl_s: int | None) -> bool:
        """True exactly once per (counter, label): the caller then sends the alert."""
        ...

    async def alert_state(self, counter: str) -> dict[str, float]: ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class _Hold:
    amount: int
    counters: tuple[str, ...]
    deadline: float
    owner: str | None
    checkpoint: str | None = None


@dataclass(slots=True)
class InProcessStore:
    """Counters in this process's memory. Expired rate windows are pruned as time moves on.
    Leases work as in Redis (tests let one store stand for several replicas); in production
    the only owner is this process, whose holds die with it."""

    counters: dict[str, list[int]] = field(default_factory=dict)  # counter -> [spent, reserved]
    windows: dict[str, int] = field(default_factory=dict)  # rate window counter -> count
    holds: dict[str, _Hold] = field(default_factory=dict)
    deadlines: list[tuple[float, str]] = field(default_factory=list)  # a heap over holds
    leases: dict[str, float] = field(default_factory=dict)  # owner -> the end of its lease
    owned: dict[str, set[str]] = field(default_factory=dict)  # owner -> its holds' ids
    alerts: dict[str, dict[str, float]] = field(default_factory=dict)
    expires: dict[str, float] = field(default_factory=dict)  # spend counters' end of life
    stopped_checkpoints: list[str] = field(default_factory=list)  # of holds released unsettled
    _pruned_minute: int = 0

    async def admit(self, a: Admission) -> Verdict:
        self._reclaim(a.now)
        self._prune(a.now)
        missing = tuple(b.counter for b in a.budgets if b.counter not in self.counters)
        if missing:
            return Verdict(Outcome.UNINITIALIZED, missing=missing)
        used = []
        for i, check in enumerate(a.rates):
            current = self.windows.get(check.counter(a.now), 0)
            previous = self.windows.get(check.counter(a.now, previous=True), 0)
            if not allows(check, current, previous, a.now):
                return Verdict(Outcome.RATE_LIMITED, failed=i, retry_after_s=retry_after(check, a.now))
            window = check.limit.window_s
            used.append(math.ceil(estimate(current, previous, window, a.now, check.limit.sliding) + check.amount))
        failed = self._over_budget(a)
        if failed is not None and self._reclaim_dead(a.now):  # a dead replica's holds go first
            failed = self._over_budget(a)
        if failed is not None:
            return Verdict(Outcome.OVER_BUDGET, failed=failed)
        for check in a.rates:
            key = check.counter(a.now)
            self.windows[key] = self.windows.get(key, 0) + check.amount
        if a.budgets and a.want_pusd:  # nothing held, nothing to remember (as in admit.lua)
            self._hold(a)
        return Verdict(Outcome.ADMITTED, used=tuple(used))

    async def settle(self, s: Settlement) -> list[int]:
        self._release(s.reservation_id)
        spent = []
        for counter in s.budgets:
            state = self.counters.get(counter)
            if state is not None:
                state[0] += s.cost_pusd
            spent.append(state[0] if state is not None else 0)
        for counter, ttl in s.spend_counters:
            self.expires.setdefault(counter, s.now + ttl)
            state = self.counters.setdefault(counter, [0, 0])
            state[0] += s.cost_pusd
            spent.append(state[0])
        for adj in s.rates:
            if adj.counter in self.windows:
                self.windows[adj.counter] += adj.delta
        return spent

    async def initialize(self, seeds: Mapping[str, tuple[int, int | None]]) -> None:
        # Budget counters are kept for good here: one per budget and period is little memory.
        for counter, (spent, _ttl) in seeds.items():
            self.counters.setdefault(counter, [spent, 0])

    async def read(self, counters: Sequence[str]) -> list[CounterState]:
        out = []
        for c in counters:
            state = self.counters.get(c)
            out.append(CounterState(state[0], state[1], True) if state else CounterState(0, 0, False))
        return out

    async def reclaim(self, now: float) -> int:
        return self._reclaim(now) + self._reclaim_dead(now)

    async def renew(self, lease: Lease) -> None:
        self.leases[lease.owner] = lease.until

    async def retire(self, owner: str) -> int:
        return self._release_owner(owner)

    async def checkpoint(self, reservation_id: str, record: str) -> bool:
        hold = self.holds.get(reservation_id)
        if hold is not None:
            hold.checkpoint = record
        return hold is not None

    async def stopped(self, limit: int) -> list[str]:
        taken, self.stopped_checkpoints = self.stopped_checkpoints[:limit], self.stopped_checkpoints[limit:]
        return taken

    async def claim_alert(self, counter: str, label: str, now: float, ttl_s: int | None) -> bool:
        fired = self.alerts.setdefault(counter, {})
        if label in fired:
            return False
        fired[label] = now
        return True

    async def alert_state(self, counter: str) -> dict[str, float]:
        return dict(self.alerts.get(counter, {}))

    async def close(self) -> None:
        return None

    def _over_budget(self, a: Admission) -> int | None:
        for i, b in enumerate(a.budgets):
            spent, reserved = self.counters[b.counter]
            if not fits(spent, reserved, b.amount_pusd, a.want_pusd):
                return i
        return None

    def _hold(self, a: Admission) -> None:
        for b in a.budgets:
            self.counters[b.counter][1] += a.want_pusd
        owner = a.lease.owner if a.lease is not None else None
        checkpoint = a.checkpoint if owner is not None else None
        self.holds[a.reservation_id] = _Hold(
            a.want_pusd, tuple(b.counter for b in a.budgets), a.deadline, owner, checkpoint
        )
        heapq.heappush(self.deadlines, (a.deadline, a.reservation_id))
        if a.lease is not None:  # admitting proves the owner alive: its lease runs at least this long
            self.owned.setdefault(a.lease.owner, set()).add(a.reservation_id)
            self.leases[a.lease.owner] = max(self.leases.get(a.lease.owner, a.lease.until), a.lease.until)

    def _release(self, reservation_id: str) -> int:
        hold = self.holds.pop(reservation_id, None)
        if hold is None:
            return 0
        for counter in hold.counters:
            state = self.counters.get(counter)
            if state is not None:
                state[1] -= hold.amount
        if hold.owner is not None:
            self.owned.get(hold.owner, set()).discard(reservation_id)
        return 1

    def _reclaim(self, now: float) -> int:
        """Holds past their deadline."""
        count = 0
        while self.deadlines and self.deadlines[0][0] <= now:
            _deadline, rid = heapq.heappop(self.deadlines)
            hold = self.holds.get(rid)
            if hold is not None and hold.deadline <= now:
                count += self._release(rid)
        return count

    def _reclaim_dead(self, now: float) -> int:
        """The holds of owners whose lease has ended."""
        dead = [owner for owner, until in self.leases.items() if until <= now]
        return sum(self._release_owner(owner, dead=True) for owner in dead)

    def _release_owner(self, owner: str, dead: bool = False) -> int:
        self.leases.pop(owner, None)
        release = self._drop if dead else self._release
        return sum(release(rid) for rid in self.owned.pop(owner, set()))

    def _drop(self, reservation_id: str) -> int:
        """Release a dead replica's hold, queueing its checkpoint (as holds.lua does)."""
        hold = self.holds.get(reservation_id)
        if hold is not None and hold.checkpoint is not None:
            self.stopped_checkpoints.append(hold.checkpoint)
        return self._release(reservation_id)

    def _prune(self, now: float) -> None:
        """Forget rate windows older than the previous one and spend counters past their
        lifetime (at most once a minute)."""
        minute = int(now // 60)
        if minute == self._pruned_minute:
            return
        self._pruned_minute = minute
        for counter in [c for c, at in self.expires.items() if at <= now]:
            del self.expires[counter]
            self.counters.pop(counter, None)
        for key in list(self.windows):
            window_s = Limit(key.split(":")[1]).window_s
            index = int(key.rsplit(":", 1)[1])
            if index < int(now // window_s) - 1:
                del self.windows[key]
