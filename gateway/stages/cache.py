"""Stages: the exact cache, then the semantic cache. A hit answers at $0.

`ExactCache` decides whether the request may use the cache at all (its team's policy, its
sampling settings, the client's `x-costgate-cache` controls), keeps that decision for the
request, looks the request up by its exact key, and — in `settle`, once a miss has been
answered successfully — stores the answer. `SemanticCache` embeds the question and serves the
nearest stored answer of the same namespace only when the verifier accepts it.

A hit leaves `ctx.cost` at zero and records in `ctx.saved` what the stored answer's usage
would cost at its deployment's current price.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import orjson
from starlette.responses import Response, StreamingResponse

from gateway.context import CacheControl, CacheStatus, Endpoint, RequestContext
from gateway.deployments import Deployment
from gateway.response_cache import ResponseCache
from gateway.stages.cache_replay import completion_body, replay_events
from policies.exact_cache import CachedAnswer, CachePolicy, RequestKeys, answer_of, refusal, request_keys
from policies.pricing import ZERO, Usage, cost_of
from policies.semantic_cache.store import Entry

log = logging.getLogger("costgate.cache")
CACHED_ENDPOINTS = (Endpoint.CHAT, Endpoint.COMPLETIONS)
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


@dataclass
class Plan:
    """What the cache may do for one request, decided once by `ExactCache`."""

    keys: RequestKeys
    policy: CachePolicy
    team_id: str
    team_name: str
    vector: np.ndarray | None = None  # the question's embedding, once the semantic lookup made it


def plan_for(ctx: RequestContext, cache: ResponseCache) -> Plan | None:
    if ctx.endpoint not in CACHED_ENDPOINTS or ctx.principal is None:
        return None
    policy = cache.policy_for(ctx.principal.team_name)
    if not (policy.exact or policy.semantic) or refusal(ctx.body, policy) is not None:
        return None
    keys = request_keys(ctx.principal.team_id, ctx.endpoint.value, ctx.body)
    return Plan(keys, policy, ctx.principal.team_id, ctx.principal.team_name)


def saved_by(answer: CachedAnswer, deployments: Mapping[str, Deployment]) -> Decimal:
    dep = deployments.get(answer.served_model)
    return ZERO if dep is None else cost_of(Usage(answer.prompt_tokens, answer.completion_tokens), dep.price)


def serve(ctx: RequestContext, entry: Entry, status: CacheStatus, deployments: Mapping[str, Deployment]) -> Response:
    ctx.cache_status = status
    ctx.served_model = entry.answer.served_model
    ctx.saved = saved_by(entry.answer, deployments)
    ctx.first_token_at = time.perf_counter()
    if ctx.stream:
        ctx.wants_usage_chunk = bool((ctx.body.get("stream_options") or {}).get("include_usage"))
        return StreamingResponse(replay_events(ctx.endpoint, entry.answer, ctx.wants_usage_chunk),
                                 media_type="text/event-stream", headers=SSE_HEADERS)
    return Response(orjson.dumps(completion_body(ctx.endpoint, entry.answer)), media_type="application/json")


class ExactCache:
    def __init__(self, cache: ResponseCache, deployments: Mapping[str, Deployment]) -> None:
        self.cache = cache
        self.deployments = deployments

    async def __call__(self, ctx: RequestContext) -> Response | None:
        plan = plan_for(ctx, self.cache)
        if plan is None:
            return None
        ctx.cache_plan = plan
        if CacheControl.NO_CACHE in ctx.cache_control or not plan.policy.exact:
            return None
        entry = await self.cache.lookup_exact(plan.keys)
        self.cache.metrics.lookups.labels(plan.team_name, "exact", "hit" if entry else "miss").inc()
        if entry is None:
            return None
        await self.cache.record_hit(entry)
        response = serve(ctx, entry, CacheStatus.EXACT, self.deployments)
        self.cache.metrics.saved.labels(plan.team_name, "exact").inc(float(ctx.saved))
        return response

    async def settle(self, ctx: RequestContext) -> None:
        plan = ctx.cache_plan
        if plan is None or CacheControl.NO_STORE in ctx.cache_control:
            return
        answer = self._answer(ctx)
        if answer is None:
            return
        try:
            await self.cache.store_answer(plan.keys, plan.team_id, plan.team_name, answer, plan.policy, plan.vector)
        except Exception:  # a failed write costs a future hit, never this answer or the settles after it
            log.exception("caching an answer failed")

    def _answer(self, ctx: RequestContext) -> CachedAnswer | None:
        """The answer to keep: only a complete, successful, text answer of a miss."""
        if ctx.cache_status is not CacheStatus.MISS or ctx.status_code != 200 or ctx.error or not ctx.served_model:
            return None
        if not ctx.stream:
            return answer_of(ctx.response_body, ctx.served_model)
        text = "".join(ctx.completion_text)
        if not text or ctx.body.get("tools") or ctx.body.get("functions"):
            return None  # a streamed tool call leaves no text to check: never replay it
        dep = self.deployments.get(ctx.served_model)
        model = dep.config.upstream_model if dep is not None else ctx.served_model
        return CachedAnswer(text, "stop", model, ctx.served_model, ctx.usage.prompt_tokens,
                            ctx.usage.completion_tokens)


class SemanticCache:
    def __init__(self, exact: ExactCache) -> None:
        self.exact = exact
        self.cache = exact.cache

    async def __call__(self, ctx: RequestContext) -> Response | None:
        plan = ctx.cache_plan
        if plan is None or not plan.policy.semantic or not plan.keys.question.strip():
            return None
        if CacheControl.NO_CACHE in ctx.cache_control:
            return None
        started = time.perf_counter()
        plan.vector = await self.cache.embed(plan.keys.question)
        self.cache.metrics.embed_seconds.observe(time.perf_counter() - started)
        hit = await self.cache.lookup_semantic(plan.keys, plan.vector, plan.policy)
        self.cache.metrics.lookups.labels(plan.team_name, "semantic", "hit" if hit else "miss").inc()
        if hit is None:
            return None
        await self.cache.record_hit(hit.entry)
        response = serve(ctx, hit.entry, CacheStatus.SEMANTIC, self.exact.deployments)
        self.cache.metrics.saved.labels(plan.team_name, "semantic").inc(float(ctx.saved))
        return response


def cache_stages(cache: ResponseCache, deployments: Mapping[str, Deployment]) -> list[ExactCache | SemanticCache]:
    exact = ExactCache(cache, deployments)
    return [exact, SemanticCache(exact)]
