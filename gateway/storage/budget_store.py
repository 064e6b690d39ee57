"""Budget definitions (a table every replica reads) and ledger sums per budget period (what a
counter is seeded from when it does not exist yet: a fresh process, a restarted Redis)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.core.errors import Unavailable
from gateway.storage.db import ledger, metadata, utc_day
from gateway.storage.keys import new_id
from policies.budgets import Budget, BudgetIndex, Period, Scope, Window, index

budgets = Table(
    "budgets",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("scope", String(8), nullable=False),
    Column("subject", String(200), nullable=False),
    Column("period", String(8), nullable=False),
    Column("amount_pusd", BigInteger, nullable=False),
    Column("alert_at", Text, nullable=False),  # JSON list of fractions
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    UniqueConstraint("scope", "subject", "period", name="uq_budget_subject_period"),
)


# Key budgets, and every free key's dollar cap, are seeded from the ledger by key (and day):
# without this index each would scan the whole ledger on its key's first request.
ix_ledger_key_day = Index("ix_ledger_key_day", ledger.c.key_id, ledger.c.day)


def _budget(row) -> Budget:
    return Budget(
        Scope(row.scope), row.subject, Period(row.period), int(row.amount_pusd), tuple(json.loads(row.alert_at)), row.id
    )


class BudgetTable:
    """The stored definitions, with a per-process copy refreshed every `refresh_s`: a change
    takes effect at once on the replica that made it and within `refresh_s` on the others."""

    def __init__(
        self, engine: AsyncEngine, refresh_s: float = 2.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._engine = engine
        self._refresh_s = refresh_s
        self._clock = clock
        self._index: BudgetIndex = {}
        self._loaded_at: float | None = None
        self._lock = asyncio.Lock()

    async def put(self, budget: Budget) -> Budget:
        """Create or replace the budget of one subject and period."""
        now = time.time()
        values = {"amount_pusd": budget.amount_pusd, "alert_at": json.dumps(list(budget.alert_at)), "updated_at": now}
        match = and_(
            budgets.c.scope == budget.scope.value,
            budgets.c.subject == budget.subject,
            budgets.c.period == budget.period.value,
        )
        for _attempt in range(2):  # a concurrent PUT of the same budget can win the insert
            async with self._engine.begin() as conn:
                found = (await conn.execute(select(budgets.c.id).where(match))).first()
                if found is not None:
                    await conn.execute(update(budgets).where(budgets.c.id == found.id).values(**values))
                    budget_id = found.id
                else:
                    budget_id = new_id("bud")
                    try:
                        await conn.execute(
                            insert(budgets).values(
                                id=budget_id,
                                scope=budget.scope.value,
                                subject=budget.subject,
                                period=budget.period.value,
                                created_at=now,
                                **values,
                            )
                        )
                    except IntegrityError:
                        continue
            break
        self._loaded_at = None
        return Budget(budget.scope, budget.subject, budget.period, budget.amount_pusd, budget.alert_at, budget_id)

    async def delete(self, budget_id: str) -> bool:
        async with self._engine.begin() as conn:
            result = await conn.execute(delete(budgets).where(budgets.c.id == budget_id))
        self._loaded_at = None
        return bool(result.rowcount)

    async def all(self) -> list[Budget]:
        async with self._engine.connect() as conn:
            rows = await conn.execute(select(budgets).order_by(budgets.c.created_at))
        return [_budget(r) for r in rows]

    async def current(self) -> BudgetIndex:
        """The definitions by subject, reloaded when older than `refresh_s` (one load at a time)."""
        if self._loaded_at is not None and self._clock() - self._loaded_at < self._refresh_s:
            return self._index
        async with self._lock:
            if self._loaded_at is None or self._clock() - self._loaded_at >= self._refresh_s:
                try:
                    self._index = index(await self.all())
                except SQLAlchemyError:
                    if self._loaded_at is None:  # never loaded: budgets cannot be known
                        raise Unavailable(
                            "budgets cannot be read right now; try again shortly",
                            code="budget_store_unavailable",
                            retry_after=1,
                        ) from None
                    # the database is down: the last definitions stay in force
                self._loaded_at = self._clock()
        return self._index


def _escape_like(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


async def ledger_spend(engine: AsyncEngine, scope: Scope, subject: str, window: Window) -> int:
    """Pico-dollars the ledger charged to one subject in one period (rows are placed by their
    `created_at`, the same instant the request's counters were chosen by)."""
    conditions = []
    if scope is Scope.TEAM:
        conditions.append(ledger.c.team_id == subject)
    elif scope is Scope.KEY:
        conditions.append(ledger.c.key_id == subject)
    elif scope is Scope.USER:
        conditions.append(ledger.c.user == subject)
    else:
        conditions.append(ledger.c.tags.like(f"%,{_escape_like(subject)},%", escape="\\"))
    # Periods are whole UTC days and a row's `day` is its created_at's UTC day, so bounding by
    # day selects exactly the same rows — through the (team_id, day) and day indexes.
    if window.start is not None:
        conditions.append(ledger.c.day >= utc_day(window.start))
    if window.end is not None:
        conditions.append(ledger.c.day < utc_day(window.end))
    query = select(func.coalesce(func.sum(ledger.c.cost_pusd), 0)).where(*conditions)
    async with engine.connect() as conn:
        return int((await conn.execute(query)).scalar_one())
