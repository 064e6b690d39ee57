"""The one interface every route target implements, and the error a skipped deployment gives."""

from __future__ import annotations

from decimal import Decimal
from typing import Protocol

from starlette.responses import Response

from gateway.core.context import RequestContext
from gateway.core.errors import CircuitOpen
from policies.breaker import Breakers


class RouteTarget(Protocol):
    async def answer(self, ctx: RequestContext) -> Response:
        """Make the upstream call(s), charge `ctx` for each, and return the answer."""
        ...

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        """The most `answer` can charge for this request: what a budget reserves beforehand."""
        ...


def breaker_team(ctx: RequestContext) -> str:
    """Whose outcomes a call counts as (policies/breaker.py: a team's own failures cut off only that
    team); a request without a principal (never one from a client) counts as nobody's team."""
    return ctx.principal.team_id if ctx.principal is not None else ""


def circuit_open(breakers: Breakers, name: str, team: str) -> CircuitOpen:
    """The error a caller raises when `name` was skipped for an open breaker."""
    blocking = breakers.blocking(name, team)
    whose = "" if blocking is breakers[name] else " for this team's requests"
    return CircuitOpen(
        f"the circuit breaker for {name!r} is open{whose} after repeated upstream failures",
        retry_after=blocking.view().retry_after_s,
    )
