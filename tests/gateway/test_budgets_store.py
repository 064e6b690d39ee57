"""The counter store's contract, on both backends (in-process, and the real Redis on db 5
under a key prefix of this run's own): all-or-nothing admission, no overrun under concurrency,
reclaimed holds, rate windows, seeding, period rollover with an injected clock."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from gateway.config.settings import Settings
from gateway.core.context import Principal
from gateway.spend.spend_control import SpendControl, budget_checks
from gateway.storage.counters import (
    Admission,
    BudgetCheck,
    InProcessStore,
    Lease,
    Outcome,
    Settlement,
    StoreUnavailable,
)
from gateway.storage.db import create_engine, create_tables
from gateway.storage.ledger import LedgerRow, LedgerWriter
from gateway.storage.redis_counters import RedisStore
from policies.budgets import Budget, Hold, Period, Scope
from policies.rate_limits import Limit, RateCheck
from tests.gateway.budget_support import SHARED_REDIS, OwnRedis, redis_prefix
from tests.support import free_port

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

T0 = datetime(2026, 1, 31, 23, 59, 0, tzinfo=UTC).timestamp()


@pytest.fixture(scope="module")
def prefix() -> Iterator[str]:
    with redis_prefix() as p:
        yield p


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest, prefix: str) -> AsyncIterator[object]:
    if request.param == "memory":
        yield InProcessStore()
        return
    s = RedisStore(SHARED_REDIS, prefix + f"{request.node.name}:")
    yield s
    await s.close()


def admission(
    rid: str,
    now: float,
    want: int,
    budgets: tuple[BudgetCheck, ...] = (),
    rates: tuple[RateCheck, ...] = (),
    timeout: float = 60,
    owner: str | None = None,
) -> Admission:
    return Admission(rid, now, now + timeout, want, rates, budgets, None if owner is None else Lease(owner, now + 10))


async def test_admission_is_all_or_nothing_across_budgets(store):
    team, key = BudgetCheck("team:t:daily:x", 1000, 3600), BudgetCheck("key:k:daily:x", 300, 3600)
    await store.initialize({team.counter: (0, 3600), key.counter: (0, 3600)})
    rpm = RateCheck(Limit.REQUESTS_PER_MINUTE, "key:k", 10, 1)
    assert (await store.admit(admission("r1", T0, 200, (team, key), (rpm,)))).outcome is Outcome.ADMITTED
    refused = await store.admit(admission("r2", T0, 200, (team, key), (rpm,)))
    assert (refused.outcome, refused.failed) == (Outcome.OVER_BUDGET, 1)
    states = await store.read([team.counter, key.counter])
    assert [(s.spent_pusd, s.reserved_pusd) for s in states] == [(0, 200), (0, 200)]  # r2 held nothing
    # ...and was not counted against the rate limit either: 9 more requests still fit
    for i in range(9):
        assert (await store.admit(admission(f"x{i}", T0, 0, (), (rpm,)))).outcome is Outcome.ADMITTED
    assert (await store.admit(admission("x9", T0, 0, (), (rpm,)))).outcome is Outcome.RATE_LIMITED


async def test_settle_commits_the_cost_and_releases_the_rest(store):
    team = BudgetCheck("team:t:monthly:m", 10_000, None)
    await store.initialize({team.counter: (500, None)})
    assert (await store.admit(admission("r1", T0, 4000, (team,)))).outcome is Outcome.ADMITTED
    spent = await store.settle(Settlement("r1", T0, 1234, (team.counter,), (("spend:all:1", 60),)))
    assert spent == [1734, 1234]
    [state] = await store.read([team.counter])
    assert (state.spent_pusd, state.reserved_pusd) == (1734, 0)
    # settling twice (a retry) never releases twice
    await store.settle(Settlement("r1", T0, 0, (team.counter,)))
    assert (await store.read([team.counter]))[0].reserved_pusd == 0


async def test_concurrent_admissions_never_overrun(store):
    team = BudgetCheck("team:t:total:total", 50 * 7, None)
    await store.initialize({team.counter: (0, None)})
    verdicts = await asyncio.gather(*(store.admit(admission(f"c{i}", T0, 7, (team,))) for i in range(200)))
    assert sum(v.outcome is Outcome.ADMITTED for v in verdicts) == 50
    assert (await store.read([team.counter]))[0].reserved_pusd == 350


async def test_a_hold_past_its_deadline_is_reclaimed(store):
    team = BudgetCheck("team:t:daily:d", 100, 3600)
    await store.initialize({team.counter: (0, 3600)})
    assert (await store.admit(admission("dead", T0, 100, (team,), timeout=5))).outcome is Outcome.ADMITTED
    assert (await store.admit(admission("next", T0 + 1, 100, (team,)))).outcome is Outcome.OVER_BUDGET
    # the replica holding "dead" crashed; after its deadline the next admission reclaims it
    assert (await store.admit(admission("next", T0 + 6, 100, (team,)))).outcome is Outcome.ADMITTED
    assert (await store.read([team.counter]))[0].reserved_pusd == 100
    # a late settle of the reclaimed hold still commits its cost, and releases nothing twice
    await store.settle(Settlement("dead", T0, 40, (team.counter,)))
    [state] = await store.read([team.counter])
    assert (state.spent_pusd, state.reserved_pusd) == (40, 100)
    await store.settle(Settlement("next", T0 + 6, 0, (team.counter,)))
    assert await store.reclaim(T0 + 10_000) == 0
    assert (await store.read([team.counter]))[0].reserved_pusd == 0


async def reserved(store, counter: str) -> int:
    return (await store.read([counter]))[0].reserved_pusd


async def test_a_dead_replicas_holds_go_when_its_lease_ends_first_before_a_refusal(store):
    team = BudgetCheck("team:t:daily:lease", 100, 3600)
    await store.initialize({team.counter: (0, 3600)})
    assert (await store.admit(admission("a1", T0, 60, (team,), owner="A"))).outcome is Outcome.ADMITTED
    assert (await store.admit(admission("b1", T0, 40, (team,), owner="B"))).outcome is Outcome.ADMITTED
    await store.renew(Lease("B", T0 + 20))  # B lives on; A died (its lease ends at T0 + 10)
    assert await store.reclaim(T0 + 9) == 0 and await reserved(store, team.counter) == 100
    # B's next request does not fit what is held, but A's holds are reclaimed before it is refused
    assert (await store.admit(admission("b2", T0 + 11, 60, (team,), owner="B"))).outcome is Outcome.ADMITTED
    assert await reserved(store, team.counter) == 100  # B's 40 + 60
    # A's partial stream charged afterwards (a restart's recovery): its cost once, no release twice
    await store.settle(Settlement("a1", T0, 30, (team.counter,)))
    [state] = await store.read([team.counter])
    assert (state.spent_pusd, state.reserved_pusd) == (30, 100)
    # with nothing dead, a budget that does not fit is still refused
    assert (await store.admit(admission("b3", T0 + 12, 1, (team,), owner="B"))).outcome is Outcome.OVER_BUDGET


async def test_the_periodic_reclaim_and_a_recovery_settle_agree_in_either_order(store):
    team = BudgetCheck("team:t:daily:order", 1000, 3600)
    await store.initialize({team.counter: (0, 3600)})
    for rid in ("d1", "d2", "d3"):
        assert (await store.admit(admission(rid, T0, 100, (team,), owner="dead"))).outcome is Outcome.ADMITTED
    await store.settle(Settlement("d1", T0, 25, (team.counter,)))  # recovered before the lease ended
    assert await store.reclaim(T0 + 10) == 2  # the lease ended: d2 and d3
    await store.settle(Settlement("d2", T0, 35, (team.counter,)))  # recovered after the reclaim
    [state] = await store.read([team.counter])
    assert (state.spent_pusd, state.reserved_pusd) == (60, 0)
    assert await store.reclaim(T0 + 1000) == 0


async def test_a_replica_that_stops_cleanly_releases_its_holds_at_once(store):
    team = BudgetCheck("team:t:daily:retire", 1000, 3600)
    await store.initialize({team.counter: (0, 3600)})
    for rid, owner in (("x1", "X"), ("x2", "X"), ("y1", "Y")):
        assert (await store.admit(admission(rid, T0, 100, (team,), owner=owner))).outcome is Outcome.ADMITTED
    assert await store.retire("X") == 2
    assert await reserved(store, team.counter) == 100
    assert await store.retire("X") == 0


async def test_missing_counters_are_reported_and_settle_never_creates_them(store):
    team = BudgetCheck("team:new:daily:d", 100, 3600)
    verdict = await store.admit(admission("r", T0, 1, (team,)))
    assert verdict.outcome is Outcome.UNINITIALIZED and verdict.missing == (team.counter,)
    await store.settle(Settlement("r", T0, 5, (team.counter,)))
    assert not (await store.read([team.counter]))[0].initialized
    await store.initialize({team.counter: (70, 3600)})
    await store.initialize({team.counter: (0, 3600)})  # the first seed wins
    assert (await store.read([team.counter]))[0].spent_pusd == 70


async def test_sliding_minute_window(store):
    rpm = RateCheck(Limit.REQUESTS_PER_MINUTE, "key:w", 4, 1)
    start = 60 * 1_000_000.0  # the start of a minute
    for i in range(4):
        assert (await store.admit(admission(f"a{i}", start + 10, 0, (), (rpm,)))).outcome is Outcome.ADMITTED
    refused = await store.admit(admission("a4", start + 10, 0, (), (rpm,)))
    assert refused.outcome is Outcome.RATE_LIMITED and refused.retry_after_s == 50
    # 45 s into the next minute a quarter of the last minute's 4 still counts: 1 + 3 new fit
    for i in range(3):
        assert (await store.admit(admission(f"b{i}", start + 105, 0, (), (rpm,)))).outcome is Outcome.ADMITTED
    assert (await store.admit(admission("b3", start + 105, 0, (), (rpm,)))).outcome is Outcome.RATE_LIMITED


async def test_alerts_are_claimed_once(store):
    assert await store.claim_alert("team:t:daily:d", "0.5", T0, 60)
    assert not await store.claim_alert("team:t:daily:d", "0.5", T0 + 1, 60)
    assert await store.claim_alert("team:t:daily:d", "0.8", T0 + 2, 60)
    assert set(await store.alert_state("team:t:daily:d")) == {"0.5", "0.8"}


async def test_an_unreachable_redis_raises_store_unavailable():
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", "x:", timeout_s=0.2)
    with pytest.raises(StoreUnavailable):  # a hang would end in wait_for's TimeoutError instead
        await asyncio.wait_for(store.admit(admission("r", T0, 1, (BudgetCheck("team:t:total:total", 5, None),))), 30)
    await store.close()


def _row(request_id: str, when: float, team: str, cost_pusd: int) -> LedgerRow:
    day = datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d")
    return LedgerRow(
        request_id,
        when,
        day,
        team,
        "k",
        None,
        None,
        None,
        "chat.completions",
        "m",
        "m",
        "openai",
        1,
        1,
        0,
        cost_pusd,
        0,
        1.0,
        None,
        "miss",
        200,
        None,
    )


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_period_rollover_with_an_injected_clock(backend: str, tmp_path: Path, prefix: str):
    """A daily budget full at 23:59 on Jan 31 admits again at 00:00:30 on Feb 1: the new day's
    counter is seeded from the ledger's rows of that day only."""
    clock = [T0]
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/l.db",
        data_dir=str(tmp_path),
        redis_url=SHARED_REDIS if backend == "redis" else None,
        budgets={"redis_prefix": prefix + f"rollover-{backend}:"},
    )
    engine = create_engine(settings.database_url)
    await create_tables(engine)
    ledger = LedgerWriter(engine)
    control = SpendControl(settings, engine, ledger, CollectorRegistry(), clock=lambda: clock[0])
    stored = await control.table.put(Budget(Scope.TEAM, "team_r", Period.DAILY, 1000))
    ledger.record(_row("old", T0 - 30, "team_r", 900))  # Jan 31: $900 pico of the 1000 spent
    ledger.record(_row("older", T0 - 86_400, "team_r", 5000))  # Jan 30: another day
    budgets = [stored]

    async def admit(rid: str, want: int) -> Outcome:
        now = clock[0]
        return (
            await control.admit(Admission(rid, now, now + 60, want, (), budget_checks(budgets, now)), budgets)
        ).outcome

    assert await admit("jan31", 200) is Outcome.OVER_BUDGET  # 900 + 200 > 1000
    assert [v.state.spent_pusd for v in await control.view(budgets)] == [900]
    clock[0] = T0 + 90  # Feb 1, 00:00:30 UTC
    assert await admit("feb1", 200) is Outcome.ADMITTED
    [view] = await control.view(budgets)
    assert (view.window.key, view.state.spent_pusd, view.state.reserved_pusd) == ("2026-02-01", 0, 200)
    await control.stop()
    await engine.dispose()


