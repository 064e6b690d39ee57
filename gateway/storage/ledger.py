"""The ledger: one row per request, written in batches off the request path.

Durability: `record` appends the row to a local journal file before the answer is sent
(gateway/storage/journal.py), then queues it; queued rows go to the database every
`flush_interval_s` (default 50 ms) or `batch_size` rows, in one transaction. A clean shutdown
flushes everything. After a crash of the process (SIGKILL, OOM kill) the next start replays
the journal, so every request whose answer reached its client has its row; only a power loss
of the host can lose the rows of the last moments (no fsync per request). A failed flush keeps
its rows queued and retries, so a database outage delays rows but drops none.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson
from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.core.context import RequestContext
from gateway.storage.db import ledger, utc_day
from gateway.storage.journal import Journal
from policies.pricing import from_pico, to_pico

log = logging.getLogger("costgate.ledger")


@dataclass(frozen=True, slots=True)
class LedgerRow:
    request_id: str
    created_at: float
    day: str
    team_id: str | None
    key_id: str | None
    user: str | None
    tags: str | None
    trace_id: str | None
    endpoint: str
    requested_model: str | None
    served_model: str | None
    provider: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost_pusd: int
    saved_pusd: int
    latency_ms: float
    ttft_ms: float | None
    cache_status: str
    status: int
    error: str | None
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    tier: str = "standard"
    provider_cache_saved_pusd: int = 0
    provider_tier_saved_pusd: int = 0
    cost_split: str | None = None  # JSON {deployment: cost_pusd}, when not all of it is served_model's

    @classmethod
    def from_context(cls, ctx: RequestContext) -> LedgerRow:
        p = ctx.principal
        ttft = ctx.ttft_s
        return cls(
            request_id=ctx.request_id,
            created_at=ctx.created_at,
            day=utc_day(ctx.created_at),
            team_id=p.team_id if p else None,
            key_id=p.key_id if p else None,
            user=ctx.asked.user,
            tags=("," + ",".join(ctx.tags) + ",") if ctx.tags else None,
            trace_id=ctx.trace_id,
            endpoint=ctx.api_name,
            requested_model=ctx.asked.model or None,
            served_model=ctx.outcome.served_model,
            provider=ctx.outcome.provider,
            prompt_tokens=ctx.meter.usage.prompt_tokens,
            completion_tokens=ctx.meter.usage.completion_tokens,
            cached_tokens=ctx.meter.usage.cached_tokens,
            cost_pusd=to_pico(ctx.meter.cost),
            saved_pusd=to_pico(ctx.meter.saved),
            cache_write_tokens=ctx.meter.usage.cache_write_tokens,
            cache_write_1h_tokens=ctx.meter.usage.cache_write_1h_tokens,
            tier=ctx.meter.tier.value,
            provider_cache_saved_pusd=to_pico(ctx.meter.provider_cache_saved),
            provider_tier_saved_pusd=to_pico(ctx.meter.provider_tier_saved),
            cost_split=cost_split(ctx.meter.by_model, ctx.outcome.served_model),
            latency_ms=ctx.latency_s * 1000,
            ttft_ms=None if ttft is None else ttft * 1000,
            cache_status=ctx.outcome.cache_status.value,
            status=ctx.outcome.status_code,
            error=ctx.outcome.error,
        )

    def as_dict(self) -> dict[str, Any]:
        """What dataclasses.asdict gives (every field is a scalar), without its recursive deep
        copy: this runs on every request."""
        return {name: getattr(self, name) for name in self.__slots__}


def cost_split(by_model: Mapping[str, Decimal], served: str | None) -> str | None:
    """The ledger's `cost_split` of a request's calls: None when every charged call went to the
    served model (the row's own columns say it all)."""
    charged = {model: to_pico(cost) for model, cost in by_model.items() if cost}
    if not charged or charged.keys() == {served}:
        return None
    return orjson.dumps(charged).decode()


class LedgerWriter:
    """Journals each row synchronously, then writes rows to the database in batches."""

    def __init__(
        self, engine: AsyncEngine, journal: Journal | None = None, flush_interval_s: float = 0.05, batch_size: int = 500
    ) -> None:
        self._engine = engine
        self._journal = journal
        self._interval = flush_interval_s
        self._batch_size = batch_size
        self._pending: list[dict[str, Any]] = []
        self._wake = asyncio.Event()  # a batch is full: write it now
        self._arrived = asyncio.Event()  # a row came into an empty queue: its interval starts
        self._flushing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def flush_interval_s(self) -> float:
        """How long a row may wait in this replica's queue before it is written."""
        return self._interval

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="ledger-writer")

    def record(self, row: LedgerRow) -> None:
        """Durable against a crash of this process once it returns (see gateway/storage/journal.py)."""
        data = row.as_dict()
        if self._journal is not None:
            self._journal.append(data)
        self._pending.append(data)
        if len(self._pending) == 1:
            self._arrived.set()
        if len(self._pending) >= self._batch_size:
            self._wake.set()

    async def recover(self) -> int:
        """Replay the journals of processes that died before flushing; returns rows replayed."""
        if self._journal is None:
            return 0
        replayed = 0
        for path in self._journal.orphans():
            rows = Journal.read(path)
            for i in range(0, len(rows), self._batch_size):
                await self.insert(rows[i : i + self._batch_size])
            replayed += len(rows)
            path.unlink()
        if replayed:
            log.warning("recovered %d ledger rows from the journal of a process that died", replayed)
        return replayed

    async def insert(self, rows: list[dict[str, Any]]) -> None:
        """Write rows now, insert-or-ignore on the request id: a replayed journal may hold rows
        already written."""
        dialect = self._engine.dialect.name
        statement = (pg_insert(ledger) if dialect == "postgresql" else sqlite_insert(ledger)).on_conflict_do_nothing(
            index_elements=["request_id"]
        )
        async with self._engine.begin() as conn:
            await conn.execute(statement, rows)

    async def flush(self) -> int:
        """Write every queued row now; returns how many were written. One flush at a time: a
        reader that flushes before it queries (/admin/spend) must also wait for the rows the
        background writer has taken but not yet committed."""
        async with self._flushing:
            return await self._flush_locked()

    async def _flush_locked(self) -> int:
        batch, self._pending = self._pending, []
        if not batch:
            return 0
        if self._journal is not None:
            self._journal.seal()
        try:
            await self.insert(batch)
        except SQLAlchemyError:
            self._pending[:0] = batch  # keep them, oldest first, for the next try
            raise
        if self._journal is not None and not self._pending:
            self._journal.release_sealed()
        return len(batch)

    async def _run(self) -> None:
        while not self._closing:
            if not self._pending:  # idle: no timer until a row comes (an idle gateway wakes for nothing)
                await self._arrived.wait()
                self._arrived.clear()
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), self._interval)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.flush()
            except SQLAlchemyError as err:
                log.warning("ledger flush failed, %d rows kept for retry: %s", len(self._pending), err)
                await asyncio.sleep(min(1.0, self._interval * 10))

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        self._arrived.set()
        if self._task is not None:
            await self._task
        deadline = time.monotonic() + 10
        while self._pending and time.monotonic() < deadline:
            try:
                await self.flush()
            except SQLAlchemyError as err:
                log.error("ledger flush at shutdown failed: %s", err)
                await asyncio.sleep(0.5)
        if self._pending:
            log.error(
                "%d ledger rows not written at shutdown; they stay in the journal for the next start",
                len(self._pending),
            )
        if self._journal is not None:
            self._journal.close(delete=not self._pending)

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def existing(self, request_ids: list[str]) -> set[str]:
        """Which of these requests have a row in the database."""
        found: set[str] = set()
        async with self._engine.connect() as conn:
            for i in range(0, len(request_ids), 500):
                query = select(ledger.c.request_id).where(ledger.c.request_id.in_(request_ids[i : i + 500]))
                found.update(r.request_id for r in await conn.execute(query))
        return found


