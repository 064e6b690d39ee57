"""Admin routes for the response cache: its size, purging a team's entries, and per team its hits,
savings and reported false hits (issue 12), with the newest hits to report."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Query, Request

from gateway.core.errors import InvalidRequest
from gateway.routes.admin import require_admin
from gateway.service import gateway_of
from gateway.storage.cache_report import recent_hits, team_cache
from policies.exact_cache import CachePolicy
from policies.pricing import format_usd

router = APIRouter(prefix="/admin", dependencies=[Depends(require_admin)])


@router.get("/cache")
async def cache_stats(request: Request) -> dict:
    """Its size and backend, the settings every team gets, and each team's own where it has some
    (cache.teams: the settings its requests are served by, overrides merged in)."""
    cache = gateway_of(request).cache
    return {
        "entries": await cache.store.count(),
        "backend": cache.backend,
        **_policy(cache.base),
        "teams": {name: _policy(policy) for name, policy in cache.teams.items()},
    }


def _policy(policy: CachePolicy) -> dict:
    return {
        "exact": policy.exact,
        "semantic": policy.semantic,
        "max_false_hit_rate": policy.max_false_hit_rate,
        "max_temperature": policy.max_temperature,
        "ttl_s": policy.ttl_s,
        "verifier": policy.verifier or "shipped",
    }


@router.delete("/cache")
async def purge_cache(request: Request, team: str | None = None, all: bool = False) -> dict:
    """`?team=<id or name>` removes that team's entries; `?all=true` empties the cache."""
    gateway = gateway_of(request)
    if team is None and not all:
        raise InvalidRequest("name a team (?team=...) or ask for all=true", param="team")
    team_id = None if team is None else (await gateway.keys.find_team(team)).id
    removed = await gateway.cache.purge(team_id)
    return {"team": team, "removed": removed}


def _since(days: int, now: float) -> float:
    """The start of the window: midnight UTC `days - 1` days before today (the dashboard's windows)."""
    return (now // 86400 - (days - 1)) * 86400


@router.get("/cache/teams")
async def cache_teams(request: Request, days: int = Query(default=30, ge=1, le=366)) -> dict:
    """Per team, over the requests of the last `days` UTC days: hits, hit rates, dollars saved by
    hits, and verdicts reported on hits (gateway/storage/cache_report.py)."""
    gateway = gateway_of(request)
    await gateway.ledger.flush()
    now = time.time()
    since = _since(days, now)
    names = {t.id: t.name for t in await gateway.keys.list_teams()}
    return {
        "since": since,
        "until": now,
        "data": [
            {
                "team_id": t.team_id,
                "team": names.get(t.team_id, t.team_id),
                "requests": t.requests,
                "hits": t.hits,
                "hit_rate": t.rate(),
                "exact_hit_rate": t.rate("exact"),
                "semantic_hit_rate": t.rate("semantic"),
                "saved_usd": format_usd(t.saved),
                "reported_false_hits": t.reported_wrong,
                "reported_right_hits": t.reported_right,
                "reported_false_hit_rate": t.false_hit_rate,
            }
            for t in await team_cache(gateway.db, since, now + 1)
        ],
    }


@router.get("/cache/hits")
async def cache_hits(request: Request, team: str | None = None, limit: int = Query(default=50, ge=1, le=500)) -> dict:
    """The newest answered cache hits (`?team=<id or name>` for one team's), each with its verdict:
    what a report (POST /admin/feedback) takes the request id from."""
    gateway = gateway_of(request)
    await gateway.ledger.flush()
    team_id = None if team is None else (await gateway.keys.find_team(team)).id
    names = {t.id: t.name for t in await gateway.keys.list_teams()}
    return {
        "data": [
            {
                "request_id": h.request_id,
                "created_at": h.created_at,
                "team_id": h.team_id,
                "team": names.get(h.team_id, h.team_id),
                "requested_model": h.requested_model,
                "served_model": h.served_model,
                "cache": h.kind,
                "saved_usd": format_usd(h.saved),
                "verdict": h.verdict,
            }
            for h in await recent_hits(gateway.db, team_id, limit)
        ]
    }
