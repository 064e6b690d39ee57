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
from dataclasses import replace
from decimal import Decimal

import orjson
from starlette.responses import Response, StreamingResponse

from gateway.caching.response_cache import ResponseCache
from gateway.core.asked import CacheControl
from gateway.core.context import CacheDecision, CacheStatus, Endpoint, RequestContext
from gateway.core.sse import SSE_HEADERS, replay
from gateway.stages.cache_replay import WORDS_PER_CHUNK, ZERO_COST, completion_body
from gateway.upstream.deployments import Deployment
from policies.exact_cache import CachedAnswer, answer_of, refusal, request_keys, semantic_refusal
from policies.pricing import ZERO, Usage, cost_of
from policies.semantic_cache.store import Entry

log = logging.getLogger("costgate.cache")
REPLAYED_ENDINGS = frozenset({"stop", "length"})  # a streamed answer kept only if it ended so (as a whole one)
CACHED_ENDPOINTS = (Endpoint.CHAT, Endpoint.COMPLETIONS)


def decide(ctx: RequestContext, cache: ResponseCache) -> CacheDecision | None:
    if ctx.endpoint not in CACHED_ENDPOINTS or ctx.principal is None:
        return None
    policy = cache.policy_for(ctx.principal.team_name)
    if not (policy.exact or policy.semantic) or refusal(ctx.body, policy) is not None:
        return None
    if policy.semantic and semantic_refusal(ctx.body) is not None:
        policy = replace(policy, semantic=False)  # neither looked up nor kept by meaning
    keys = request_keys(ctx.principal.team_id, ctx.endpoint.value, ctx.body)
    return CacheDecision(keys, policy, ctx.principal.team_id, ctx.principal.team_name)


def saved_by(answer: CachedAnswer, deployments: Mapping[str, Deployment]) -> Decimal:
    dep = deployments.get(answer.served_model)
    return ZERO if dep is None else cost_of(Usage(answer.prompt_tokens, answer.completion_tokens), dep.price)


def serve(ctx: RequestContext, entry: Entry, status: CacheStatus, deployments: Mapping[str, Deployment]) -> Response:
    ctx.outcome.from_cache(status, entry.answer.served_model)
    ctx.meter.saved_by_cache(saved_by(entry.answer, deployments))
    body = completion_body(ctx.endpoint, entry.answer) | {"model": ctx.asked.model}  # as every answer names it
    if ctx.asked.stream:
        usage = Usage(entry.answer.prompt_tokens, entry.answer.completion_tokens)
        events = replay(ctx.endpoint, body, usage, ZERO_COST, ctx.view.include_usage, WORDS_PER_CHUNK)
        return StreamingResponse(events, media_type="text/event-stream", headers=SSE_HEADERS)
    return Response(orjson.dumps(body), media_type="application/json")


class ExactCache:
    def __init__(self, cache: ResponseCache, deployments: Mapping[str, Deployment]) -> None:
        self.cache = cache
        self.deployments = deployments

    async def __call__(self, ctx: RequestContext) -> Response | None:
        decision = decide(ctx, self.cache)
        if decision is None:
            return None
        ctx.decided.cache = decision
        if CacheControl.NO_CACHE in ctx.asked.cache_control or not decision.policy.exact:
            return None
        entry = await self.cache.lookup_exact(decision.keys)
        self.cache.metrics.lookups.labels(decision.team_name, "exact", "hit" if entry else "miss").inc()
        if entry is None:
            return None
        await self.cache.record_hit(entry, self.cache.served_record(ctx.request_id, entry, decision.policy))
        response = serve(ctx, entry, CacheStatus.EXACT, self.deployments)
        self.cache.metrics.saved.labels(decision.team_name, "exact").inc(float(ctx.meter.saved))
        return response

    async def settle(self, ctx: RequestContext) -> None:
        decision = ctx.decided.cache
        if decision is None or CacheControl.NO_STORE in ctx.asked.cache_control:
            return
        answer = self._answer(ctx)
        if answer is None:
            return
        try:
            await self.cache.store_answer(
                decision.keys, decision.team_id, decision.team_name, answer, decision.policy, decision.vector
            )
        except Exception:  # a failed write costs a future hit, never this answer or the settles after it
            log.exception("caching an answer failed")

    def _answer(self, ctx: RequestContext) -> CachedAnswer | None:
        """The answer to keep: only a complete, successful, text answer of a miss."""
        if (
            ctx.outcome.cache_status is not CacheStatus.MISS
            or ctx.outcome.status_code != 200
            or ctx.outcome.error
            or not ctx.outcome.served_model
        ):
            return None
        if ctx.meter.unmetered_calls:  # its charge failed: an answer nobody could meter is not one to replay
            return None
        if not ctx.asked.stream:
            return answer_of(ctx.outcome.response_body, ctx.outcome.served_model)
        text = "".join(ctx.completion_text)
        if not text or ctx.body.get("tools") or ctx.body.get("functions"):
            return None  # a streamed tool call leaves no text to check: never replay it
        reason = ctx.outcome.finish_reason
        if reason not in REPLAYED_ENDINGS:
            return None  # filtered, or never said how it ended: not an answer to hand another request
        dep = self.deployments.get(ctx.outcome.served_model)
        model = dep.config.upstream_model if dep is not None else ctx.outcome.served_model
        usage = ctx.meter.usage
        return CachedAnswer(text, reason, model, ctx.outcome.served_model, usage.prompt_tokens, usage.completion_tokens)


class SemanticCache:
    def __init__(self, exact: ExactCache) -> None:
        self.exact = exact
        self.cache = exact.cache

    async def __call__(self, ctx: RequestContext) -> Response | None:
        decision = ctx.decided.cache
        if decision is None or not decision.policy.semantic or not decision.keys.question.strip():
            return None
        if CacheControl.NO_CACHE in ctx.asked.cache_control:
            return None
        started = time.perf_counter()
        decision.vector = await self.cache.embed(decision.keys.question)
        self.cache.metrics.embed_seconds.observe(time.perf_counter() - started)
        hit = await self.cache.lookup_semantic(decision.keys, decision.vector, decision.policy)
        self.cache.metrics.lookups.labels(decision.team_name, "semantic", "hit" if hit else "miss").inc()
        if hit is None:
            return None
        query = None if CacheControl.NO_STORE in ctx.asked.cache_control else decision.keys.question
        await self.cache.record_hit(
            hit.entry, self.cache.served_record(ctx.request_id, hit.entry, decision.policy, query, hit.cosine)
        )
        response = serve(ctx, hit.entry, CacheStatus.SEMANTIC, self.exact.deployments)
        self.cache.metrics.saved.labels(decision.team_name, "semantic").inc(float(ctx.meter.saved))
        return response


def cache_stages(cache: ResponseCache, deployments: Mapping[str, Deployment]) -> list[ExactCache | SemanticCache]:
    exact = ExactCache(cache, deployments)
    return [exact, SemanticCache(exact)]