GROUPS = {
    "team": ledger.c.team_id,
    "key": ledger.c.key_id,
    "model": func.coalesce(ledger.c.served_model, ledger.c.requested_model),  # failures: what was asked
    "day": ledger.c.day,
}


@dataclass(frozen=True, slots=True)
class SpendRow:
    group: str | None
    requests: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: Decimal
    saved_usd: Decimal
    provider_cache_saved_usd: Decimal = Decimal(0)
    provider_batch_saved_usd: Decimal = Decimal(0)  # batch and flex tiers


def _day_bounds(start: str | None, end: str | None) -> list:
    conditions = []
    if start:
        conditions.append(ledger.c.day >= start[:10])
    if end:
        conditions.append(ledger.c.day <= end[:10])
    return conditions


async def spend(
    engine: AsyncEngine, group_by: str, start: str | None = None, end: str | None = None, team_id: str | None = None
) -> list[SpendRow]:
    """Spend grouped by team, key, model or day, summed in SQL. Tags are grouped in Python
    because one row can carry several tags (each gets the row's full cost)."""
    conditions = _day_bounds(start, end)
    if team_id is not None:
        conditions.append(ledger.c.team_id == team_id)
    sums = (
        func.count().label("requests"),
        func.coalesce(func.sum(ledger.c.prompt_tokens), 0).label("pt"),
        func.coalesce(func.sum(ledger.c.completion_tokens), 0).label("ct"),
        func.coalesce(func.sum(ledger.c.cost_pusd), 0).label("cost"),
        func.coalesce(func.sum(ledger.c.saved_pusd), 0).label("saved"),
        func.coalesce(func.sum(ledger.c.provider_cache_saved_pusd), 0).label("pcache"),
        func.coalesce(func.sum(ledger.c.provider_tier_saved_pusd), 0).label("ptier"),
    )
    if group_by == "tag":
        query = select(ledger.c.tags, *sums).where(*conditions).group_by(ledger.c.tags)
        totals: dict[str | None, list[int]] = {}
        async with engine.connect() as conn:
            for r in await conn.execute(query):
                for tag in (r.tags or ",,").strip(",").split(",") if r.tags else [None]:
                    acc = totals.setdefault(tag, [0] * 7)
                    for i, v in enumerate((r.requests, r.pt, r.ct, r.cost, r.saved, r.pcache, r.ptier)):
                        acc[i] += int(v)
        return [_spend_row(g, *a) for g, a in sorted(totals.items(), key=lambda kv: -kv[1][3])]
    column = GROUPS[group_by]
    query = (
        select(column.label("g"), *sums)
        .where(*conditions)
        .group_by(column)
        .order_by(func.sum(ledger.c.cost_pusd).desc())
    )
    async with engine.connect() as conn:
        rows = await conn.execute(query)
    return [_spend_row(r.g, r.requests, r.pt, r.ct, r.cost, r.saved, r.pcache, r.ptier) for r in rows]


