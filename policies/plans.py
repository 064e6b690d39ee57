"""Plans (free / pro / enterprise): default rate limits, daily token quotas, which models a
key may use, a hard dollar cap and a tarpit delay. Pure data and predicates."""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from policies.pricing import MILLION, Price


@dataclass(frozen=True, slots=True)
class Plan:
    name: str
    requests_per_minute: int | None = None  # None: unlimited
    tokens_per_minute: int | None = None
    tokens_per_day: int | None = None
    # Only models whose output price per million tokens is at most this ("cheap models").
    max_output_per_mtok: Decimal | None = None
    models: frozenset[str] | None = None  # an explicit allowlist, on top of the price rule
    dollar_cap: Decimal | None = None  # a hard lifetime cap per key, in dollars
    tarpit_s: float = 0.0  # a delay added to every request (discourages abuse of free keys)

    def allows_model(self, model: str, price: Price | None) -> bool:
        """Whether a key on this plan may call `model` (priced `price`; None for a target
        with no single price, such as a cascade, which only an explicit allowlist admits
        when a price rule is set)."""
        if self.models is not None and model not in self.models:
            return False
        if self.max_output_per_mtok is None:
            return True
        if price is None:
            return self.models is not None
        return price.output * MILLION <= self.max_output_per_mtok


DEFAULT_PLANS: dict[str, Plan] = {
    "free": Plan(
        "free",
        requests_per_minute=20,
        tokens_per_minute=40_000,
        tokens_per_day=200_000,
        max_output_per_mtok=Decimal("1.00"),
        dollar_cap=Decimal("1"),
    ),
    # pro: no per-minute limits by default (set them per plan or per team in the config)
    "pro": Plan("pro", tokens_per_day=100_000_000),
    "enterprise": Plan("enterprise"),
}


def plans_with(overrides: dict[str, dict[str, Any]]) -> dict[str, Plan]:
    """The default plans with the config's fields replaced (a field set to None lifts a limit)."""
    plans = dict(DEFAULT_PLANS)
    for name, fields in overrides.items():
        base = plans.get(name, Plan(name))
        if "models" in fields and fields["models"] is not None:
            fields = {**fields, "models": frozenset(fields["models"])}
        plans[name] = replace(base, name=name, **fields)
    return plans
