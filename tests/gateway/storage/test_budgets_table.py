"""Budget definitions and ledger sums (gateway/storage/budget_store.py) on a real SQLite database:
one definition per subject and period; a change seen at once by the replica that made it and
within `refresh_s` by the others (an injected clock, not a sleep); the last definitions kept
through a database outage; and a period's ledger spend per scope, tags matched whole."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.core.context import Principal
from gateway.core.errors import Unavailable
from gateway.storage.budget_store import BudgetTable, ledger_spend
from gateway.storage.db import create_engine, create_tables, ledger
from gateway.storage.ledger import LedgerRow
from policies.budgets import Budget, Period, Scope, Window, window
from policies.pricing import Bill, Usage
from tests.gateway.fakes import TEAM_A, request

TEAM = Budget(Scope.TEAM, "team_a1", Period.MONTHLY, 5_000_000_000_000)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(f"sqlite:///{tmp_path / 'budgets.db'}")
    await create_tables(engine)
    yield engine
    await engine.dispose()


async def test_one_definition_per_subject_and_period(db: AsyncEngine) -> None:
    table = BudgetTable(db, refresh_s=2)
    first = await table.put(TEAM)
    again = await table.put(Budget(Scope.TEAM, "team_a1", Period.MONTHLY, 7_000_000_000_000, (0.5,)))
    daily = await table.put(Budget(Scope.TEAM, "team_a1", Period.DAILY, 1_000_000_000_000))
    assert first.id is not None and again.id == first.id and daily.id != first.id
    stored = {b.period: b for b in await table.all()}
    assert stored[Period.MONTHLY].amount_pusd == 7_000_000_000_000 and stored[Period.MONTHLY].alert_at == (0.5,)
    assert set(stored) == {Period.MONTHLY, Period.DAILY}
    assert await table.delete(daily.id or "") is True
    assert await table.delete(daily.id or "") is False
    assert [b.id for b in await table.all()] == [first.id]


async def test_another_replica_sees_a_change_within_refresh_s(db: AsyncEngine) -> None:
    clock = Clock()
    here, there = BudgetTable(db, refresh_s=2, clock=clock), BudgetTable(db, refresh_s=2, clock=clock)
    assert await there.current() == {}  # loaded, empty
    await here.put(TEAM)
    assert (Scope.TEAM, "team_a1") in await here.current()  # at once where it was made
    clock.now += 1.9
    assert await there.current() == {}  # the other replica's copy is still fresh enough
    clock.now += 0.1
    [seen] = (await there.current())[(Scope.TEAM, "team_a1")]
    assert seen.amount_pusd == TEAM.amount_pusd


async def test_a_database_outage_keeps_the_last_definitions_in_force(db: AsyncEngine) -> None:
    clock = Clock()
    table = BudgetTable(db, refresh_s=2, clock=clock)
    await table.put(TEAM)
    assert (Scope.TEAM, "team_a1") in await table.current()
    async with db.begin() as conn:
        await conn.execute(text("DROP TABLE budgets"))  # every read fails from here on
    clock.now += 10
    assert (Scope.TEAM, "team_a1") in await table.current()  # refused requests beat unbudgeted ones
    never_loaded = BudgetTable(db, refresh_s=2, clock=clock)
    with pytest.raises(Unavailable) as refused:
        await never_loaded.current()
    assert (refused.value.status, refused.value.code) == (503, "budget_store_unavailable")


NOV_10 = datetime(2026, 11, 10, 12, tzinfo=UTC).timestamp()


def spent(
    n: int, at: float, cost: str, principal: Principal = TEAM_A, user: str | None = None, tags: tuple[str, ...] = ()
) -> dict:
    ctx = request(
        principal=principal, requested_model="small", served_model="small", created_at=at, user=user, tags=tags
    )
    ctx.request_id = f"req_{n}"
    ctx.meter.add_call("small", Usage(10, 10), Bill(Decimal(cost)))
    return LedgerRow.from_context(ctx).as_dict()


@pytest.mark.parametrize(
    "scope, subject, pusd",
    [
        (Scope.TEAM, "team_a1", 7_000_000_000),  # rows 1, 2 and 3 (November)
        (Scope.KEY, "key_a1", 7_000_000_000),
        (Scope.KEY, "key_b1", 100_000_000_000),
        (Scope.USER, "alice", 3_000_000_000),
        (Scope.TAG, "a_b", 1_000_000_000),  # `_` and `%` are not wildcards: "axb" is another tag
        (Scope.TAG, "a%", 0),
        (Scope.TAG, "prod", 4_000_000_000),  # a tag matches whole: not "prod-eu"
    ],
)
async def test_a_periods_ledger_spend_per_scope(db: AsyncEngine, scope: Scope, subject: str, pusd: int) -> None:
    other = Principal("team_b1", "team-b", "key_b1")
    october = datetime(2026, 10, 31, 23, 59, tzinfo=UTC).timestamp()
    async with db.begin() as conn:
        await conn.execute(
            insert(ledger),
            [
                spent(1, NOV_10, "0.001", tags=("a_b", "prod")),
                spent(2, NOV_10 + 1, "0.003", user="alice", tags=("prod",)),
                spent(3, NOV_10 + 2, "0.003", tags=("axb", "prod-eu")),
                spent(4, october, "0.5", user="alice", tags=("a_b", "prod")),  # last month
                spent(5, NOV_10, "0.1", principal=other),
            ],
        )
    assert await ledger_spend(db, scope, subject, window(Period.MONTHLY, NOV_10)) == pusd


async def test_a_total_budget_counts_every_period(db: AsyncEngine) -> None:
    october = datetime(2026, 10, 1, tzinfo=UTC).timestamp()
    async with db.begin() as conn:
        await conn.execute(insert(ledger), [spent(1, october, "0.5"), spent(2, NOV_10, "0.25")])
    assert await ledger_spend(db, Scope.TEAM, "team_a1", Window("total", None, None)) == 750_000_000_000
    assert await ledger_spend(db, Scope.TEAM, "team_a1", window(Period.DAILY, NOV_10)) == 250_000_000_000
