"""What the dashboard pages show, computed in SQL over the daily roll-up (see rollup.py).

Each function returns small typed rows; pages never see SQL rows or dicts from the database.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.dashboard.charts import Series
from gateway.dashboard.rollup import Rollup, Window, summed
from gateway.storage.db import ledger
from policies.pricing import Price, from_pico

ZERO = Decimal(0)
CACHE_HITS = ("exact", "semantic")


@dataclass(frozen=True, slots=True)
class Totals:
    requests: int
    errors: int
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal
    saved: Decimal


@dataclass(frozen=True, slots=True)
class Spender:
    team: str
    requests: int
    tokens: int
    cost: Decimal
    saved: Decimal
    share: float  # of the window's whole spend


@dataclass(frozen=True, slots=True)
class CacheStats:
    requests: int  # answered (status < 400): a refused request never reached the cache, as on the Cache page
    hits: dict[str, int]  # by cache status: exact, semantic
    saved: Decimal

    @property
    def hit_rate(self) -> float:
        return sum(self.hits.values()) / self.requests if self.requests else 0.0


@dataclass(frozen=True, slots=True)
class CascadeStats:
    name: str
    tiers: tuple[str, ...]
    requests: int
    by_tier: dict[str, int]  # answered by each tier (served model)
    saved: Decimal  # what the ledger recorded as saved on these requests
    estimated_saving: Decimal | None  # see Summary.cascades; None when the last tier has no price

    @property
    def escalation_rate(self) -> float:
        first = self.by_tier.get(self.tiers[0], 0) if self.tiers else 0
        return (self.requests - first) / self.requests if self.requests else 0.0


@dataclass(frozen=True, slots=True)
class RecentRequest:
    request_id: str
    created_at: float
    team: str
    key_id: str | None
    user: str | None
    tags: str
    endpoint: str
    requested_model: str | None
    served_model: str | None
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal
    cache_status: str
    status: int
    latency_ms: float


@dataclass(frozen=True, slots=True)
class Fact:
    """The window's sums for one team, requested model, served model and cache status."""

    team_id: str
    requested_model: str
    served_model: str
    cache_status: str
    requests: int
    errors: int
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal
    saved: Decimal


@dataclass(frozen=True, slots=True)
class Summary:
    """Everything but the per-day series, from one grouped query; pure arithmetic from here on."""

    facts: tuple[Fact, ...]

    def totals(self) -> Totals:
        f = self.facts
        return Totals(
            sum(x.requests for x in f),
            sum(x.errors for x in f),
            sum(x.prompt_tokens for x in f),
            sum(x.completion_tokens for x in f),
            sum((x.cost for x in f), ZERO),
            sum((x.saved for x in f), ZERO),
        )

    def top_spenders(self, names: Mapping[str, str], limit: int = 10) -> list[Spender]:
        by_team: dict[str, list] = {}
        for x in self.facts:
            acc = by_team.setdefault(x.team_id, [0, 0, ZERO, ZERO])
            acc[0] += x.requests
            acc[1] += x.prompt_tokens + x.completion_tokens
            acc[2] += x.cost
            acc[3] += x.saved
        whole = sum((a[2] for a in by_team.values()), ZERO)
        ranked = sorted(by_team.items(), key=lambda kv: kv[1][2], reverse=True)[:limit]
        return [
            Spender(names.get(team, team) or "(no key)", a[0], a[1], a[2], a[3], float(a[2] / whole) if whole else 0.0)
            for team, a in ranked
        ]

    def cache(self) -> CacheStats:
        hits = {s: sum(x.requests for x in self.facts if x.cache_status == s) for s in CACHE_HITS}
        saved = sum((x.saved for x in self.facts if x.cache_status in CACHE_HITS), ZERO)
        return CacheStats(sum(x.requests - x.errors for x in self.facts), hits, saved)

    def cascades(
        self, cascades: Iterable[tuple[str, tuple[str, ...]]], prices: Mapping[str, Price]
    ) -> list[CascadeStats]:
        """Escalation per configured cascade: requests asked of the cascade's name, by the tier that
        answered (cache hits left out: no tier ran).

        The estimated saving is gross: for requests a cheaper tier answered, what the last tier's
        price would have charged for the same tokens, less what was charged. The cost of cheap
        attempts that escalated is not subtracted: the ledger sums a request's calls, so their
        tokens cannot be told apart."""
        out = []
        for name, tiers in cascades:
            mine = [x for x in self.facts if x.requested_model == name and x.cache_status not in CACHE_HITS]
            by_tier: dict[str, int] = {}
            for x in mine:
                by_tier[x.served_model] = by_tier.get(x.served_model, 0) + x.requests
            last = prices.get(tiers[-1]) if tiers else None
            estimate = (
                None
                if last is None
                else sum(
                    (
                        x.prompt_tokens * last.input + x.completion_tokens * last.output - x.cost
                        for x in mine
                        if x.served_model != tiers[-1] and x.errors < x.requests
                    ),
                    ZERO,
                )
            )
            out.append(
                CascadeStats(name, tiers, sum(by_tier.values()), by_tier, sum((x.saved for x in mine), ZERO), estimate)
            )
        return out


