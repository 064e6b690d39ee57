"""The cost router's target: a model name (config `cost_router.name`) that answers with the best
model whose estimated cost fits the request's `x-costgate-max-cost-usd`; the choice itself is
`policies.router.choose`."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from starlette.responses import Response

from gateway.config.settings import CostRouterConfig
from gateway.core.context import RequestContext
from gateway.core.errors import CostLimitExceeded
from gateway.routing.cascade_metrics import PolicyMetrics
from gateway.routing.target import RouteTarget, breaker_team
from gateway.upstream.deployments import Deployment
from gateway.upstream.worst_case import worst_case
from policies.breaker import Breakers
from policies.pricing import format_usd
from policies.router import Candidate, choose


class CostRouterTarget:
    def __init__(
        self,
        config: CostRouterConfig,
        deployments: Mapping[str, Deployment],
        targets: Mapping[str, RouteTarget],
        breakers: Breakers,
        metrics: PolicyMetrics,
    ) -> None:
        names = (
            config.models if config.models is not None else [n for n, d in deployments.items() if d.config.quality > 0]
        )
        unknown = [n for n in names if n not in deployments]
        if unknown:
            raise ValueError(f"cost_router: unknown models {unknown}")
        if not names:
            raise ValueError("cost_router: no candidate models (give models a `quality` rank above 0)")
        self.config, self.targets, self.breakers, self.metrics = config, targets, breakers, metrics
        self.models = [deployments[n] for n in names]

    def candidates(self, ctx: RequestContext) -> list[Candidate]:
        """Each model's estimate: the worst case, with `expected_output_tokens` for an unset max_tokens."""
        asked = ctx.view.max_output_tokens
        out = []
        for dep in self.models:
            if not self.breakers.admits(dep.name, breaker_team(ctx)):
                continue
            expected = None if asked is not None else min(self.config.expected_output_tokens, dep.max_output_tokens)
            out.append(Candidate(dep.name, dep.config.quality, worst_case(ctx, dep, expected)))
        return out

    def pick(self, ctx: RequestContext) -> str:
        candidates = self.candidates(ctx)
        chosen = choose(candidates, ctx.asked.max_cost)
        if chosen is None:
            cheapest = min((c.estimated_cost for c in candidates), default=None)
            detail = f"; the cheapest model's estimate is ${format_usd(cheapest)}" if cheapest is not None else ""
            raise CostLimitExceeded(
                f"no model fits x-costgate-max-cost-usd={format_usd(ctx.asked.max_cost or Decimal(0))}{detail}",
                param="x-costgate-max-cost-usd",
            )
        return chosen.name

    def chosen(self, ctx: RequestContext) -> str:
        """The choice, made once per request: the budget holds against the model that is called."""
        if ctx.decided.route is None:
            ctx.decided.route = self.pick(ctx)
        return ctx.decided.route

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        return self.targets[self.chosen(ctx)].worst_case_cost(ctx)

    async def answer(self, ctx: RequestContext) -> Response:
        name = self.chosen(ctx)
        self.metrics.router_choices.labels(self.config.name, name).inc()
        return await self.targets[name].answer(ctx)
