"""Incremental daily roll-up of the ledger, so dashboard pages do not re-sum a million rows.

`ledger_daily` holds one row per day, team, requested model, served model and cache status
with the sums of the ledger rows created before a watermark, `ledger_rollup.rolled_until`.
A page first advances the watermark to `now - GRACE_S` (when it lags by more than `STEP_S`),
adding the rows created in between to `ledger_daily` with an upsert, then reads the roll-up
for the window's days plus the few rows created since the watermark, live, through a covering
index. So a warm page costs the same whatever today's traffic.

Replicas: advancing moves the watermark with a compare-and-set (`UPDATE ... WHERE rolled_until
= old`) in the same transaction as the upsert; of two replicas racing, one updates no row
and rolls back, so no row is ever added twice.

Limit (stated, not hidden): a ledger row is written when its request finishes (within the
writer's 50 ms flush) but carries its start time. A row that reaches the database more than
GRACE_S (an hour) after its request started — a request running longer than that, or a
ledger outage that long while the process keeps the row queued — lands behind the watermark
and is missing from the dashboard's charts; the admin API's /admin/spend reads the ledger
itself and has it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    case,
    func,
    literal,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import Select

from gateway.storage.db import ledger, metadata

GRACE_S = 3600.0  # rows created longer ago than this are rolled up (see the limit above)
STEP_S = 60.0  # advance only when the watermark lags by more: most page views write nothing

ledger_daily = Table(
    "ledger_daily",
    metadata,
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

ledger_rollup = Table(
    "ledger_rollup",
    metadata,
    Column("name", String(40), primary_key=True),
    Column("rolled_until", Float, nullable=False),  # every ledger row created before this is in ledger_daily
)

# The live part of every page (rows since the watermark) reads only this index: a range on
# created_at, covering every column summed. Created with the tables on a new database; an
# existing one needs `CREATE INDEX` once (bench/dashboard.py does).
LIVE_INDEX = Index(
    "ix_ledger_live",
    ledger.c.created_at,
    ledger.c.day,
    ledger.c.team_id,
    ledger.c.requested_model,
    ledger.c.served_model,
    ledger.c.cache_status,
    ledger.c.status,
    ledger.c.prompt_tokens,
    ledger.c.completion_tokens,
    ledger.c.cost_pusd,
    ledger.c.saved_pusd,
)

DIMENSIONS = ("day", "team_id", "requested_model", "served_model", "cache_status")
MEASURES = ("requests", "errors", "prompt_tokens", "completion_tokens", "cost_pusd", "saved_pusd")
MARK = "ledger"


@dataclass(frozen=True, slots=True)
class Window:
    """The days a page shows: `days` days ending `today` (UTC)."""

    today: date
    days: int

    @classmethod
    def ending_at(cls, now: float, days: int) -> Window:
        return cls(datetime.fromtimestamp(now, UTC).date(), days)

    @property
    def first(self) -> str:
        return (self.today - timedelta(days=self.days - 1)).isoformat()

    @property
    def start(self) -> float:
        """The first day's midnight (UTC), as a timestamp."""
        first = self.today - timedelta(days=self.days - 1)
        return datetime(first.year, first.month, first.day, tzinfo=UTC).timestamp()

    @property
    def last(self) -> str:
        return self.today.isoformat()

    def labels(self) -> list[str]:
        return [(self.today - timedelta(days=self.days - 1 - i)).isoformat() for i in range(self.days)]


def _grouped(*conditions) -> Select:
    """Ledger rows matching `conditions`, summed to roll-up shape."""
    keys = (
        ledger.c.day,
        func.coalesce(ledger.c.team_id, ""),
        func.coalesce(ledger.c.requested_model, ""),
        func.coalesce(ledger.c.served_model, ""),
        ledger.c.cache_status,
    )
    return (
        select(
            *(k.label(n) for k, n in zip(keys, DIMENSIONS)),
            func.count().label("requests"),
            func.sum(case((ledger.c.status >= 400, 1), else_=0)).label("errors"),
            func.sum(ledger.c.prompt_tokens).label("prompt_tokens"),
            func.sum(ledger.c.completion_tokens).label("completion_tokens"),
            func.sum(ledger.c.cost_pusd).label("cost_pusd"),
            func.sum(ledger.c.saved_pusd).label("saved_pusd"),
        )
        .where(*conditions)
        .group_by(*keys)
    )


class Rollup:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def mark(self) -> float:
        async with self._engine.connect() as conn:
            value = (
                await conn.execute(select(ledger_rollup.c.rolled_until).where(ledger_rollup.c.name == MARK))
            ).scalar()
        return 0.0 if value is None else float(value)

    async def advance(self, now: float) -> bool:
        """Roll the rows created up to `now - GRACE_S` into ledger_daily, when the watermark lags
        by more than STEP_S. False when nothing was done here (not due, or another replica or
        connection is doing it: readers stay correct either way, they read the watermark and
        the roll-up in one statement)."""
        old, target = await self.mark(), now - GRACE_S
        if target - old <= STEP_S:
            return False
        dialect = postgresql if self._engine.dialect.name == "postgresql" else sqlite
        rows = dialect.insert(ledger_daily).from_select(
            [*DIMENSIONS, *MEASURES], _grouped(ledger.c.created_at >= old, ledger.c.created_at < target)
        )
        upsert = rows.on_conflict_do_update(
            index_elements=list(DIMENSIONS), set_={m: ledger_daily.c[m] + rows.excluded[m] for m in MEASURES}
        )
        try:
            async with self._engine.begin() as conn:
                if old == 0.0:
                    await conn.execute(
                        dialect.insert(ledger_rollup).values(name=MARK, rolled_until=0.0).on_conflict_do_nothing()
                    )
                moved = await conn.execute(
                    update(ledger_rollup)
                    .where(ledger_rollup.c.name == MARK, ledger_rollup.c.rolled_until == old)
                    .values(rolled_until=target)
                )
                if moved.rowcount != 1:
                    await conn.rollback()  # another replica moved it first
                    return False
                await conn.execute(upsert)
        except OperationalError:  # SQLite: another connection holds the write lock for its own roll-up
            return False
        return True

    def facts(self, window: Window) -> Select:
        """Roll-up-shaped rows for the window: ledger_daily, plus the rows since the watermark
        summed live. The watermark is read inside the same statement, so the two parts come
        from one snapshot even while another replica advances it. Callers group this subquery
        by the dimensions they need."""
        mark = func.coalesce(
            select(ledger_rollup.c.rolled_until).where(ledger_rollup.c.name == MARK).scalar_subquery(), 0.0
        )
        rolled = select(*(ledger_daily.c[n] for n in (*DIMENSIONS, *MEASURES))).where(
            ledger_daily.c.day >= window.first, ledger_daily.c.day <= window.last
        )
        # Only created_at bounds the live rows (nothing is created after today): a condition on
        # `day` would let the planner pick a `day` index and scan the whole window.
        live = _grouped(ledger.c.created_at >= mark, ledger.c.created_at >= window.start)
        return union_all(rolled, live).subquery("facts")  # type: ignore[return-value]


def summed(facts, *group: str) -> Select:
    """SELECT group..., sum(measure)... FROM facts GROUP BY group."""
    columns = [facts.c[g] for g in group]
    return select(*columns, *(func.coalesce(func.sum(facts.c[m]), literal(0)).label(m) for m in MEASURES)).group_by(
        *columns
    )
