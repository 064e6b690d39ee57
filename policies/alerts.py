"""Alert rules: which soft thresholds a budget has reached, and whether the last hour's spend
rate is over its limit. Pure; the gateway claims each alert once per period in the store and
sends it as a webhook (gateway/spend/alerting.py)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from decimal import Decimal


class AlertKind(enum.Enum):
    BUDGET_THRESHOLD = "budget_threshold"
    SPEND_RATE = "spend_rate"


def reached(spent_pusd: int, amount_pusd: int, thresholds: tuple[float, ...]) -> list[float]:
    """Every threshold (a fraction of the budget) that `spent` has reached, lowest first.
    Compared in integers: 0.8 of $1 is reached at exactly 800000000000 pico-dollars."""
    out = []
    for t in sorted(thresholds):
        # t as written (0.8, not the binary float just above it), as an exact ratio of integers
        num, den = Decimal(str(t)).as_integer_ratio()
        if spent_pusd * den >= amount_pusd * num:
            out.append(t)
    return out


def hour_key(now: float) -> str:
    return str(int(now // 3600))


def over_rate(spent_this_hour_pusd: int, limit_pusd: int | None) -> bool:
    return limit_pusd is not None and spent_this_hour_pusd >= limit_pusd


@dataclass(frozen=True, slots=True)
class Alert:
    """What the webhook receives (as JSON) and /admin/budgets shows."""

    kind: AlertKind
    subject: str  # "team:team_1", "key:key_1", "all"
    period: str  # the budget's period ("monthly") or "hourly"
    period_key: str  # "2026-11", or the hour index for spend-rate alerts
    threshold: float | None  # a budget fraction; None for a spend-rate alert
    amount_usd: str  # the budget, or the hourly rate limit
    spent_usd: str
    at: float
    budget_id: str | None = None

    def payload(self) -> dict[str, object]:
        return {
            "type": self.kind.value,
            "subject": self.subject,
            "period": self.period,
            "period_key": self.period_key,
            "threshold": self.threshold,
            "amount_usd": self.amount_usd,
            "spent_usd": self.spent_usd,
            "budget_id": self.budget_id,
            "at": self.at,
        }