async def test_a_settlement_whose_reply_is_lost_is_retried_and_counted_once(tmp_path: Path):
    """Redis pauses (as in a network stall) while a request settles: the settle times out, is
    queued, and retried; the paused command also lands when Redis resumes, and the retry
    then changes nothing, so the cost is counted exactly once."""
    server = OwnRedis(tmp_path)
    try:
        settings = Settings(
            database_url=f"sqlite:///{tmp_path}/l.db",
            data_dir=str(tmp_path),
            redis_url=server.url,
            budgets={"redis_timeout_s": 0.2},
        )
        engine = create_engine(settings.database_url)
        await create_tables(engine)
        control = SpendControl(settings, engine, LedgerWriter(engine), CollectorRegistry())
        budget = await control.table.put(Budget(Scope.TEAM, "team_p", Period.TOTAL, 10_000))
        now = time.time()
        hold = Hold("h-stall", now, (budget,), 4_000)
        admitted = await control.admit(
            Admission(hold.id, now, now + 60, 4_000, (), budget_checks([budget], now)), [budget]
        )
        assert admitted.outcome is Outcome.ADMITTED
        redis.Redis(port=server.port).execute_command("CLIENT", "PAUSE", "600", "WRITE")
        await control.settle(hold, 1_500, (), Principal("team_p", "p", "key_p"))
        assert len(control.unsettled) == 1
        # A write of our own is held by the same pause, queued behind the stalled settle: when it
        # returns, the pause is over and the stalled command has run.
        probe = aioredis.Redis(port=server.port, socket_timeout=10)
        await probe.set("probe", 1)
        await probe.aclose()
        assert await control.retry_unsettled() == 1 and not control.unsettled
        [view] = await control.view([budget])
        assert (view.state.spent_pusd, view.state.reserved_pusd) == (1_500, 0)
        await control.stop()
        await engine.dispose()
    finally:
        server.stop()


