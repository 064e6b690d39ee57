"""The cache per team, from the ledger and the feedback table: what GET /admin/cache/teams and
/admin/cache/hits answer, and what the dashboard's Cache page shows.

For each team, over the requests made in a window: the answered requests (status < 400: a
refused request never reached the cache), how many were exact and semantic hits, the dollars
those hits saved (the ledger's `saved_pusd`: what the answer had cost when it was first paid
for), and the verdicts reported on them through POST /v1/feedback or the dashboard — a hit
reported wrong is a *reported false hit*. Verdicts are counted by when their request was made,
like the hits, so the reported false-hit rate is reported false hits / hits of the same window.
It is a floor on the true false-hit rate: most wrong answers are never reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from sqlalchemy import and_, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.storage.db import ledger
from gateway.storage.verdict_store import feedback
from policies.pricing import from_pico

HITS = ("exact", "semantic")


@dataclass(slots=True)
class TeamCache:
    team_id: str
    requests: int = 0  # answered requests
    hits: dict[str, int] = field(default_factory=lambda: dict.fromkeys(HITS, 0))
    saved: Decimal = Decimal(0)  # by hits
    reported_wrong: dict[str, int] = field(default_factory=lambda: dict.fromkeys(HITS, 0))  # false hits
    reported_right: dict[str, int] = field(default_factory=lambda: dict.fromkeys(HITS, 0))

    def rate(self, kind: str | None = None) -> float:
        """Hits (of one kind, or all) per answered request."""
        hits = self.hits[kind] if kind else sum(self.hits.values())
        return hits / self.requests if self.requests else 0.0

    @property
    def false_hits(self) -> int:
        return sum(self.reported_wrong.values())

    @property
    def false_hit_rate(self) -> float:
        """Reported false hits per hit: a floor on the true rate (not every wrong answer is reported)."""
        hits = sum(self.hits.values())
        return self.false_hits / hits if hits else 0.0


@dataclass(frozen=True, slots=True)
class ServedHit:
    """One answered request the cache served, with its verdict if it got one."""

    request_id: str
    created_at: float
    team_id: str
    requested_model: str | None
    served_model: str | None
    kind: str  # exact | semantic
    saved: Decimal
    verdict: str | None  # wrong | right | None


async def team_cache(engine: AsyncEngine, since: float, until: float) -> list[TeamCache]:
    """Every team that had an answered request in [since, until), most requests first."""
    c, f = ledger.c, feedback.c
    answered = (c.created_at >= since, c.created_at < until, c.team_id.is_not(None), c.status < 400)
    by_status = (
        select(
            c.team_id,
            c.cache_status,
            func.count().label("n"),
            func.coalesce(func.sum(c.saved_pusd), 0).label("saved"),
        )
        .where(*answered)
        .group_by(c.team_id, c.cache_status)
    )
    verdicts = (
        select(f.team_id, f.cache_status, f.verdict, func.count().label("n"))
        .where(f.requested_at >= since, f.requested_at < until, f.cache_status.in_(HITS))
        .group_by(f.team_id, f.cache_status, f.verdict)
    )
    teams: dict[str, TeamCache] = {}
    async with engine.connect() as conn:
        for r in await conn.execute(by_status):
            team = teams.setdefault(r.team_id, TeamCache(r.team_id))
            team.requests += int(r.n)
            if r.cache_status in HITS:
                team.hits[r.cache_status] += int(r.n)
                team.saved += from_pico(int(r.saved))
        for r in await conn.execute(verdicts):
            team = teams.setdefault(r.team_id, TeamCache(r.team_id))
            (team.reported_wrong if r.verdict == "wrong" else team.reported_right)[r.cache_status] += int(r.n)
    return sorted(teams.values(), key=lambda t: (-t.requests, t.team_id))


async def recent_hits(engine: AsyncEngine, team_id: str | None = None, limit: int = 50) -> list[ServedHit]:
    """The newest answered cache hits (of one team, or all), newest first, with their verdicts."""
    c, f = ledger.c, feedback.c
    query = (
        select(
            c.request_id,
            c.created_at,
            c.team_id,
            c.requested_model,
            c.served_model,
            c.cache_status,
            c.saved_pusd,
            f.verdict,
        )
        .select_from(ledger.outerjoin(feedback, and_(f.request_id == c.request_id)))
        .where(c.cache_status.in_(HITS), c.status < 400, c.team_id.is_not(None))
        .order_by(c.created_at.desc())
        .limit(limit)
    )
    if team_id is not None:
        query = query.where(c.team_id == team_id)
    async with engine.connect() as conn:
        rows = list(await conn.execute(query))
    return [
        ServedHit(
            r.request_id,
            r.created_at,
            r.team_id,
            r.requested_model,
            r.served_model,
            r.cache_status,
            from_pico(int(r.saved_pusd)),
            r.verdict,
        )
        for r in rows
    ]
