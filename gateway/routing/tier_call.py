"""A cascade tier asked for a whole answer and the answer rated: what the request path
(gateway/routing/cascade.py) and a shadow sample (gateway/routing/sampling.py) both do. The
scorer is passed in with each call, from the `CascadeState` the caller read."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import orjson

from gateway.core.context import Endpoint, RequestContext
from gateway.core.errors import UpstreamError
from gateway.routing.cascade_services import Services
from gateway.routing.confidence import Confidence, QueryVector, TierAnswer, scored_answer
from gateway.upstream.calls import upstream_body
from gateway.upstream.deployments import Deployment
from policies.pricing import Usage
from policies.scorers import Scored
from policies.scorers.rules import rule_violation

log = logging.getLogger("costgate.cascade")


@dataclass(frozen=True, slots=True)
class TierCaller:
    """Asks one cascade's tiers (`name`: the cascade's, for its logs)."""

    name: str
    services: Services

    async def ask(
        self, ctx: RequestContext, scorer: Confidence, tier: int, dep: Deployment, vector: QueryVector
    ) -> TierAnswer:
        """Tier `tier`'s whole answer, rated by `scorer` (`vector`: the query's, for the scorer)."""
        body = upstream_body(ctx, dep, False)
        body.pop("stream", None)
        body.pop("stream_options", None)
        added_logprobs = scorer.needs_logprobs and not body.get("logprobs")
        if added_logprobs:
            body["logprobs"] = True if ctx.endpoint is Endpoint.CHAT else 1
        before = ctx.meter.usage
        completion = await self.services.upstream.complete(ctx, dep, body)  # guarded: breaker, priority, charge
        after = ctx.meter.usage
        usage = Usage(
            after.prompt_tokens - before.prompt_tokens,
            after.completion_tokens - before.completion_tokens,
            after.cached_tokens - before.cached_tokens,
        )
        item = await vector.on(scored_answer(ctx.body, completion.body))
        answer_body, raw = completion.body, completion.raw
        if added_logprobs:  # the client did not ask for them: it does not get them
            answer_body = {
                **answer_body,
                "choices": [{k: v for k, v in c.items() if k != "logprobs"} for c in answer_body.get("choices") or ()],
            }
            raw = orjson.dumps(answer_body)
        return TierAnswer(tier, dep, answer_body, raw, item, await self._score(ctx, scorer, item), usage)

    async def _score(self, ctx: RequestContext, scorer: Confidence, item: Scored) -> float:
        if rule_violation(item):
            return 0.0
        try:
            return min(1.0, max(0.0, await scorer.score(ctx, item)))
        except UpstreamError as err:  # a judge that cannot grade: escalate rather than fail
            log.warning("cascade %s: scorer failed (%s); escalating", self.name, err.message)
            return 0.0
