"""A replica's lease on its budget holds (gateway/spend/leases.py), two replicas on one in-process
counter store and an injected clock: holds live while their owner ticks, go at the first tick
of another replica once the owner's lease has ended, and go at once when it retires."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from gateway.spend.budget_metrics import BudgetMetrics
from gateway.spend.leases import Leaseholder
from gateway.storage.counters import Admission, BudgetCheck, InProcessStore, Outcome

TEAM = BudgetCheck("team:t:daily:2026-11-10", 1_000, 3600)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


async def hold(store: InProcessStore, holder: Leaseholder, rid: str, amount: int) -> None:
    now = holder.clock()
    admission = Admission(rid, now, now + 900, amount, (), (TEAM,), holder.lease(now))
    assert (await store.admit(admission)).outcome is Outcome.ADMITTED


async def reserved(store: InProcessStore) -> int:
    [state] = await store.read([TEAM.counter])
    return state.reserved_pusd


@pytest.mark.parametrize("lease_s, tick_s", [(10, 1.0), (3, 1.0), (1.5, 0.5), (0.3, 0.1)])
def test_three_renewals_per_lease_at_most_every_second(lease_s: float, tick_s: float) -> None:
    holder = Leaseholder(InProcessStore(), lease_s, BudgetMetrics(CollectorRegistry()), Clock())
    assert holder.tick_s == pytest.approx(tick_s)


def test_each_replica_has_its_own_identity() -> None:
    metrics, clock = BudgetMetrics(CollectorRegistry()), Clock()
    a, b = Leaseholder(InProcessStore(), 10, metrics, clock), Leaseholder(InProcessStore(), 10, metrics, clock)
    assert a.owner != b.owner
    assert a.lease(clock()).until == clock() + 10


async def test_a_dead_replicas_holds_go_at_a_living_ones_tick_after_its_lease_ends() -> None:
    store, clock, registry = InProcessStore(), Clock(), CollectorRegistry()
    await store.initialize({TEAM.counter: (0, 3600)})
    dead = Leaseholder(store, 10, BudgetMetrics(CollectorRegistry()), clock)
    alive = Leaseholder(store, 10, BudgetMetrics(registry), clock)
    await hold(store, dead, "d1", 300)
    await hold(store, dead, "d2", 200)
    await hold(store, alive, "a1", 100)
    await dead.tick()
    clock.now += 9.9  # within the dead replica's lease: nothing goes
    assert await alive.tick() == 0 and await reserved(store) == 600
    clock.now += 0.2  # past it; the living replica renewed its own at every tick
    assert await alive.tick() == 2 and await reserved(store) == 100
    assert registry.get_sample_value("costgate_budget_holds_reclaimed_total") == 2
    clock.now += 9.9  # the living replica's lease holds as long as it ticks
    assert await alive.tick() == 0 and await reserved(store) == 100


async def test_a_replica_that_retires_releases_its_holds_at_once() -> None:
    store, clock = InProcessStore(), Clock()
    await store.initialize({TEAM.counter: (0, 3600)})
    leaving = Leaseholder(store, 10, BudgetMetrics(CollectorRegistry()), clock)
    staying = Leaseholder(store, 10, BudgetMetrics(CollectorRegistry()), clock)
    await hold(store, leaving, "l1", 300)
    await hold(store, staying, "s1", 100)
    assert await leaving.retire() == 1 and await reserved(store) == 100
