"""The rate-limit stage over a real SpendControl: the plan's model rule (free keys: cheap models
only), the limits it names for the budget stage to count (key and team, requests and tokens, as
the plan and the config set them), and the tarpit. Counting itself is the budget stage's."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gateway.core.context import Endpoint
from gateway.core.errors import PermissionDenied
from gateway.stages.ratelimit import RateLimit
from policies.rate_limits import Limit, RateCheck, estimate_tokens
from tests.gateway.fakes import TEAM_A, deployment, request
from tests.gateway.stages.spend import refusals, spend_control

DEPLOYMENTS = {
    "cheap": deployment("cheap", input_per_mtok="0.15", output_per_mtok="0.6"),
    "pricey": deployment("pricey", input_per_mtok="2.5", output_per_mtok="10"),
}
BODY = {"model": "cheap", "messages": [{"role": "user", "content": "How many tokens is this question?"}]}
TOKENS = estimate_tokens(BODY)
FREE = dataclasses.replace(TEAM_A, plan="free")


@pytest.mark.parametrize(
    "plan, model, allowed",
    [
        ("free", "cheap", True),
        ("free", "pricey", False),  # $10 per million output tokens: above the free plan's $1
        ("free", "auto", False),  # a cascade has no single price: only an explicit allowlist admits it
        ("pro", "pricey", True),
        ("enterprise", "auto", True),
    ],
)
async def test_the_plan_decides_which_models_a_key_may_use(
    tmp_path: Path, plan: str, model: str, allowed: bool
) -> None:
    async with spend_control(tmp_path) as control:
        ctx = request({**BODY, "model": model}, principal=dataclasses.replace(TEAM_A, plan=plan), requested_model=model)
        if allowed:
            assert await RateLimit(control, DEPLOYMENTS)(ctx) is None
            return
        with pytest.raises(PermissionDenied) as refused:
            await RateLimit(control, DEPLOYMENTS)(ctx)
        assert (refused.value.status, refused.value.param) == (403, "model")
        assert f"the {plan} plan may not use the model {model!r}" in refused.value.message
        assert ctx.decided.limits == ()  # refused before anything was named to count
        assert refusals(control, "plan_model", "key") == 1


async def test_a_plans_allowlist_admits_a_cascade(tmp_path: Path) -> None:
    async with spend_control(tmp_path, plans={"free": {"models": ["auto", "cheap"]}}) as control:
        ctx = request({**BODY, "model": "auto"}, principal=FREE, requested_model="auto")
        assert await RateLimit(control, DEPLOYMENTS)(ctx) is None


def checks(*wanted: tuple[Limit, str, int, int]) -> tuple[RateCheck, ...]:
    return tuple(RateCheck(*w) for w in wanted)


RPM, TPM, TPD = Limit.REQUESTS_PER_MINUTE, Limit.TOKENS_PER_MINUTE, Limit.TOKENS_PER_DAY


@pytest.mark.parametrize(
    "plan, config, named",
    [
        ("enterprise", {}, ()),  # no limits at all: nothing to count
        ("pro", {}, checks((TPD, "key:key_a1", 100_000_000, TOKENS))),
        (
            "free",
            {},
            checks(
                (RPM, "key:key_a1", 20, 1), (TPM, "key:key_a1", 40_000, TOKENS), (TPD, "key:key_a1", 200_000, TOKENS)
            ),
        ),
        (
            "free",
            {"plans": {"free": {"requests_per_minute": None, "tokens_per_day": 500}}},
            checks((TPM, "key:key_a1", 40_000, TOKENS), (TPD, "key:key_a1", 500, TOKENS)),
        ),
        (
            "enterprise",
            {"rate_limits": {"team": {"requests_per_minute": 1000}}},
            checks((RPM, "team:team_a1", 1000, 1)),
        ),  # every team's default
        (
            "enterprise",
            {
                "rate_limits": {
                    "team": {"requests_per_minute": 1000},
                    "teams": {"team-a": {"requests_per_minute": 3, "tokens_per_minute": 900}},
                }
            },
            checks((RPM, "team:team_a1", 3, 1), (TPM, "team:team_a1", 900, TOKENS)),
        ),  # by team name
        (
            "enterprise",
            {"rate_limits": {"teams": {"team_a1": {"tokens_per_minute": 50}}}},
            checks((TPM, "team:team_a1", 50, TOKENS)),
        ),  # or by team id
    ],
)
async def test_the_limits_named_for_the_budget_stage_to_count(
    tmp_path: Path, plan: str, config: dict[str, Any], named: tuple[RateCheck, ...]
) -> None:
    async with spend_control(tmp_path, **config) as control:
        ctx = request(BODY, principal=dataclasses.replace(TEAM_A, plan=plan), requested_model="cheap")
        assert await RateLimit(control, DEPLOYMENTS)(ctx) is None
        assert ctx.decided.limits == named
        assert ctx.decided.hold is None  # named, not counted: that is the budget stage's one store call


@pytest.mark.parametrize(
    "endpoint, body, tarpitted",
    [
        (Endpoint.CHAT, BODY, True),
        (Endpoint.COMPLETIONS, {"model": "cheap", "prompt": "x"}, True),
        (Endpoint.EMBEDDINGS, {"model": "cheap", "input": "x"}, False),  # embeddings are not slowed
    ],
)
async def test_the_free_plans_tarpit_holds_a_request_back(
    tmp_path: Path, endpoint: Endpoint, body: dict[str, Any], tarpitted: bool
) -> None:
    async with spend_control(tmp_path, plans={"free": {"tarpit_s": 60}}) as control:
        ctx = request(body, endpoint=endpoint, principal=FREE, requested_model="cheap")
        task = asyncio.create_task(RateLimit(control, DEPLOYMENTS)(ctx))
        await asyncio.sleep(0)  # one step of the loop: the stage runs until it waits, if it does
        assert task.done() is not tarpitted  # a 60 s tarpit cannot have passed in one step
        assert len(ctx.decided.limits) == 3  # the limits were named before the wait
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            assert await task is None
