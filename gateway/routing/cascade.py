"""FrugalGPT cascades: a model name whose tiers are tried cheapest first.

Each tier but the last answers whole (not streamed); a scorer rates the answer, and a
confidence at or above the threshold returns it, otherwise the next tier is asked. The last
tier's answer is returned as is. The client sees one answer: `x-costgate-model` names the
tier that answered, and the request is charged the sum of every call made for it.

Streaming, the trade-off taken: a cheaper tier's answer must be scored before the client sees
it, so it is fetched whole and, when accepted, replayed as server-sent events (time to first
token is that tier's whole latency — cheap tiers are usually fast). When the request reaches
the last tier, that tier is streamed live, token by token, since nothing judges it.

Quality target: every request that reached the last tier is a sample at no extra cost, and
an accepted answer becomes one, with the probability the quality controller sets, by a shadow
call that asks the tiers it skipped (gateway/routing/sampling.py). The controller turns the
samples, with the scorer's calibration, into the cheapest threshold whose quality bound holds
the target, or tells the cascade to escalate everything, or to skip the cheap tiers its scorer
cannot judge.

Learning: a cascade on a learned scorer refits it from its samples as they accumulate
(gateway/routing/learning.py) and, only when it ranks held-back samples better, replaces the
cascade's `CascadeState` (scorer, controller rebuilt on it, router) with a new one in the cascade's
`StateSlot`; one on `rules` or `logprob` is upgraded to a learned scorer trained on its samples
the same way, when that also certifies a threshold. A request reads the slot once, at its start,
and decides by that one value to its end. `Tally` counts what the cascade did since start.

Circuit breakers: every call (tiers, judge, shadow) goes through the guarded call
(gateway/routing/guarded_call.py), with the request's priority; a tier whose breaker is open is
skipped; a failing tier falls through to the next; when the last tier fails, the best answer a
cheaper tier gave is returned instead.
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from starlette.responses import Response, StreamingResponse

from gateway.config.settings import CascadeConfig
from gateway.core.bodies import answer_text, first_choice, query_text
from gateway.core.context import Endpoint, RequestContext
from gateway.core.errors import InvalidRequest, UpstreamError
from gateway.core.sse import SSE_HEADERS, replay
from gateway.routing.cascade_services import CascadeState, Learner, Services, StateSlot, Tally
from gateway.routing.confidence import Confidence, QueryVector, TierAnswer
from gateway.routing.sampling import Sampling, ShadowDraw
from gateway.routing.tier_call import TierCaller
from gateway.upstream.deployments import Deployment
from gateway.upstream.worst_case import worst_case
from policies.pricing import cost_of, format_usd
from policies.quality_controller import Mode, Policy, QualityController
from policies.scorers import Scored
from policies.scorers.answer_features import features

log = logging.getLogger("costgate.cascade")
DEFAULT_THRESHOLD = 0.5


@dataclass(frozen=True, slots=True)
class FollowUp:
    """What a cascade does for a request once the request has settled (gateway/pipeline.py calls
    `CascadeTarget.settled`): count it in the tally, and start its shadow sample when one was drawn."""

    escalated: bool  # the last tier answered
    always_last: Decimal | None  # what the last tier would have cost; None: it answered, its cost since...
    cost_before: Decimal = Decimal(0)  # ... this, the request's cost before the last tier's call
    shadow: ShadowDraw | None = None


@dataclass
class CascadeTarget:
    """A cascade's request path. What it decides by (scorer, controller, router) is not its own:
    it reads one `CascadeState` from `slot` at each request's start and keeps it to the end; its
    learning is the slot's only writer."""

    config: CascadeConfig
    tiers: list[Deployment]
    slot: StateSlot
    services: Services
    caller: TierCaller
    sampling: Sampling
    rng: random.Random
    tally: Tally
    learner: Learner | None = None  # refits (or upgrades to) a learned scorer from the samples
    routed: int = 0  # requests the router sent straight to the last tier, since start
    follow_ups: dict[str, FollowUp] = field(default_factory=dict)  # by request id, until it settles

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def state(self) -> CascadeState:
        """What the cascade decides by now (a request reads it once, at its start)."""
        return self.slot.current

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        scorer = self.slot.current.scorer
        cost = sum((worst_case(ctx, dep) for dep in self.tiers), Decimal(0))
        cost += sum((scorer.worst_case_cost(ctx) for _ in self.tiers[:-1]), Decimal(0))
        return cost  # a shadow sample is a side request with a hold of its own (ShadowSample)

    async def answer(self, ctx: RequestContext) -> Response:
        if ctx.endpoint is Endpoint.EMBEDDINGS:
            raise InvalidRequest(
                f"{self.name!r} is a cascade of generation models; it makes no embeddings", param="model"
            )
        state = self.slot.current  # this request's, to its end: a refit swaps in the next one
        route = state.controller.route(self.rng)
        if not route.call_cheap:  # the scorer cannot be trusted here: the cheap tiers would only add cost
            return await self._answer_last(ctx, self.tiers[-1], None)
        tried: list[TierAnswer] = []
        error: UpstreamError | None = None
        vector = QueryVector.start(self.services.embed, query_text(ctx.body))
        weight = await self._precall_weight(ctx, vector, state)
        if weight is None:  # the router: the cheap answer would not be accepted
            vector.cancel()
            self.routed += 1
            return await self._answer_last(ctx, self.tiers[-1], None)
        try:
            for tier, dep in enumerate(self.tiers[:-1]):
                try:
                    answer = await self.caller.ask(ctx, state.scorer, tier, dep, vector)
                except UpstreamError as err:
                    error = err
                    continue
                tried.append(answer)
                threshold = tier_threshold(self.config, state.controller, tier)
                if threshold is not None and answer.confidence >= threshold:
                    return self._deliver(ctx, answer, tried, state.controller, weight)
        finally:
            vector.cancel()  # every tier asked has it; a pass still pending is not needed
        last = self.tiers[-1]
        try:
            return await self._answer_last(ctx, last, tried, route.weight * weight)
        except UpstreamError as err:
            error = err
        if tried:  # the last tier failed: a cheaper answer beats an error
            return self._deliver(ctx, max(tried, key=lambda a: a.confidence), None, state.controller)
        assert error is not None
        raise error

    async def _precall_weight(self, ctx: RequestContext, vector: QueryVector, state: CascadeState) -> float | None:
        """What a sample from this request weighs for the router's part (1: it had no say;
        1 / explore: it would have skipped, and was explored), or None: skip the cheap tiers."""
        router = state.router
        if router is None or state.controller.threshold is None or len(self.tiers) != 2:
            return 1.0
        query = await vector.on(Scored(query_text(ctx.body), ""))
        cheap, last = self.tiers[0].price, self.tiers[-1].price
        if not router.skips(features(query), float(cheap.input + cheap.output), float(last.input + last.output)):
            return 1.0
        if self.rng.random() < router.explore:
            return 1.0 / router.explore
        return None

    def _deliver(
        self,
        ctx: RequestContext,
        answer: TierAnswer,
        sample_from: list[TierAnswer] | None,
        controller: QualityController,
        weight: float = 1.0,
    ) -> Response:
        ctx.outcome.served_by(answer.dep.name, answer.dep.config.provider, tier=answer.tier)
        ctx.outcome.answered(answer.body)
        self.services.policy_metrics.cascade_answers.labels(self.name, answer.dep.name).inc()
        last = self.tiers[-1]  # what the last tier had cost for the same tokens
        instead = cost_of(answer.usage, last.price) * ctx.lane_factor(last.config.provider)
        draw = None if sample_from is None else self.sampling.shadow_draw(ctx, controller, sample_from, weight)
        self.follow_ups[ctx.request_id] = FollowUp(False, instead, shadow=draw)
        if ctx.asked.stream:
            return StreamingResponse(
                self._replay(ctx, answer.body), media_type="text/event-stream", headers=SSE_HEADERS
            )
        return Response(answer.raw, media_type="application/json")

    def settled(self, ctx: RequestContext) -> None:
        """The request settled (its hold released, its row written): what this cascade does for it
        now, if it answered it."""
        follow = self.follow_ups.pop(ctx.request_id, None)
        if follow is None:
            return
        always_last = follow.always_last
        self._count(ctx, follow.escalated, ctx.meter.cost - follow.cost_before if always_last is None else always_last)
        if follow.shadow is not None:
            self.sampling.shadow(ctx, follow.shadow)

    def _count(self, ctx: RequestContext, escalated: bool, always_last: Decimal) -> None:
        """The request in the tally, and a point of the learning curve when due."""
        answered = self.tally.answered
        self.tally.count(ctx, escalated, always_last)
        if self.tally.answered != answered:
            e = self.slot.current.controller.estimate()  # the curve shows the controller in use now
            self.tally.mark(e.mode.value, e.threshold, e.quality, e.quality_lower_bound)

    @staticmethod
    def _replay(ctx: RequestContext, body: dict[str, Any]) -> AsyncIterator[bytes]:
        """An accepted tier's whole answer, streamed; the request's text as the relay would collect it."""
        ctx.outcome.first_token()
        ctx.completion_text = [answer_text(body)]
        ctx.outcome.ended(str(first_choice(body).get("finish_reason") or "stop"))
        named = {**body, "model": ctx.asked.model}  # as every answer names it (gateway/pipeline.py stamped)
        return replay(ctx.endpoint, named, ctx.meter.usage, format_usd(ctx.meter.cost), ctx.view.include_usage)

    async def _answer_last(
        self, ctx: RequestContext, dep: Deployment, sample_from: list[TierAnswer] | None, weight: float = 1.0
    ) -> Response:
        before = ctx.meter.cost  # what the last tier's own call costs is what it adds (known once settled)
        if ctx.asked.stream:
            relay = await self.services.upstream.relay(ctx, dep)
        else:
            completion = await self.services.upstream.answer(ctx, dep)
        ctx.outcome.by_tier(len(self.tiers) - 1)
        self.services.policy_metrics.cascade_answers.labels(self.name, dep.name).inc()
        self.follow_ups[ctx.request_id] = FollowUp(True, None, before)
        complete_sample = sample_from is not None and len(sample_from) == len(self.tiers) - 1
        if ctx.asked.stream:
            if complete_sample and sample_from:
                relay = self.sampling.record_after_stream(relay, ctx, sample_from, weight)
            return StreamingResponse(relay, media_type="text/event-stream", headers=SSE_HEADERS)
        ctx.outcome.answered(completion.body)
        if complete_sample and sample_from:
            self.sampling.record_after(ctx, sample_from, answer_text(completion.body), weight)
        return Response(completion.raw, media_type="application/json")

    async def load(self) -> None:
        """Warm the controller with the samples a previous run stored."""
        if self.learner is not None:
            await self.learner.load()
            return
        stored = await self.services.store.recent(self.name, self.config.max_samples)
        if stored:
            self.slot.current.controller.add(*stored)

    async def drain(self) -> None:
        """Let in-flight shadow work finish (at shutdown), so its calls reach the ledger."""
        await self.sampling.drain()


