"""Admin routes for the response cache: its size, and purging a team's entries."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gateway.errors import InvalidRequest
from gateway.routes.admin import require_admin

router = APIRouter(prefix="/admin", dependencies=[Depends(require_admin)])


@router.get("/cache")
async def cache_stats(request: Request) -> dict:
    cache = request.app.state.gateway.cache
    return {
        "entries": await cache.store.count(),
        "backend": cache.backend,
        "exact": cache.base.exact,
        "semantic": cache.base.semantic,
        "max_false_hit_rate": cache.base.max_false_hit_rate,
    }


@router.delete("/cache")
async def purge_cache(request: Request, team: str | None = None, all: bool = False) -> dict:
    """`?team=<id or name>` removes that team's entries; `?all=true` empties the cache."""
    gateway = request.app.state.gateway
    if team is None and not all:
        raise InvalidRequest("name a team (?team=...) or ask for all=true", param="team")
    team_id = None if team is None else (await gateway.keys.find_team(team)).id
    removed = await gateway.cache.purge(team_id)
    return {"team": team, "removed": removed}
