"""Stage: the key's plan and its rate limits.

Plan rules that need no counter are enforced here: the plan's model allowlist (free keys: cheap
models only) and the tarpit delay. The counted limits — requests and tokens per minute per key
and team, the plan's daily token quota, and a model's provider limits that every team shares
(the whole of each, and a team's share of it: config `provider_limits`) — are only *named*
here (`ctx.decided.limits`): the budget stage checks and counts them together with its
reservation, in one store call (one Redis round trip), so a request refused for its budget is
not counted against its rate limits either.
Tokens are counted at admission as an estimate of the prompt's tokens and corrected to the true total at settle.

What the per-minute limits left goes back in the answer's headers (`limit_headers`), in the
names the client's SDK knows: OpenAI's `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`
(reset as a duration, `17s`, `1m0s`), Anthropic's `anthropic-ratelimit-{requests,tokens}-
{limit,remaining,reset}` (reset as an RFC 3339 time) on /v1/messages; on a 429 too.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping

from starlette.responses import Response

from gateway.core.context import Endpoint, RequestContext
from gateway.core.errors import PermissionDenied
from gateway.spend.spend_control import SpendControl
from gateway.upstream.deployments import Deployment
from policies.rate_limits import Headroom, Limit, RateCheck, RateHeadroom, estimate_tokens, shared_checks


class RateLimit:
    def __init__(self, control: SpendControl, deployments: Mapping[str, Deployment]) -> None:
        self.control = control
        self.deployments = deployments

    async def __call__(self, ctx: RequestContext) -> Response | None:
        principal = ctx.principal
        assert principal is not None, "authenticate runs first"
        plan = self.control.plan(principal.plan)
        model = ctx.asked.model
        dep = self.deployments.get(model)
        if not plan.allows_model(model, dep.price if dep is not None else None):
            self.control.metrics.refused.labels("plan_model", "key").inc()
            raise PermissionDenied(f"the {plan.name} plan may not use the model {model!r}", param="model")
        tokens = estimate_tokens(ctx.body)
        key, team = f"key:{principal.key_id}", f"team:{principal.team_id}"
        team_limits = self.control.team_limits(principal)
        wanted = (
            (Limit.TOKENS_PER_MINUTE, key, plan.tokens_per_minute),
            (Limit.TOKENS_PER_DAY, key, plan.tokens_per_day),
            (Limit.TOKENS_PER_MINUTE, team, team_limits.tokens_per_minute),
        )
        shared = dep.config.provider_limits if dep is not None else None
        provider = () if shared is None else shared_checks(
            model, principal.team_id, shared.requests_per_minute, shared.tokens_per_minute, shared.team_share, tokens
        )  # fmt: skip
        ctx.decided.limits = (
            *self.control.request_checks(principal),
            *(RateCheck(limit, subject, maximum, tokens) for limit, subject, maximum in wanted if maximum is not None),
            *provider,
        )
        if plan.tarpit_s and ctx.endpoint is not Endpoint.EMBEDDINGS:
            await asyncio.sleep(plan.tarpit_s)
        return None


def limit_headers(rates: RateHeadroom, anthropic: bool) -> dict[str, str]:
    headers: dict[str, str] = {}
    for kind, room in (("requests", rates.requests), ("tokens", rates.tokens)):
        if room is None:
            continue
        if anthropic:
            reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(math.ceil(rates.now + room.reset_s)))
            headers[f"anthropic-ratelimit-{kind}-limit"] = str(room.limit)
            headers[f"anthropic-ratelimit-{kind}-remaining"] = str(room.remaining)
            headers[f"anthropic-ratelimit-{kind}-reset"] = reset
        else:
            headers[f"x-ratelimit-limit-{kind}"] = str(room.limit)
            headers[f"x-ratelimit-remaining-{kind}"] = str(room.remaining)
            headers[f"x-ratelimit-reset-{kind}"] = duration(room)
    return headers


def duration(room: Headroom) -> str:
    """OpenAI's form of a reset time: `17s`, `1m0s` (whole seconds, rounded up)."""
    minutes, seconds = divmod(max(1, math.ceil(room.reset_s)), 60)
    return f"{minutes}m{seconds}s" if minutes else f"{seconds}s"