def _spend_row(group: str | None, requests: int, pt: int, ct: int, *pusd: int) -> SpendRow:
    cost, saved, pcache, ptier = (from_pico(int(v)) for v in pusd)
    return SpendRow(group, int(requests), int(pt), int(ct), cost, saved, pcache, ptier)


async def cost_by_day_and_model(engine: AsyncEngine, start: str, end: str) -> dict[tuple[str, str], Decimal]:
    """Dollars charged by (day, deployment called) from `start` to `end` (days, inclusive): what a
    provider's cost report is reconciled against. A request whose calls went to several
    deployments counts each call under its own (`cost_split`); what its split does not name (a
    hold charged at settle for a call that was never metered) counts under the served model."""
    t = ledger.c
    span = (t.day >= start, t.day <= end)
    whole = (
        select(t.day, t.served_model, func.sum(t.cost_pusd).label("cost"))
        .where(*span, t.served_model.is_not(None), t.cost_split.is_(None))
        .group_by(t.day, t.served_model)
    )
    split = select(t.day, t.served_model, t.cost_pusd, t.cost_split).where(*span, t.cost_split.is_not(None))
    pusd: dict[tuple[str, str], int] = {}
    async with engine.connect() as conn:
        for day, model, cost in await conn.execute(whole):
            pusd[(day, model)] = int(cost or 0)
        for day, served, cost, parts_json in await conn.execute(split):
            parts: dict[str, int] = orjson.loads(parts_json)
            for model, part in parts.items():
                pusd[(day, model)] = pusd.get((day, model), 0) + int(part)
            left = int(cost) - sum(parts.values())
            if left and served is not None:
                pusd[(day, served)] = pusd.get((day, served), 0) + left
    return {key: from_pico(cost) for key, cost in pusd.items()}
