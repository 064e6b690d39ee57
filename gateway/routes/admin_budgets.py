"""Admin API for budgets and chargeback (DESIGN.md contract): `PUT/GET /admin/budgets`,
`DELETE /admin/budgets/{id}`, `GET /admin/traces/{trace_id}`, `GET /admin/chargeback.csv`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from decimal import Decimal
from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.responses import Response

from gateway.core.errors import NotFound, Unavailable
from gateway.routes.admin import require_admin
from gateway.service import gateway_of
from gateway.spend.spend_control import BudgetView
from gateway.storage.chargeback import chargeback_csv, trace
from gateway.storage.counters import StoreUnavailable
from policies.budgets import DEFAULT_ALERT_AT, Budget, Period, Scope, remaining
from policies.pricing import ZERO, format_usd, from_pico, to_pico

router = APIRouter(prefix="/admin", dependencies=[Depends(require_admin)])


class BudgetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scope: Literal["team", "key", "user", "tag"]
    id: str = Field(min_length=1, max_length=200)
    # Counters hold pico-dollars in signed 64-bit integers: $9.2M is the most one can count
    # (a larger amount answered 500 when stored).
    amount_usd: Decimal = Field(ge=0, le=Decimal("9e6"))
    period: Literal["daily", "weekly", "monthly", "total"]
    alert_at: list[float] = Field(default_factory=lambda: list(DEFAULT_ALERT_AT), max_length=10)

    @field_validator("alert_at")
    @classmethod
    def _fractions(cls, values: list[float]) -> list[float]:
        if any(not 0 < v <= 10 for v in values):
            raise ValueError("alert thresholds are fractions of the budget, above 0 (1.0 = 100%)")
        return sorted(set(values))

    @field_validator("amount_usd")
    @classmethod
    def _finite(cls, value: Decimal) -> Decimal:
        if not value.is_finite():
            raise ValueError("amount_usd must be a finite decimal")
        return value


async def _subject(request: Request, scope: Scope, given: str) -> str:
    """A team's id (given its id or name); a key's id (it must exist); a user or tag as given."""
    keys = gateway_of(request).keys
    if scope is Scope.TEAM:
        return (await keys.find_team(given)).id
    if scope is Scope.KEY:
        if not any(k.id == given for k in await keys.list_keys()):
            raise NotFound(f"no key {given!r}", code="key_not_found")
    return given


def _budget_json(view: BudgetView, team_names: dict[str, str]) -> dict[str, object]:
    b, s = view.budget, view.state
    w = view.window
    return {
        "id": b.id,
        "scope": b.scope.value,
        "subject": b.subject,
        "team_name": team_names.get(b.subject) if b.scope is Scope.TEAM else None,
        "period": b.period.value,
        "period_key": w.key,
        "period_start": w.start,
        "period_end": w.end,
        "amount_usd": format_usd(from_pico(b.amount_pusd)),
        "spent_usd": format_usd(from_pico(s.spent_pusd)),
        "reserved_usd": format_usd(from_pico(s.reserved_pusd)),
        "remaining_usd": format_usd(from_pico(remaining(s.spent_pusd, s.reserved_pusd, b.amount_pusd))),
        "alert_at": list(b.alert_at),
        "alerts": [{"threshold": float(t), "at": at} for t, at in sorted(view.alerts.items())],
    }


@asynccontextmanager
async def _store_errors() -> AsyncIterator[None]:
    """The counters live in Redis: while it is unreachable the spend cannot be shown (503)."""
    try:
        yield
    except StoreUnavailable as err:
        raise Unavailable(
            f"budget counters cannot be read right now: {err}", code="budget_store_unavailable", retry_after=1
        ) from None


@router.put("/budgets")
async def put_budget(body: BudgetIn, request: Request) -> dict[str, object]:
    spend = gateway_of(request).spend
    scope = Scope(body.scope)
    subject = await _subject(request, scope, body.id)
    stored = await spend.table.put(
        Budget(scope, subject, Period(body.period), to_pico(body.amount_usd), tuple(body.alert_at))
    )
    teams = {t.id: t.name for t in await gateway_of(request).keys.list_teams()}
    async with _store_errors():
        return _budget_json((await spend.view([stored]))[0], teams)


@router.get("/budgets")
async def list_budgets(request: Request) -> dict[str, object]:
    gateway = gateway_of(request)
    teams = {t.id: t.name for t in await gateway.keys.list_teams()}
    async with _store_errors():
        views = await gateway.spend.view(await gateway.spend.table.all())
        rates = await gateway.spend.rate_view(["all"] + [f"team:{t}" for t in teams])
    return {"data": [_budget_json(v, teams) for v in views], "spend_rate": rates}


@router.delete("/budgets/{budget_id}")
async def delete_budget(budget_id: str, request: Request) -> dict[str, object]:
    if not await gateway_of(request).spend.table.delete(budget_id):
        raise NotFound(f"no budget {budget_id!r}", code="budget_not_found")
    return {"id": budget_id, "deleted": True}


@router.get("/traces/{trace_id}")
async def get_trace(trace_id: str, request: Request) -> dict[str, object]:
    gateway = gateway_of(request)
    await gateway.ledger.flush()
    calls = await trace(gateway.db, trace_id)
    if not calls:
        raise NotFound(f"no calls recorded for trace {trace_id!r}", code="trace_not_found")
    total = sum((c.cost_usd for c in calls), ZERO)
    return {
        "trace_id": trace_id,
        "requests": len(calls),
        "cost_usd": format_usd(total),
        "prompt_tokens": sum(c.prompt_tokens for c in calls),
        "completion_tokens": sum(c.completion_tokens for c in calls),
        "calls": [c.json() for c in calls],
    }


@router.get("/chargeback.csv")
async def get_chargeback(request: Request, month: str = Query(pattern=r"^\d{4}-(0[1-9]|1[0-2])$")) -> Response:
    gateway = gateway_of(request)
    await gateway.ledger.flush()
    body = await chargeback_csv(gateway.db, month)
    return Response(
        body, media_type="text/csv", headers={"content-disposition": f'attachment; filename="chargeback-{month}.csv"'}
    )