class DashboardQueries:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self.rollup = Rollup(engine)

    async def _rows(self, window: Window, *group: str) -> list:
        query = summed(self.rollup.facts(window), *group)
        async with self._engine.connect() as conn:
            return list(await conn.execute(query))

    async def summary(self, window: Window) -> Summary:
        rows = await self._rows(window, "team_id", "requested_model", "served_model", "cache_status")
        return Summary(
            tuple(
                Fact(
                    r.team_id,
                    r.requested_model,
                    r.served_model,
                    r.cache_status,
                    int(r.requests),
                    int(r.errors),
                    int(r.prompt_tokens),
                    int(r.completion_tokens),
                    from_pico(int(r.cost_pusd)),
                    from_pico(int(r.saved_pusd)),
                )
                for r in rows
            )
        )

    async def spend_series(self, window: Window, dimension: str, names: Mapping[str, str]) -> list[Series]:
        """Spend per day, one series per team (`team_id`) or model (`served_model`)."""
        labels = window.labels()
        index = {d: i for i, d in enumerate(labels)}
        values: dict[str, list[Decimal]] = {}
        for r in await self._rows(window, "day", dimension):
            name = names.get(r[1], r[1]) or "(none)"
            values.setdefault(name, [ZERO] * len(labels))[index[r.day]] += from_pico(int(r.cost_pusd))
        return [Series(n, tuple(v)) for n, v in values.items()]

    async def recent(self, names: Mapping[str, str], limit: int = 50) -> list[RecentRequest]:
        """The newest ledger rows (the ledger holds no prompt or completion text)."""
        query = (
            select(
                ledger.c.request_id,
                ledger.c.created_at,
                ledger.c.team_id,
                ledger.c.key_id,
                ledger.c.user,
                ledger.c.tags,
                ledger.c.endpoint,
                ledger.c.requested_model,
                ledger.c.served_model,
                ledger.c.prompt_tokens,
                ledger.c.completion_tokens,
                ledger.c.cost_pusd,
                ledger.c.cache_status,
                ledger.c.status,
                ledger.c.latency_ms,
            )
            .order_by(ledger.c.created_at.desc())
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            rows = list(await conn.execute(query))
        return [
            RecentRequest(
                r.request_id,
                r.created_at,
                names.get(r.team_id or "", r.team_id or "(no key)"),
                r.key_id,
                r.user,
                (r.tags or "").strip(","),
                r.endpoint,
                r.requested_model,
                r.served_model,
                r.prompt_tokens,
                r.completion_tokens,
                from_pico(r.cost_pusd),
                r.cache_status,
                r.status,
                r.latency_ms,
            )
            for r in rows
        ]
