"""Stage: chargeback tags, trace id, end user, and the client's cache and cost controls."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from starlette.responses import Response

from gateway.core.context import CacheControl, RequestContext
from gateway.core.errors import InvalidRequest

TAG = re.compile(r"^[A-Za-z0-9_.:=/-]{1,64}$")
MAX_TAGS = 20


def parse_tags(header: str | None) -> list[str]:
    tags = [t.strip() for t in (header or "").split(",") if t.strip()]
    bad = [t for t in tags if not TAG.match(t)]
    if bad:
        raise InvalidRequest(
            f"invalid tag {bad[0][:70]!r}: use letters, digits and _.:=/- (at most 64)", param="x-costgate-tags"
        )
    return tags


def parse_max_cost(header: str | None) -> Decimal | None:
    if header is None:
        return None
    try:
        value = Decimal(header.strip())
    except InvalidOperation:
        raise InvalidRequest(
            "x-costgate-max-cost-usd must be a decimal dollar amount", param="x-costgate-max-cost-usd"
        ) from None
    if not value.is_finite() or value <= 0:
        raise InvalidRequest("x-costgate-max-cost-usd must be positive", param="x-costgate-max-cost-usd")
    return value


class Tag:
    async def __call__(self, ctx: RequestContext) -> Response | None:
        h, body = ctx.headers, ctx.body
        tags = list(ctx.principal.tags) if ctx.principal else []
        tags += parse_tags(h.get("x-costgate-tags"))
        metadata = body.get("metadata")
        if isinstance(metadata, dict):
            tags += [f"{k}={v}" for k, v in metadata.items() if TAG.match(f"{k}={v}")]
        ctx.tags = tuple(dict.fromkeys(tags))[:MAX_TAGS]
        trace = h.get("x-costgate-trace-id")
        if trace is not None and not 0 < len(trace) <= 200:
            raise InvalidRequest("x-costgate-trace-id must be 1 to 200 characters", param="x-costgate-trace-id")
        ctx.trace_id = trace
        user = body.get("user")
        ctx.user = user if isinstance(user, str) and user else None
        ctx.cache_control = CacheControl.parse(h.get("x-costgate-cache"))
        ctx.max_cost = parse_max_cost(h.get("x-costgate-max-cost-usd"))
        return None
