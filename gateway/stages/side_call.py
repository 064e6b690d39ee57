"""Stage: the last stage of the side pipeline — run the calls a side request carries (a cascade's
shadow sample, gateway/routing/sampling.py). Record and the budget hold come before it, so side
calls are recorded and charged to the same budgets as the request they belong to."""

from __future__ import annotations

from starlette.responses import Response

from gateway.core.context import RequestContext


class RunSideCall:
    async def __call__(self, ctx: RequestContext) -> Response | None:
        assert ctx.side_call is not None, "a side request carries its calls"
        await ctx.side_call.run(ctx)
        return Response(status_code=204)
