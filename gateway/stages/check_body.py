"""Stage: the body, checked against its endpoint's wire model, and what the request asks parsed
once from it and the headers (gateway/core/asked.py `Asked`).

Routes authenticate the key before anything else (a request without a valid key costs no body
read) and hand the pipeline a reader for the body, which it reads once the Record stage was
entered (gateway/pipeline.py): an unreadable, oversized or malformed body is refused like any
other request, with one ledger row for the key that sent it and one count against its request
rate. A body that arrives already parsed (a batch line) is checked here the same way.
"""

from __future__ import annotations

from starlette.responses import Response

from gateway.core.asked import Asked, parse_trace_id
from gateway.core.context import RequestContext
from gateway.core.wire import validate_body


class CheckBody:
    async def __call__(self, ctx: RequestContext) -> Response | None:
        validate_body(ctx.endpoint, ctx.body)
        ctx.asked = Asked.of(ctx.body, ctx.headers)
        ctx.trace_id = parse_trace_id(ctx.headers.get("x-costgate-trace-id"))
        return None
