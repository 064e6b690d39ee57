"""The admin API (DESIGN.md contract): teams, keys, spend. JSON in and out, money as decimal
strings, authorized by the admin key alone."""

from __future__ import annotations

import os
from datetime import datetime
from decimal import Decimal
from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field, FiniteFloat

from gateway.core.errors import AuthenticationFailed, InvalidRequest
from gateway.edge.guard import bearer_matches
from gateway.providers.cost_reports import BASE_VARIABLES, KEY_VARIABLES
from gateway.reconciler import reconcile_month
from gateway.service import gateway_of
from gateway.storage.keys import KeyRecord
from gateway.storage.ledger import spend
from policies.pricing import format_usd


def require_admin(request: Request) -> None:
    """RequestGuard checked this before the body was read; checked again here so that no
    admin route depends on how the app was assembled."""
    if not bearer_matches(request.headers.get("authorization"), gateway_of(request).admin_key):
        raise AuthenticationFailed("admin routes need the admin key", code="invalid_admin_key")


router = APIRouter(prefix="/admin", dependencies=[Depends(require_admin)])


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TeamIn(_In):
    name: str = Field(min_length=1, max_length=200)


class KeyIn(_In):
    team: str = Field(min_length=1)
    name: str | None = Field(default=None, max_length=200)
    models: list[str] | None = None
    plan: Literal["free", "pro", "enterprise"] = "pro"
    tags: list[str] | None = None
    expires_at: datetime | FiniteFloat | None = None  # NaN or inf would make a key that never expires


def _timestamp(value: datetime | float | None) -> float | None:
    if value is None or isinstance(value, float | int):
        return value
    return value.timestamp()


def _key_json(k: KeyRecord) -> dict:
    return {
        "id": k.id,
        "team_id": k.team_id,
        "name": k.name,
        "prefix": k.prefix,
        "models": k.models,
        "plan": k.plan,
        "tags": k.tags,
        "expires_at": k.expires_at,
        "revoked": k.revoked_at is not None,
        "created_at": k.created_at,
    }


@router.post("/teams")
async def create_team(body: TeamIn, request: Request) -> dict:
    team = await gateway_of(request).keys.create_team(body.name)
    return {"id": team.id, "name": team.name}


@router.get("/teams")
async def list_teams(request: Request) -> dict:
    teams = await gateway_of(request).keys.list_teams()
    return {"data": [{"id": t.id, "name": t.name} for t in teams]}


@router.post("/keys")
async def create_key(body: KeyIn, request: Request) -> dict:
    gateway = gateway_of(request)
    unknown = [m for m in body.models or () if m not in gateway.targets]
    if unknown:
        raise InvalidRequest(f"unknown models {unknown}", param="models")
    record, secret = await gateway.keys.create_key(
        body.team,
        name=body.name,
        models=body.models,
        plan=body.plan,
        tags=body.tags,
        expires_at=_timestamp(body.expires_at),
    )
    return {"id": record.id, "key": secret, "team_id": record.team_id}


@router.get("/keys")
async def list_keys(request: Request, team: str | None = None) -> dict:
    keys = gateway_of(request).keys
    team_id = (await keys.find_team(team)).id if team else None
    return {"data": [_key_json(k) for k in await keys.list_keys(team_id)]}


@router.delete("/keys/{key_id}")
async def revoke_key(key_id: str, request: Request) -> dict:
    await gateway_of(request).keys.revoke(key_id)
    return {"id": key_id, "revoked": True}


@router.post("/keys/{key_id}/rotate")
async def rotate_key(key_id: str, request: Request) -> dict:
    secret = await gateway_of(request).keys.rotate(key_id)
    return {"id": key_id, "key": secret}


@router.get("/reconcile")
async def reconcile(
    request: Request,
    provider: Literal["openai", "anthropic"],
    month: str = Query(pattern=r"^\d{4}-(0[1-9]|1[0-2])$"),
    model: list[str] = Query(default=[]),
) -> dict:
    """The ledger against the provider's cost report, per day and model (docs/budgets.md)."""
    key = os.environ.get(KEY_VARIABLES[provider])
    if not key:
        raise InvalidRequest(f"set {KEY_VARIABLES[provider]} in the gateway's environment to the provider's admin key")
    gateway = gateway_of(request)
    await gateway.ledger.flush()
    base = os.environ.get(BASE_VARIABLES[provider])
    lines = await reconcile_month(gateway.db, gateway.settings.models, provider, month, key, base, tuple(model))
    return {
        "provider": provider,
        "month": month,
        "rows": [
            {
                "day": line.day,
                "model": line.model,
                "ledger_usd": format_usd(line.ledger_usd),
                "provider_usd": format_usd(line.provider_usd),
                "difference_usd": format_usd(line.difference_usd),
            }
            for line in lines
        ],
        "ledger_usd": format_usd(sum((line.ledger_usd for line in lines), Decimal(0))),
        "provider_usd": format_usd(sum((line.provider_usd for line in lines), Decimal(0))),
    }


@router.get("/spend")
async def get_spend(
    request: Request,
    group_by: Literal["team", "key", "model", "tag", "day"] = "team",
    start: str | None = Query(default=None, pattern=r"^\d{4}-\d{2}-\d{2}"),
    end: str | None = Query(default=None, pattern=r"^\d{4}-\d{2}-\d{2}"),
) -> dict:
    gateway = gateway_of(request)
    await gateway.ledger.flush()
    rows = await spend(gateway.db, group_by, start, end)
    total = (
        sum((r.cost_usd for r in rows), Decimal(0))
        if group_by != "tag"
        else sum((r.cost_usd for r in await spend(gateway.db, "team", start, end)), Decimal(0))
    )
    return {
        "rows": [
            {
                "group": r.group,
                "requests": r.requests,
                "prompt_tokens": r.prompt_tokens,
                "completion_tokens": r.completion_tokens,
                "cost_usd": format_usd(r.cost_usd),
                "saved_usd": format_usd(r.saved_usd),
                "provider_cache_saved_usd": format_usd(r.provider_cache_saved_usd),
                "provider_batch_saved_usd": format_usd(r.provider_batch_saved_usd),
            }
            for r in rows
        ],
        "total_usd": format_usd(total),
    }
