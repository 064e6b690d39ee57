"""The cost router: a model name (config `cost_router.name`) that answers with the best model
whose estimated cost fits the request's `x-costgate-max-cost-usd`.

"Best" is the config's `quality` rank (higher is better; ties go to the cheaper model).
The estimate is the prompt's tokens at the model's input price plus the client's
`max_tokens` (else `expected_output_tokens`) at its output price. A model whose breaker is
open is not a candidate. Without the header the router picks the best model outright.
With the header and no model fitting, the request is refused with 402
`cost_limit_exceeded` before any upstream call.

Where it applies: only to the router's own model name. A request naming a model directly
gets that model; the header then only feeds the budget stage's checks, so a client that
names a model is never silently switched to another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from starlette.responses import Response

from gateway.context import RequestContext
from gateway.deployments import Deployment
from gateway.errors import CostLimitExceeded
from gateway.settings import CostRouterConfig
from gateway.stages.route import RouteTarget
from gateway.tokens import count_prompt
from policies.breaker import Breakers, State
from policies.cascade_metrics import PolicyMetrics
from policies.pricing import Price, format_usd


@dataclass(frozen=True, slots=True)
class Candidate:
    name: str
    quality: int
    estimated_cost: Decimal


def estimate(prompt_tokens: int, output_tokens: int, price: Price) -> Decimal:
    return prompt_tokens * price.input + output_tokens * price.output


def choose(candidates: Sequence[Candidate], max_cost: Decimal | None) -> Candidate | None:
    """The highest-quality candidate that fits (cheaper first among equals); None if none fits."""
    fitting = [c for c in candidates if max_cost is None or c.estimated_cost <= max_cost]
    if not fitting:
        return None
    return min(fitting, key=lambda c: (-c.quality, c.estimated_cost, c.name))


class CostRouterTarget:
    def __init__(self, config: CostRouterConfig, deployments: Mapping[str, Deployment],
                 targets: Mapping[str, RouteTarget], breakers: Breakers, metrics: PolicyMetrics) -> None:
        names = config.models if config.models is not None else [
            n for n, d in deployments.items() if d.config.quality > 0]
        unknown = [n for n in names if n not in deployments]
        if unknown:
            raise ValueError(f"cost_router: unknown models {unknown}")
        if not names:
            raise ValueError("cost_router: no candidate models (give models a `quality` rank above 0)")
        self.config, self.targets, self.breakers, self.metrics = config, targets, breakers, metrics
        self.models = [deployments[n] for n in names]

    def candidates(self, ctx: RequestContext) -> list[Candidate]:
        asked = ctx.body.get("max_completion_tokens") or ctx.body.get("max_tokens")
        out = []
        for dep in self.models:
            if self.breakers[dep.name].view().state is State.OPEN:
                continue
            output = min(asked, dep.max_output_tokens) if isinstance(asked, int) else \
                min(self.config.expected_output_tokens, dep.max_output_tokens)
            prompt = count_prompt(ctx.body, dep.config.upstream_model)
            out.append(Candidate(dep.name, dep.config.quality, estimate(prompt, output, dep.price)))
        return out

    def pick(self, ctx: RequestContext) -> str:
        candidates = self.candidates(ctx)
        chosen = choose(candidates, ctx.max_cost)
        if chosen is None:
            cheapest = min((c.estimated_cost for c in candidates), default=None)
            detail = f"; the cheapest model's estimate is ${format_usd(cheapest)}" if cheapest is not None else ""
            raise CostLimitExceeded(f"no model fits x-costgate-max-cost-usd={format_usd(ctx.max_cost or 0)}{detail}",
                                    param="x-costgate-max-cost-usd")
        return chosen.name

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        return self.targets[self.pick(ctx)].worst_case_cost(ctx)

    async def answer(self, ctx: RequestContext) -> Response:
        name = self.pick(ctx)
        self.metrics.router_choices.labels(self.config.name, name).inc()
        return await self.targets[name].answer(ctx)