async def test_redis_settlement_is_idempotent(prefix: str):
    store = RedisStore(SHARED_REDIS, prefix + "idem:")
    team = BudgetCheck("team:t:total:total", 10_000, None)
    await store.initialize({team.counter: (0, None)})
    assert (await store.admit(admission("r1", T0, 4000, (team,)))).outcome is Outcome.ADMITTED
    settlement = Settlement("r1", T0, 1234, (team.counter,))
    assert await store.settle(settlement) == [1234]
    assert await store.settle(settlement) == []  # a retry after a lost reply
    [state] = await store.read([team.counter])
    assert (state.spent_pusd, state.reserved_pusd) == (1234, 0)
    await store.close()


async def test_a_dead_owners_checkpointed_hold_is_queued_for_charging_and_a_settled_one_is_not(store):
    """Issue 24, item 8: a stream's progress checkpointed on its hold outlives the hold when the
    hold is reclaimed unsettled (its replica died), for a live replica to charge; a settled hold
    takes its checkpoint with it, and a checkpoint never recreates a hold that is gone."""
    team = BudgetCheck("team:t:daily:cp", 10_000, 3600)
    await store.initialize({team.counter: (0, 3600)})
    for rid in ("streaming", "finished", "unwatched"):
        assert (await store.admit(admission(rid, T0, 1000, (team,), owner="dead"))).outcome is Outcome.ADMITTED
    assert await store.checkpoint("streaming", '{"cost": 1}')
    assert await store.checkpoint("streaming", '{"cost": 2}')  # the latest progress wins
    assert await store.checkpoint("finished", '{"cost": 3}')
    await store.settle(Settlement("finished", T0, 400, (team.counter,)))
    assert not await store.checkpoint("finished", '{"cost": 4}')  # settled: not recreated
    assert await store.stopped(10) == []
    assert await store.reclaim(T0 + 11) == 2  # the owner's lease (10 s) ended
    assert await store.stopped(10) == ['{"cost": 2}']  # the unwatched hold had no checkpoint
    assert await store.stopped(10) == []  # taken once
    [state] = await store.read([team.counter])
    assert (state.spent_pusd, state.reserved_pusd) == (400, 0)


async def test_a_hold_admitted_with_a_checkpoint_is_charged_whole_if_its_owner_dies_first(store):
    """Without a stream's progress, a dead replica's hold is charged whole: the checkpoint given
    at admission. A hold without an owner (deadline only) keeps none; settling drops it."""
    team = BudgetCheck("team:t:daily:whole", 10_000, 3600)
    await store.initialize({team.counter: (0, 3600)})
    dying = Admission("dies", T0, T0 + 60, 1000, (), (team,), Lease("dead", T0 + 10), '{"whole": 1000}')
    settled = Admission("settles", T0, T0 + 60, 1000, (), (team,), Lease("dead", T0 + 10), '{"whole": 1}')
    ownerless = Admission("ownerless", T0, T0 + 60, 1000, (), (team,), None, '{"whole": 2}')
    for a in (dying, settled, ownerless):
        assert (await store.admit(a)).outcome is Outcome.ADMITTED
    await store.settle(Settlement("settles", T0, 400, (team.counter,)))
    assert await store.reclaim(T0 + 11) == 1
    assert await store.stopped(10) == ['{"whole": 1000}']
    assert await store.checkpoint("dies", '{"later": 1}') is False  # gone with its hold
