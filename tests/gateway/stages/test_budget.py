"""The budget stage over a real SpendControl (budgets in SQLite, counters in the in-process
store): the worst case held against every budget that applies before any upstream call, the
402 when it does not fit, the rate limits counted in the same call (429), settle committing
the true cost and releasing the rest, token counts corrected to the truth, and the store
outage failing closed or open as configured. The route target is faked: it only prices."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from starlette.responses import Response

from gateway.core.context import Principal, RequestContext
from gateway.core.errors import BudgetExceeded, RateLimited, Unavailable
from gateway.spend.spend_control import SpendControl
from gateway.stages.budget import ReserveBudget
from gateway.stages.ratelimit import RateLimit
from policies.budgets import Budget, Period, Scope
from policies.pricing import Bill, Usage, to_pico
from tests.gateway.fakes import TEAM_A, deployment, request
from tests.gateway.stages.spend import refusals, spend_control

WORST_CASE = Decimal("0.004")
SOME_USAGE = Usage(10, 5)


class PricedTarget:
    """A route target that only prices: the stage needs its worst case, never its answer."""

    def __init__(self, worst_case: Decimal = WORST_CASE) -> None:
        self.worst_case = worst_case

    async def answer(self, ctx: RequestContext) -> Response:
        raise AssertionError("the budget stage never calls the upstream")

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        return self.worst_case


TARGETS = {"small": PricedTarget()}
DEPLOYMENTS = {"small": deployment("small", input_per_mtok="0.15", output_per_mtok="0.6")}  # free keys may use it


async def budget(
    control: SpendControl, scope: Scope, subject: str, usd: str, period: Period = Period.MONTHLY
) -> Budget:
    return await control.table.put(Budget(scope, subject, period, to_pico(Decimal(usd))))


async def state(control: SpendControl, b: Budget) -> tuple[Decimal, Decimal]:
    """(spent, reserved) of a budget in its current period, in dollars."""
    [view] = await control.view([b])
    return Decimal(view.state.spent_pusd) / 10**12, Decimal(view.state.reserved_pusd) / 10**12


async def admitted(control: SpendControl, principal: Principal = TEAM_A, **fields: Any) -> RequestContext:
    """A request through the rate-limit and budget stages, as the pipeline runs them."""
    ctx = request(principal=principal, requested_model="small", **fields)
    await RateLimit(control, DEPLOYMENTS)(ctx)
    assert await ReserveBudget(control, TARGETS)(ctx) is None
    return ctx


def answered(ctx: RequestContext, cost: str, usage: Usage = SOME_USAGE) -> RequestContext:
    ctx.meter.add_call("small", usage, Bill(Decimal(cost)))
    return ctx


async def test_without_budgets_or_limits_nothing_is_held(tmp_path: Path) -> None:
    async with spend_control(tmp_path) as control:
        ctx = await admitted(control, dataclasses.replace(TEAM_A, plan="enterprise"))
        assert ctx.decided.hold is None
        await ReserveBudget(control, TARGETS).settle(answered(ctx, "0.001"))  # nothing to settle: no error


async def test_the_worst_case_is_held_then_settled_to_the_true_cost(tmp_path: Path) -> None:
    async with spend_control(tmp_path) as control:
        team = await budget(control, Scope.TEAM, "team_a1", "1")
        ctx = await admitted(control)
        hold = ctx.decided.hold
        assert hold is not None and hold.held and hold.want_pusd == to_pico(WORST_CASE)
        assert [b.id for b in hold.budgets] == [team.id]
        assert await state(control, team) == (0, WORST_CASE)  # held before any upstream call
        await ReserveBudget(control, TARGETS).settle(answered(ctx, "0.0013"))
        assert await state(control, team) == (Decimal("0.0013"), 0)  # the true cost; the rest released


async def test_every_budget_that_applies_is_held(tmp_path: Path) -> None:
    async with spend_control(tmp_path) as control:
        held = [
            await budget(control, Scope.TEAM, "team_a1", "1"),
            await budget(control, Scope.KEY, "key_a1", "1", Period.DAILY),
            await budget(control, Scope.USER, "alice", "1"),
            await budget(control, Scope.TAG, "project=zeta", "1"),
        ]
        other = await budget(control, Scope.TAG, "project=omega", "1")
        ctx = await admitted(control, user="alice", tags=("project=zeta",))
        await ReserveBudget(control, TARGETS).settle(answered(ctx, "0.002"))
        for b in held:
            assert await state(control, b) == (Decimal("0.002"), 0)
        assert await state(control, other) == (0, 0)


async def test_a_worst_case_that_does_not_fit_is_refused_before_the_call(tmp_path: Path) -> None:
    async with spend_control(tmp_path) as control:
        team = await budget(control, Scope.TEAM, "team_a1", "0.005")
        first = await admitted(control)  # holds 0.004 of 0.005
        ctx = request(principal=TEAM_A, requested_model="small")
        with pytest.raises(BudgetExceeded) as refused:
            await ReserveBudget(control, TARGETS)(ctx)
        err = refused.value
        assert (err.status, err.code) == (402, "budget_exceeded")
        assert err.message == (
            "the monthly budget of team 'team-a' has spent $0 (and $0.004 held for requests in "
            "flight) of its limit $0.005; this request needs up to its worst case $0.004, "
            "which does not fit"
        )
        assert ctx.decided.hold is None and refusals(control, "budget", "team") == 1
        # the first request settles for less: its release makes room again
        await ReserveBudget(control, TARGETS).settle(answered(first, "0.0005"))
        assert await state(control, team) == (Decimal("0.0005"), 0)
        assert (await admitted(control)).decided.hold is not None


async def test_a_free_keys_dollar_cap_is_a_budget_of_its_own(tmp_path: Path) -> None:
    async with spend_control(tmp_path, plans={"free": {"dollar_cap_usd": "0.003"}}) as control:
        ctx = request(principal=dataclasses.replace(TEAM_A, plan="free"), requested_model="small")
        await RateLimit(control, DEPLOYMENTS)(ctx)
        with pytest.raises(BudgetExceeded) as refused:
            await ReserveBudget(control, TARGETS)(ctx)
        assert refused.value.message == (
            "the total budget of key 'key_a1' has spent $0 of its limit $0.003; this "
            "request needs up to its worst case $0.004, which does not fit"
        )


async def test_a_failed_request_releases_its_whole_hold(tmp_path: Path) -> None:
    async with spend_control(tmp_path) as control:
        team = await budget(control, Scope.TEAM, "team_a1", "1")
        ctx = await admitted(control)
        ctx.outcome.status_code, ctx.outcome.error = 502, "upstream failed"  # charged nothing
        await ReserveBudget(control, TARGETS).settle(ctx)
        assert await state(control, team) == (0, 0)


async def test_a_rate_limit_is_counted_in_the_same_call_and_refused_with_retry_after(tmp_path: Path) -> None:
    limits = {"rate_limits": {"teams": {"team-a": {"requests_per_minute": 2}}}}
    async with spend_control(tmp_path, **limits) as control:
        team = await budget(control, Scope.TEAM, "team_a1", "1")
        for _ in range(2):
            await ReserveBudget(control, TARGETS).settle(answered(await admitted(control), "0.001"))
        ctx = request(principal=TEAM_A, requested_model="small")
        await RateLimit(control, DEPLOYMENTS)(ctx)
        with pytest.raises(RateLimited) as refused:
            await ReserveBudget(control, TARGETS)(ctx)
        err = refused.value
        assert (err.status, err.code) == (429, "rate_limit_exceeded")
        assert err.retry_after is not None and 1 <= err.retry_after <= 60
        assert "2 requests per minute for this team" in err.message
        assert refusals(control, "rpm", "team") == 1
        assert await state(control, team) == (Decimal("0.002"), 0)  # the refused one held nothing


async def test_a_budget_refusal_is_not_counted_against_the_rate_limits(tmp_path: Path) -> None:
    limits = {"rate_limits": {"teams": {"team-a": {"requests_per_minute": 1}}}}
    async with spend_control(tmp_path, **limits) as control:
        team = await budget(control, Scope.TEAM, "team_a1", "0.001")  # below the worst case: always 402
        for _ in range(3):
            ctx = request(principal=TEAM_A, requested_model="small")
            await RateLimit(control, DEPLOYMENTS)(ctx)
            with pytest.raises(BudgetExceeded):
                await ReserveBudget(control, TARGETS)(ctx)
        await control.table.delete(team.id or "")
        assert (await admitted(control)).decided.hold is not None  # its one request a minute is still free


async def test_token_limits_are_corrected_to_the_true_usage_at_settle(tmp_path: Path) -> None:
    limits = {"rate_limits": {"teams": {"team-a": {"tokens_per_minute": 100}}}}
    async with spend_control(tmp_path, **limits) as control:
        first = await admitted(control)  # counted as its prompt's estimate: a few tokens
        estimate = first.decided.limits[0].amount
        assert estimate == 5
        await ReserveBudget(control, TARGETS).settle(answered(first, "0.001", Usage(80, 16)))  # truly 96
        ctx = request(principal=TEAM_A, requested_model="small")
        await RateLimit(control, DEPLOYMENTS)(ctx)
        with pytest.raises(RateLimited) as refused:  # 96 + 5 > 100; uncorrected, 5 + 5 would pass
            await ReserveBudget(control, TARGETS)(ctx)
        assert "100 tokens per minute for this team" in refused.value.message


@pytest.mark.parametrize("mode", ["closed", "open"])
async def test_an_unreachable_store_fails_closed_or_open_as_configured(tmp_path: Path, mode: str) -> None:
    # Nothing listens on port 1: every counter call fails at once.
    dead = {
        "redis_url": "redis://127.0.0.1:1/0",
        "budgets": {"backend": "redis", "on_store_error": mode, "redis_timeout_s": 0.5},
    }
    async with spend_control(tmp_path, **dead) as control:
        await budget(control, Scope.TEAM, "team_a1", "1")
        ctx = request(principal=TEAM_A, requested_model="small")
        await RateLimit(control, DEPLOYMENTS)(ctx)
        stage = ReserveBudget(control, TARGETS)
        if mode == "closed":
            with pytest.raises(Unavailable) as refused:
                await stage(ctx)
            err = refused.value
            assert (err.status, err.code, err.retry_after) == (503, "budget_store_unavailable", 1)
            assert ctx.decided.hold is None
        else:
            assert await stage(ctx) is None
            hold = ctx.decided.hold
            assert hold is not None and not hold.held  # served uncounted; settle still records the cost
            await stage.settle(answered(ctx, "0.001"))  # queued for when the store is back, never raised
            assert len(control.unsettled) == 1
