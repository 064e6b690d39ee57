"""The one interface every route target implements, and the error a skipped deployment gives."""

from __future__ import annotations

from decimal import Decimal
from typing import Protocol

from starlette.responses import Response

from gateway.context import RequestContext
from gateway.errors import CircuitOpen
from policies.breaker import Breakers


class RouteTarget(Protocol):
    async def answer(self, ctx: RequestContext) -> Response:
        """Make the upstream call(s), charge `ctx` for each, and return the answer."""
        ...

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        """The most `answer` can charge for this request: what a budget reserves beforehand."""
        ...


def circuit_open(breakers: Breakers, name: str) -> CircuitOpen:
    """The error a caller raises when `name` was skipped for its open breaker."""
    retry = breakers[name].view().retry_after_s
    return CircuitOpen(f"the circuit breaker for {name!r} is open after repeated upstream failures", retry_after=retry)
