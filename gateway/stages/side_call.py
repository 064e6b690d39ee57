"""Stages of the side pipeline (gateway/pipeline.py `SideLane`) built for one side call (a
cascade's shadow sample, gateway/routing/sampling.py): the budget hold of its worst case, and,
last, the call run. Record comes before both, so side calls are recorded and charged to the same
budgets as the request they belong to."""

from __future__ import annotations

from decimal import Decimal

from starlette.responses import Response

from gateway.core.context import RequestContext, SideCall
from gateway.spend.spend_control import SpendControl
from gateway.stages.budget import ReserveBudget


class HoldSideCall(ReserveBudget):
    """The budget stage, holding what the side call can cost at most (a side request has no
    route target)."""

    def __init__(self, control: SpendControl, call: SideCall) -> None:
        super().__init__(control, {})
        self.call = call

    def worst_case(self, ctx: RequestContext) -> Decimal:
        return self.call.worst_case_cost(ctx)


class RunSideCall:
    def __init__(self, call: SideCall) -> None:
        self.call = call

    async def __call__(self, ctx: RequestContext) -> Response | None:
        await self.call.run(ctx)
        return Response(status_code=204)
