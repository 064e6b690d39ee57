"""The config sections of budgets, plans and rate limits (gateway/config/limits_config.py): a plan's
override carries only the fields the config wrote (so the rest keep their defaults), an
explicit null lifts a limit, and out-of-range values are refused when the config loads."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pydantic
import pytest

from gateway.config.limits_config import BudgetSettings, PlanSettings, RateLimitSettings
from policies.plans import DEFAULT_PLANS, plans_with


@pytest.mark.parametrize(
    "written, overrides",
    [
        ({}, {}),
        ({"tarpit_s": 0.5}, {"tarpit_s": 0.5}),
        ({"dollar_cap_usd": "2.50"}, {"dollar_cap": Decimal("2.50")}),  # named as the Plan names it
        ({"requests_per_minute": None}, {"requests_per_minute": None}),  # written null: lifted, not left alone
        ({"models": ["small"], "max_output_per_mtok": 1}, {"models": ["small"], "max_output_per_mtok": Decimal(1)}),
    ],
)
def test_a_plan_override_is_only_what_the_config_wrote(written: dict[str, Any], overrides: dict[str, Any]) -> None:
    assert PlanSettings.model_validate(written).overrides() == overrides


def test_an_override_changes_its_fields_and_keeps_the_plans_other_defaults() -> None:
    free = DEFAULT_PLANS["free"]
    settings = {
        "free": PlanSettings.model_validate({"requests_per_minute": None, "dollar_cap_usd": "5"}),
        "team-plan": PlanSettings.model_validate({"tokens_per_minute": 1000}),
    }
    plans = plans_with({name: p.overrides() for name, p in settings.items()})
    assert plans["free"].requests_per_minute is None and plans["free"].dollar_cap == Decimal(5)
    assert plans["free"].tokens_per_day == free.tokens_per_day  # not written: the default stays
    assert plans["free"].max_output_per_mtok == free.max_output_per_mtok
    assert plans["team-plan"].tokens_per_minute == 1000 and plans["team-plan"].tokens_per_day is None
    assert plans["pro"] == DEFAULT_PLANS["pro"]


@pytest.mark.parametrize(
    "model, written",
    [
        (PlanSettings, {"tarpit_s": 61}),  # a tarpit longer than a minute holds connections, not abusers
        (PlanSettings, {"tarpit_s": -1}),
        (PlanSettings, {"requests_per_minute": -5}),
        (PlanSettings, {"requests_per_mintue": 5}),  # a typo is an error, not a silently unlimited plan
        (BudgetSettings, {"reservation_timeout_s": 0}),
        (BudgetSettings, {"on_store_error": "maybe"}),
        (BudgetSettings, {"backend": "postgres"}),
        (RateLimitSettings, {"team": {"requests_per_minute": -1}}),
        (RateLimitSettings, {"teams": {"search": {"rpm": 5}}}),
    ],
)
def test_bad_values_are_refused_when_the_config_loads(model: type[pydantic.BaseModel], written: dict) -> None:
    with pytest.raises(pydantic.ValidationError):
        model.model_validate(written)
