"""Daily roll-up of the ledger, so dashboard pages do not re-sum a million rows per view.

The ledger is append-only and a row's `day` is its creation day (UTC). Rows reach the
database within the writer's flush interval (50 ms), or later only while a database outage
keeps them queued. So a day that ended more than an hour ago is treated as closed: its rows are summed
once into `ledger_daily` (one row per day, team, requested model, served model and cache
status) and the day is marked in `ledger_daily_days`. Today (and yesterday, in the first hour after
midnight) is summed live from the ledger through its `day` index. Rolling a day is one INSERT ... SELECT plus the
mark, in one transaction: two replicas racing on the same day collide on the mark's primary
key and one rolls back, so a day is never counted twice.

Limit (stated, not hidden): a row that reaches the database over an hour after its day ended
(a ledger outage of that length while the process keeps it queued) after its day was rolled is missing
from the dashboard's charts; the admin API's /admin/spend reads the ledger itself and has it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from sqlalchemy import (BigInteger, Column, Float, Index, Integer, PrimaryKeyConstraint, String, Table, case, func,
                        insert, literal, select, union_all)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import Select

from gateway.storage.db import ledger, metadata

ledger_daily = Table(
    "ledger_daily", metadata,
    Column("day", String(10), nullable=False),
    Column("team_id", String(40), nullable=False),  # '' for requests no key could be tied to
    Column("requested_model", String(200), nullable=False),
    Column("served_model", String(200), nullable=False),
    Column("cache_status", String(16), nullable=False),
    Column("requests", Integer, nullable=False),
    Column("errors", Integer, nullable=False),
    Column("prompt_tokens", BigInteger, nullable=False),
    Column("completion_tokens", BigInteger, nullable=False),
    Column("cost_pusd", BigInteger, nullable=False),
    Column("saved_pusd", BigInteger, nullable=False),
    PrimaryKeyConstraint("day", "team_id", "requested_model", "served_model", "cache_status"),
)

ledger_daily_days = Table(
    "ledger_daily_days", metadata,
    Column("day", String(10), primary_key=True),
    Column("rolled_at", Float, nullable=False),
)

# The live part of every page (today's rows) reads only this index: on SQLite a covering-index
# range scan, about 6x faster than fetching each row through `ix_ledger_day` (bench/dashboard.py).
# Created with the tables on a new database; an existing one needs `CREATE INDEX` once.
LIVE_INDEX = Index("ix_ledger_dashboard", ledger.c.day, ledger.c.team_id, ledger.c.requested_model,
                   ledger.c.served_model, ledger.c.cache_status, ledger.c.status, ledger.c.prompt_tokens,
                   ledger.c.completion_tokens, ledger.c.cost_pusd, ledger.c.saved_pusd)

DIMENSIONS = ("day", "team_id", "requested_model", "served_model", "cache_status")
MEASURES = ("requests", "errors", "prompt_tokens", "completion_tokens", "cost_pusd", "saved_pusd")


GRACE_S = 3600  # a day is closed once it ended this long ago: rows reach the database in 50 ms


@dataclass(frozen=True, slots=True)
class Window:
    """The days a page shows: `days` days ending today (UTC). Days from `first_open_day` on are
    summed live (default: yesterday and today)."""

    today: date
    days: int
    first_open_day: date | None = None

    @classmethod
    def ending_at(cls, now: float, days: int, grace_s: float = GRACE_S) -> Window:
        """The window at time `now`: only the current day (and the previous one, for the first
        `grace_s` after midnight) is still open."""
        t = datetime.fromtimestamp(now, timezone.utc)
        return cls(t.date(), days, (t - timedelta(seconds=grace_s)).date())

    @property
    def first(self) -> str:
        return (self.today - timedelta(days=self.days - 1)).isoformat()

    @property
    def last(self) -> str:
        return self.today.isoformat()

    @property
    def first_open(self) -> str:
        return (self.first_open_day or self.today - timedelta(days=1)).isoformat()

    def labels(self) -> list[str]:
        return [(self.today - timedelta(days=self.days - 1 - i)).isoformat() for i in range(self.days)]

    def closed(self) -> list[str]:
        return [d for d in self.labels() if d < self.first_open]


def _live_rows(first: str, last: str) -> Select:  # type: ignore[type-arg]
    """The ledger summed to roll-up shape for days first..last (through the `day` index)."""
    keys = (ledger.c.day, func.coalesce(ledger.c.team_id, ""), func.coalesce(ledger.c.requested_model, ""),
            func.coalesce(ledger.c.served_model, ""), ledger.c.cache_status)
    return select(
        *(k.label(n) for k, n in zip(keys, DIMENSIONS)),
        func.count().label("requests"),
        func.sum(case((ledger.c.status >= 400, 1), else_=0)).label("errors"),
        func.sum(ledger.c.prompt_tokens).label("prompt_tokens"),
        func.sum(ledger.c.completion_tokens).label("completion_tokens"),
        func.sum(ledger.c.cost_pusd).label("cost_pusd"),
        func.sum(ledger.c.saved_pusd).label("saved_pusd"),
    ).where(ledger.c.day >= first, ledger.c.day <= last).group_by(*keys)


class Rollup:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def ensure(self, window: Window) -> int:
        """Roll every closed day of the window not rolled yet; returns how many were rolled here."""
        closed = window.closed()
        if not closed:
            return 0
        async with self._engine.connect() as conn:
            done = {r.day for r in await conn.execute(select(ledger_daily_days.c.day).where(
                ledger_daily_days.c.day >= closed[0], ledger_daily_days.c.day <= closed[-1]))}
        rolled = 0
        for day in (d for d in closed if d not in done):
            try:
                async with self._engine.begin() as conn:
                    await conn.execute(insert(ledger_daily).from_select(
                        [*DIMENSIONS, *MEASURES], _live_rows(day, day)))
                    await conn.execute(insert(ledger_daily_days).values(day=day, rolled_at=time.time()))
                rolled += 1
            except IntegrityError:
                continue  # another replica rolled this day first
        return rolled

    def facts(self, window: Window) -> Select:  # type: ignore[type-arg]
        """Roll-up-shaped rows for the whole window: closed days from the roll-up, open days live.
        Callers group this subquery by the dimensions they need."""
        rolled = select(*(ledger_daily.c[n] for n in (*DIMENSIONS, *MEASURES))).where(
            ledger_daily.c.day >= window.first, ledger_daily.c.day < window.first_open)
        live = _live_rows(max(window.first, window.first_open), window.last)
        return union_all(rolled, live).subquery("facts")  # type: ignore[return-value]


def summed(facts, *group: str) -> Select:  # type: ignore[no-untyped-def, type-arg]
    """SELECT group..., sum(measure)... FROM facts GROUP BY group."""
    columns = [facts.c[g] for g in group]
    return select(*columns, *(func.coalesce(func.sum(facts.c[m]), literal(0)).label(m) for m in MEASURES)
                  ).group_by(*columns)
