"""Stage: send the request to whatever answers its model name — a deployment (with its
fallbacks), or a target a routing policy registered under that name (a cascade, say)."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import Response

from gateway.core.context import RequestContext
from gateway.routing.target import RouteTarget


class Route:
    def __init__(self, targets: Mapping[str, RouteTarget]) -> None:
        self.targets = targets

    async def __call__(self, ctx: RequestContext) -> Response | None:
        return await self.targets[ctx.asked.model].answer(ctx)
