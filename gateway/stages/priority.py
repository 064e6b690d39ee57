"""Stage: the request's priority class — `x-costgate-priority: realtime|interactive|batch`,
capped by the key's plan, else the plan's default (engine/admission.py has the table)."""

from __future__ import annotations

from starlette.responses import Response

from engine.admission import resolve_priority
from gateway.core.context import RequestContext
from gateway.core.errors import InvalidRequest

HEADER = "x-costgate-priority"


class Prioritize:
    async def __call__(self, ctx: RequestContext) -> Response | None:
        plan = ctx.principal.plan if ctx.principal else "pro"
        try:
            ctx.decided.priority = resolve_priority(ctx.headers.get(HEADER), plan)
        except ValueError as err:
            raise InvalidRequest(str(err), param=HEADER) from None
        return None
