"""Config sections for budgets, plans, rate limits and alerts (fields of `Settings`).

```yaml
budgets: {backend: auto, on_store_error: closed, reservation_timeout_s: 900, redis_prefix: "costgate:"}
plans:                       # overrides of policies/plans.py DEFAULT_PLANS, field by field
  free: {requests_per_minute: 20, tokens_per_day: 200000, max_output_per_mtok: 1.0, dollar_cap_usd: 1, tarpit_s: 0.5}
rate_limits: {team: {requests_per_minute: 1000}, teams: {search: {tokens_per_minute: 500000}}}
alerts: {webhook_url: http://hooks.example/costgate, spend_rate_per_hour_usd: 20, total_spend_rate_per_hour_usd: 100}
```
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BudgetSettings(_Strict):
    backend: Literal["auto", "memory", "redis"] = "auto"  # auto: redis when redis_url is set
    on_store_error: Literal["closed", "open"] = "closed"  # closed: 503; open: serve uncounted
    reservation_timeout_s: float = Field(default=900.0, gt=0)  # a hold is reclaimed after this
    lease_s: float = Field(default=10.0, gt=0)  # a dead replica's holds are reclaimed this long after it dies
    journal_every_chunks: int = Field(default=16, ge=1)  # a stream's progress is journaled this often,
    journal_every_s: float = Field(
        default=1.0, gt=0
    )  # or this often, for a crash to charge (gateway/upstream/inflight.py)
    redis_prefix: str = "costgate:"
    redis_timeout_s: float = Field(default=0.5, gt=0)
    refresh_s: float = Field(default=2.0, ge=0)  # how stale another replica's budget edits may be


class PlanSettings(_Strict):
    requests_per_minute: int | None = Field(default=None, ge=0)
    tokens_per_minute: int | None = Field(default=None, ge=0)
    tokens_per_day: int | None = Field(default=None, ge=0)
    max_output_per_mtok: Decimal | None = None
    models: list[str] | None = None
    dollar_cap_usd: Decimal | None = None
    tarpit_s: float = Field(default=0.0, ge=0, le=60)

    def overrides(self) -> dict[str, Any]:
        """Only the fields the config set, named as `policies.plans.Plan` names them."""
        fields = self.model_dump(exclude_unset=True)
        if "dollar_cap_usd" in fields:
            fields["dollar_cap"] = fields.pop("dollar_cap_usd")
        return fields


class TeamLimits(_Strict):
    requests_per_minute: int | None = Field(default=None, ge=0)
    tokens_per_minute: int | None = Field(default=None, ge=0)


class RateLimitSettings(_Strict):
    team: TeamLimits = Field(default_factory=TeamLimits)  # every team's default
    teams: dict[str, TeamLimits] = Field(default_factory=dict)  # by team name or id


class AlertSettings(_Strict):
    webhook_url: str | None = None
    spend_rate_per_hour_usd: Decimal | None = None  # per team
    total_spend_rate_per_hour_usd: Decimal | None = None  # all teams together
    retries: int = Field(default=5, ge=0, le=20)
    backoff_s: float = Field(default=0.5, ge=0)
    timeout_s: float = Field(default=5.0, gt=0)
