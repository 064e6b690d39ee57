"""Stage: reserve the request's worst-case cost against every budget that applies, before any
upstream call; settle to the true cost afterwards.

The worst case comes from the route target (`worst_case_cost`: prompt tokens x input price +
max output tokens x output price). One store call checks the rate limits the rate-limit stage
named and every budget, and holds the worst case against all of them, or nothing (402
`budget_exceeded`, 429 with retry-after). `settle` commits `ctx.cost` — the sum of the real
upstream calls, the same number the ledger row and the `x-costgate-cost-usd` header carry — and
releases the rest; a failed request commits what it was charged (usually nothing) and releases
everything. When the store is unreachable the stage fails closed (503) or open, per config.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from decimal import Decimal

import orjson
from starlette.responses import Response

from gateway.core.context import RequestContext
from gateway.core.errors import BudgetExceeded, Unavailable
from gateway.routing.target import RouteTarget
from gateway.spend.spend_control import SpendControl, budget_checks
from gateway.storage.counters import Admission, Outcome, RateAdjustment, StoreUnavailable
from gateway.upstream.inflight import held_record
from policies.budgets import Budget, Hold, Scope, distinct_by_counter
from policies.pricing import format_usd, from_pico, to_pico
from policies.rate_limits import Limit, headroom, refused_headroom

log = logging.getLogger("costgate.budgets")


class ReserveBudget:
    def __init__(self, control: SpendControl, targets: Mapping[str, RouteTarget]) -> None:
        self.control = control
        self.targets = targets

    async def __call__(self, ctx: RequestContext) -> Response | None:
        principal = ctx.principal
        assert principal is not None, "authenticate runs first"
        now = ctx.created_at  # the ledger row's time too: counters and ledger agree on the period
        budgets = distinct_by_counter(await self.control.budgets_for(principal, ctx.asked.user, ctx.tags), now)
        if not budgets and not ctx.decided.limits:
            return None
        want = to_pico(self.worst_case(ctx)) if budgets else 0
        hold = Hold("h" + secrets.token_hex(10), now, tuple(budgets), want)
        admission = Admission(
            hold.id,
            now,
            now + self.control.config.reservation_timeout_s,
            want,
            ctx.decided.limits,
            budget_checks(budgets, now),
            self.control.leases.lease(now),
            # should this replica die before the request settles (or its stream checkpoints),
            # whoever reclaims the hold charges it whole (gateway/upstream/inflight.py)
            orjson.dumps(held_record(ctx, hold)).decode() if want else None,
        )
        try:
            verdict = await self.control.admit(admission, budgets)
        except StoreUnavailable as err:
            self.control.outage("admit", err)
            if self.control.config.on_store_error == "closed":
                raise Unavailable(
                    "budgets cannot be checked right now; try again shortly",
                    code="budget_store_unavailable",
                    retry_after=1,
                ) from None
            ctx.decided.hold = Hold(hold.id, now, hold.budgets, want, held=False)
            return None
        if verdict.outcome is Outcome.RATE_LIMITED:
            check = ctx.decided.limits[verdict.failed or 0]
            ctx.decided.headroom = refused_headroom(check, now)
            raise self.control.rate_limited(check, verdict.retry_after_s)
        ctx.decided.headroom = headroom(ctx.decided.limits, verdict.used, now)
        if verdict.outcome is Outcome.OVER_BUDGET:
            b = budgets[verdict.failed or 0]
            self.control.metrics.refused.labels("budget", b.scope.value).inc()
            raise await self.over_budget(b, principal.team_name, want, now)
        ctx.decided.hold = hold
        return None

    async def over_budget(self, b: Budget, team_name: str, want: int, now: float) -> BudgetExceeded:
        """The refusal, saying what was spent, the limit, and what the request needed."""
        who = team_name if b.scope is Scope.TEAM else b.subject
        try:
            [state] = await self.control.store.read([b.counter(now)])
            spent = f"spent ${format_usd(from_pico(state.spent_pusd))}"
            if state.reserved_pusd:
                spent += f" (and ${format_usd(from_pico(state.reserved_pusd))} held for requests in flight)"
        except StoreUnavailable:  # the refusal stands; only its figure is unknown
            spent = "spent an unknown amount (the budget store did not answer)"
        return BudgetExceeded(
            f"the {b.period.value} budget of {b.scope.value} {who!r} has {spent} of its "
            f"limit ${format_usd(from_pico(b.amount_pusd))}; this request needs up to its worst case "
            f"${format_usd(from_pico(want))}, which does not fit"
        )

    def charge_unmetered(self, ctx: RequestContext) -> None:
        """The one place a request fails closed: an upstream call answered but was never charged
        (its counting, pricing or relay failed, or the client left before the relay began), so
        the provider billed what nobody metered. It is charged the request's hold, or, where no
        budget held it, the same worst case computed now: never $0."""
        hold = ctx.decided.hold
        worst = from_pico(hold.want_pusd) if hold is not None and hold.budgets else self.worst_case(ctx)
        log.error(
            "request %s: %d upstream call(s) not metered, charged $%s", ctx.request_id, ctx.meter.unmetered_calls, worst
        )
        ctx.charge_unmetered(worst)

    def worst_case(self, ctx: RequestContext) -> Decimal:
        """What the request's calls can cost at most: its route target's worst case (a side
        request's stage holds its call's instead: stages/side_call.py)."""
        return self.targets[ctx.asked.model].worst_case_cost(ctx)

    async def settle(self, ctx: RequestContext) -> None:
        if ctx.meter.unmetered_calls:
            self.charge_unmetered(ctx)
        hold = ctx.decided.hold
        if hold is None or ctx.principal is None:
            return
        actual = ctx.meter.usage.total_tokens  # counted as the prompt estimate at admission
        adjustments = [
            RateAdjustment(c.counter(hold.now), actual - c.amount, 2 * c.limit.window_s + 60)
            for c in ctx.decided.limits
            if c.limit is not Limit.REQUESTS_PER_MINUTE
        ]
        await self.control.settle(hold, to_pico(ctx.meter.cost), adjustments, ctx.principal)
