"""Stage: the client's body, read, parsed and checked inside the pipeline.

Routes authenticate the key before anything else (a request without a valid key costs no body
read) and hand the pipeline a reader for the body. Reading it here, after the Record stage,
means an unreadable, oversized or malformed body is refused like any other request: one ledger
row for the key that sent it, and one count against its request rate. A body that arrives
already parsed (a batch line, a side request) is checked the same way.
"""

from __future__ import annotations

from starlette.responses import Response

from gateway.core.context import RequestContext
from gateway.core.wire import validate_body


class ReadBody:
    async def __call__(self, ctx: RequestContext) -> Response | None:
        if ctx.read_body is not None:
            reader, ctx.read_body = ctx.read_body, None
            ctx.set_body(await reader())
        validate_body(ctx.endpoint, ctx.body)
        ctx.stream = bool(ctx.body.get("stream"))
        return None