def tier_threshold(config: CascadeConfig, controller: QualityController, tier: int) -> float | None:
    """The confidence tier `tier` needs; None: escalate everything (the target demands it)."""
    if controller.mode is not Mode.FIXED:
        return controller.threshold
    configured = config.thresholds or []
    return configured[tier] if tier < len(configured) else (configured[-1] if configured else DEFAULT_THRESHOLD)


def policy_of(config: CascadeConfig) -> Policy:
    """The cascade's quality settings, as its controller reads them."""
    fixed = config.thresholds[0] if config.thresholds else DEFAULT_THRESHOLD
    return Policy(
        config.quality_target,
        config.confidence,
        config.adaptive,
        fixed,
        config.min_samples,
        config.max_samples,
        config.shadow_rate,
        prior_weight=config.prior_weight,
        last_tier_quality=config.last_tier_quality,
    )


def build_controller(config: CascadeConfig, scorer: Confidence) -> QualityController:
    return QualityController(policy_of(config), scorer.calibration)


def initial_state(config: CascadeConfig, scorer: Confidence) -> CascadeState:
    """A cascade's state at start: the configured scorer, a controller on its calibration, no router."""
    return CascadeState(scorer, build_controller(config, scorer))


def build_cascade(
    config: CascadeConfig,
    deployments: Mapping[str, Deployment],
    slot: StateSlot,
    services: Services,
    learner: Learner | None = None,
) -> CascadeTarget:
    """The cascade's request path and its sampling, each given the values it reads."""
    unknown = [t for t in config.tiers if t not in deployments]
    if unknown:
        raise ValueError(f"cascade {config.name!r}: unknown tiers {unknown}")
    if len(config.tiers) < 2:
        raise ValueError(f"cascade {config.name!r}: needs at least two tiers")
    tiers = [deployments[t] for t in config.tiers]
    caller, rng, tally = TierCaller(config.name, services), random.Random(), Tally()
    sampling = Sampling(config.name, tiers, caller, slot, services, rng, tally, learner)
    return CascadeTarget(config, tiers, slot, services, caller, sampling, rng, tally, learner)
