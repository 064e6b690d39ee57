"""Stage: send the request to whatever answers its model name — a deployment (with its
fallbacks), or a target a routing policy registered under that name (a cascade, say)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Protocol

from starlette.responses import Response

from gateway.context import RequestContext


class RouteTarget(Protocol):
    async def answer(self, ctx: RequestContext) -> Response:
        """Make the upstream call(s), charge `ctx` for each, and return the answer."""
        ...

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        """The most `answer` can charge for this request: what a budget reserves beforehand."""
        ...


class Route:
    def __init__(self, targets: Mapping[str, RouteTarget]) -> None:
        self.targets = targets

    async def __call__(self, ctx: RequestContext) -> Response | None:
        return await self.targets[ctx.requested_model].answer(ctx)
