"""FrugalGPT cascades: a model name whose tiers are tried cheapest first.

Each tier but the last answers whole (not streamed); a scorer rates the answer, and a
confidence at or above the threshold returns it, otherwise the next tier is asked. The last
tier's answer is returned as is. The client sees one answer: `x-costgate-model` names the
tier that answered, and the request is charged the sum of every call made for it.

Streaming, the trade-off taken: a cheaper tier's answer must be scored before the client sees
it, so it is fetched whole and, when accepted, replayed as server-sent events (time to first
token is that tier's whole latency — cheap tiers are usually fast). When the request reaches
the last tier, that tier is streamed live, token by token, since nothing judges it.

Quality target: every request that reached the last tier is a sample at no extra cost; an
accepted answer becomes one with the probability the quality controller sets
(policies/quality_controller.py): once the request has settled, a background task calls the
tiers the request did not reach (the last one always) as a side request (gateway/pipeline.py
`build_side_stages`): its worst case held against every budget the request hit, its real cost
charged to them and to a ledger row of its own (request id `<id>-shadow`, the same user, trace
id and tags plus `cascade-shadow`); a budget that cannot hold it refuses it, and no sample is
taken. Each sample
weighs 1 / the probability it was drawn. The controller turns them, with the scorer's
calibration, into the cheapest threshold whose quality bound holds the target, or tells the
cascade to escalate everything, or to skip the cheap tiers its scorer cannot judge.

Learning: a cascade on a learned scorer refits it from its samples as they accumulate
(gateway/routing/learning.py) and swaps in the new scorer, with a controller rebuilt on it, only
when it ranks held-back samples better; one on `rules` or `logprob` is upgraded to a learned
scorer trained on its samples the same way, when that also certifies a threshold. `Tally`
counts what the cascade did since start.

Circuit breakers: a tier whose breaker is open is skipped; a failing tier falls through to
the next; when the last tier fails, the best answer a cheaper tier gave is returned instead.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

import orjson
from starlette.responses import Response, StreamingResponse

from gateway.bodies import answer_text, query_text
from gateway.calls import call, complete, open_relay, upstream_body
from gateway.context import Endpoint, RequestContext
from gateway.deployments import Deployment
from gateway.errors import InvalidRequest, UpstreamError
from gateway.metrics import Metrics
from gateway.routing.confidence import Confidence, Embed, QueryVector, scored_answer
from gateway.routing.metrics import PolicyMetrics
from gateway.routing.target import circuit_open
from gateway.settings import CascadeConfig
from gateway.sse import SSE_HEADERS, replay
from gateway.storage.cascade_samples import SampleRecord, SampleStore
from gateway.worst_case import worst_case
from policies.agreement import answers_agree
from policies.breaker import Breakers
from policies.pricing import Usage, cost_of, format_usd
from policies.quality import Sample
from policies.quality_controller import Mode, Policy, QualityController
from policies.scorers import Scored
from policies.scorers.features import features
from policies.scorers.rules import rule_violation

log = logging.getLogger("costgate.cascade")
DEFAULT_THRESHOLD = 0.5
SHADOW_TAG = "cascade-shadow"


class SideLane(Protocol):
    """The side pipeline (gateway/pipeline.py `build_side_stages`): records a side request and
    holds its worst case against the budgets it hits, then runs its `side_call`."""

    async def handle(self, ctx: RequestContext) -> Response: ...


class Learner(Protocol):
    """Refits a cascade's scorer from its samples (gateway/routing/learning.py)."""

    def sampled(self, request_id: str, sample: Sample, vectors: tuple[tuple[float, ...], ...]) -> None:
        """A new sample was taken and stored (with each cheap answer's feature vector)."""
        ...

    async def load(self) -> None:
        """At start: the scorer a previous run refitted, and the stored samples rescored by it."""
        ...


@dataclass(slots=True)
class Tally:
    """What a cascade did since this gateway started (each replica counts its own), for
    /admin/cascades: the requests it answered, how many the last tier answered, what they were
    charged, what the last tier alone would have charged them, and what the shadow samples cost.

    For a request the last tier answered, "the last tier alone" is that call's own cost; for one
    a cheaper tier answered, the last tier's price for the same tokens (the cheap answer's prompt
    and completion: an estimate, as the last tier's answer was never asked for)."""

    answered: int = 0
    escalated: int = 0
    charged: Decimal = Decimal(0)
    always_last: Decimal = Decimal(0)
    shadow: Decimal = Decimal(0)

    @property
    def saved(self) -> Decimal:
        """Against sending every request to the last tier: every cheap attempt, judge and shadow
        call paid for."""
        return self.always_last - self.charged - self.shadow

    @property
    def escalation_rate(self) -> float | None:
        return self.escalated / self.answered if self.answered else None

    def count(self, ctx: RequestContext, escalated: bool, always_last: Decimal) -> None:
        if ctx.error is not None or ctx.status_code >= 400:
            return
        self.answered += 1
        self.escalated += escalated
        self.charged += ctx.cost
        self.always_last += always_last


@dataclass(frozen=True, slots=True)
class Services:
    """What every cascade shares with the rest of the gateway."""

    breakers: Breakers
    side_lane: SideLane
    metrics: Metrics
    policy_metrics: PolicyMetrics
    store: SampleStore
    log_prompts: bool = False
    embed: Embed | None = None  # the queries' MiniLM vectors, for their topic; None: taken as the mean


@dataclass(slots=True)
class TierAnswer:
    tier: int
    dep: Deployment
    body: dict[str, Any]  # as the client would see it (logprobs it did not ask for removed)
    raw: bytes
    item: Scored
    confidence: float
    usage: Usage = field(default_factory=Usage)  # of this tier's own call


@dataclass
class CascadeTarget:
    config: CascadeConfig
    tiers: list[Deployment]
    scorer: Confidence
    controller: QualityController
    services: Services
    rng: random.Random = field(default_factory=random.Random)
    learner: Learner | None = None  # refits (or upgrades to) a learned scorer from the samples
    tally: Tally = field(default_factory=Tally)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def name(self) -> str:
        return self.config.name

    def threshold(self, tier: int) -> float | None:
        """The confidence tier `tier` needs; None: escalate everything (the target demands it)."""
        if self.controller.mode is not Mode.FIXED:
            return self.controller.threshold
        configured = self.config.thresholds or []
        return configured[tier] if tier < len(configured) else (configured[-1] if configured else DEFAULT_THRESHOLD)

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        cost = sum((worst_case(ctx, dep) for dep in self.tiers), Decimal(0))
        cost += sum((self.scorer.worst_case_cost(ctx) for _ in self.tiers[:-1]), Decimal(0))
        return cost  # a shadow sample is a side request with a hold of its own (ShadowSample)

    async def answer(self, ctx: RequestContext) -> Response:
        if ctx.endpoint is Endpoint.EMBEDDINGS:
            raise InvalidRequest(
                f"{self.name!r} is a cascade of generation models; it makes no embeddings", param="model"
            )
        route = self.controller.route(self.rng)
        if not route.call_cheap:  # the scorer cannot be trusted here: the cheap tiers would only add cost
            return await self._answer_last(ctx, self.tiers[-1], None)
        tried: list[TierAnswer] = []
        error: UpstreamError | None = None
        vector = QueryVector.start(self.services.embed, query_text(ctx.body))
        try:
            for tier, dep in enumerate(self.tiers[:-1]):
                try:
                    answer = await self._ask(ctx, tier, dep, vector)
                except UpstreamError as err:
                    error = err
                    continue
                tried.append(answer)
                threshold = self.threshold(tier)
                if threshold is not None and answer.confidence >= threshold:
                    return self._deliver(ctx, answer, tried)
        finally:
            vector.cancel()  # every tier asked has it; a pass still pending is not needed
        last = self.tiers[-1]
        try:
            return await self._answer_last(ctx, last, tried, route.weight)
        except UpstreamError as err:
            error = err
        if tried:  # the last tier failed: a cheaper answer beats an error
            return self._deliver(ctx, max(tried, key=lambda a: a.confidence), None)
        assert error is not None
        raise error

    async def _ask(self, ctx: RequestContext, tier: int, dep: Deployment, vector: QueryVector) -> TierAnswer:
        if not self.services.breakers.allow(dep.name):
            raise circuit_open(self.services.breakers, dep.name)
        body = upstream_body(ctx, dep, False)
        body.pop("stream", None)
        body.pop("stream_options", None)
        added_logprobs = self.scorer.needs_logprobs and not body.get("logprobs")
        if added_logprobs:
            body["logprobs"] = True if ctx.endpoint is Endpoint.CHAT else 1
        before = ctx.usage
        try:
            completion = await complete(ctx, dep, body)
        except UpstreamError as err:
            self._failed(dep, err)
            raise
        self.services.breakers.record(dep.name, ok=True)
        after = ctx.usage
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
        return TierAnswer(tier, dep, answer_body, raw, item, await self._score(ctx, item), usage)

    async def _score(self, ctx: RequestContext, item: Scored) -> float:
        if rule_violation(item):
            return 0.0
        try:
            return min(1.0, max(0.0, await self.scorer.score(ctx, item)))
        except UpstreamError as err:  # a judge that cannot grade: escalate rather than fail
            log.warning("cascade %s: scorer failed (%s); escalating", self.name, err.message)
            return 0.0

    def _failed(self, dep: Deployment, err: UpstreamError) -> None:
        self.services.metrics.upstream_errors.labels(dep.name, err.code or "").inc()
        if err.deployment_fault:
            self.services.breakers.record(dep.name, ok=False)

    def _deliver(self, ctx: RequestContext, answer: TierAnswer, sample_from: list[TierAnswer] | None) -> Response:
        ctx.served_model, ctx.provider = answer.dep.name, answer.dep.config.provider
        ctx.response_body = answer.body
        self.services.policy_metrics.cascade_answers.labels(self.name, answer.dep.name).inc()
        instead = cost_of(answer.usage, self.tiers[-1].price) * ctx.price_factor  # the last tier, same tokens
        ctx.after_settle.append(lambda: self.tally.count(ctx, False, instead))
        # A sample needs every tier's answer; one that failed cannot be asked again afterwards.
        complete = sample_from is not None and [a.tier for a in sample_from] == list(range(len(sample_from)))
        shadow = self.controller.shadow_probability()
        if complete and sample_from and shadow > 0 and self.rng.random() < shadow:
            ctx.trace_id = ctx.trace_id or ctx.request_id  # ties the shadow row to this request
            tried, weight = list(sample_from), 1.0 / shadow
            # Once the request settled: its hold is released and its row written before the
            # shadow's own hold is taken, so the two never compete for one budget.
            ctx.after_settle.append(lambda: self._spawn(self._shadow(ctx, tried, weight)))
        if ctx.stream:
            return StreamingResponse(
                self._replay(ctx, answer.body), media_type="text/event-stream", headers=SSE_HEADERS
            )
        return Response(answer.raw, media_type="application/json")

    @staticmethod
    def _replay(ctx: RequestContext, body: dict[str, Any]) -> AsyncIterator[bytes]:
        """An accepted tier's whole answer, streamed; the request's text as the relay would collect it."""
        ctx.wants_usage_chunk = ctx.view.include_usage
        ctx.first_token_at = time.perf_counter()
        ctx.completion_text = [answer_text(body)]
        return replay(ctx.endpoint, body, ctx.usage, format_usd(ctx.cost), ctx.wants_usage_chunk)

    async def _answer_last(
        self, ctx: RequestContext, dep: Deployment, sample_from: list[TierAnswer] | None, weight: float = 1.0
    ) -> Response:
        if not self.services.breakers.allow(dep.name):
            raise circuit_open(self.services.breakers, dep.name)
        before = ctx.cost  # what the last tier's own call costs is what it adds (known once settled)
        try:
            if ctx.stream:
                relay = await open_relay(ctx, dep)
            else:
                completion = await call(ctx, dep)
        except UpstreamError as err:
            self._failed(dep, err)
            raise
        self.services.breakers.record(dep.name, ok=True)
        self.services.policy_metrics.cascade_answers.labels(self.name, dep.name).inc()
        ctx.after_settle.append(lambda: self.tally.count(ctx, True, ctx.cost - before))
        complete_sample = sample_from is not None and len(sample_from) == len(self.tiers) - 1
        if ctx.stream:
            body = self._sample_after(relay, ctx, sample_from, weight) if complete_sample and sample_from else relay
            return StreamingResponse(body, media_type="text/event-stream", headers=SSE_HEADERS)
        ctx.response_body = completion.body
        if complete_sample and sample_from:
            self._spawn(self._record(ctx.request_id, sample_from, answer_text(completion.body), weight))
        return Response(completion.raw, media_type="application/json")

    async def _sample_after(
        self, relay: AsyncIterator[bytes], ctx: RequestContext, tried: list[TierAnswer], weight: float
    ) -> AsyncIterator[bytes]:
        async for chunk in relay:
            yield chunk
        if ctx.error is None:
            self._spawn(self._record(ctx.request_id, tried, "".join(ctx.completion_text), weight))

    async def _shadow(self, ctx: RequestContext, tried: list[TierAnswer], weight: float) -> None:
        """After an accepted cheaper answer: ask the tiers it skipped, as a side request of its own
        (its own ledger row and budget hold, the same team, user, tags and trace)."""
        body = {k: v for k, v in ctx.body.items() if k not in ("stream", "stream_options")}
        shadow = RequestContext(
            request_id=f"{ctx.request_id}-shadow",
            endpoint=ctx.endpoint,
            body=body,
            api_key=None,
            headers={},
            principal=ctx.principal,
            user=ctx.user,
            tags=tuple(dict.fromkeys((*ctx.tags, SHADOW_TAG))),
            trace_id=ctx.trace_id,
            requested_model=ctx.requested_model,
            side_call=ShadowSample(self, ctx.request_id, tried, weight),
        )
        await self.services.side_lane.handle(shadow)
        self.tally.shadow += shadow.cost
        status = "ok" if shadow.error is None else "error"
        self.services.policy_metrics.cascade_shadow_calls.labels(self.name, status).inc()

    def shadow_worst_case(self, ctx: RequestContext, reached: int) -> Decimal:
        """The most a shadow sample that starts at tier `reached` can cost."""
        cost = sum((worst_case(ctx, dep) for dep in self.tiers[reached:]), Decimal(0))
        return cost + sum((self.scorer.worst_case_cost(ctx) for _ in self.tiers[reached:-1]), Decimal(0))

    async def _record(self, request_id: str, tried: list[TierAnswer], last_text: str, weight: float) -> None:
        sample = Sample(
            tuple(a.confidence for a in tried), tuple(answers_agree(a.item.answer, last_text) for a in tried), weight
        )
        self.controller.add(sample)
        vectors = tuple(tuple(features(a.item)) for a in tried)
        texts = None
        if self.services.log_prompts:
            texts = {
                "query": tried[0].item.query if tried else "",
                "answers": [a.item.answer for a in tried] + [last_text],
            }
        record = SampleRecord(self.name, request_id, sample, vectors, texts)
        await self.services.store.add(record)
        if self.learner is not None:  # once stored: the refit it may start reads it back
            self.learner.sampled(request_id, sample, vectors)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("cascade %s: shadow work failed", self.name, exc_info=task.exception())

    async def load(self) -> None:
        """Warm the controller with the samples a previous run stored."""
        if self.learner is not None:
            await self.learner.load()
            return
        stored = await self.services.store.recent(self.name, self.config.max_samples)
        if stored:
            self.controller.add(*stored)

    async def drain(self) -> None:
        """Let in-flight shadow work finish (at shutdown), so its calls reach the ledger."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=30)


@dataclass(frozen=True, slots=True)
class ShadowSample:
    """The side call of a shadow sample: the tiers an accepted answer skipped, then the last."""

    cascade: CascadeTarget
    request_id: str  # the request the sample belongs to
    tried: list[TierAnswer]
    weight: float

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        return self.cascade.shadow_worst_case(ctx, len(self.tried))

    async def run(self, ctx: RequestContext) -> None:
        c, tried = self.cascade, list(self.tried)
        vector = QueryVector.known(tried[0].item.query_vector if tried else None)
        for tier in range(len(tried), len(c.tiers) - 1):
            tried.append(await c._ask(ctx, tier, c.tiers[tier], vector))
        completion = await call(ctx, c.tiers[-1])
        ctx.response_body = completion.body  # the last tier's answer, for the side pipeline's settles
        await c._record(self.request_id, tried, answer_text(completion.body), self.weight)


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


def build_cascade(
    config: CascadeConfig, deployments: Mapping[str, Deployment], scorer: Confidence, services: Services
) -> CascadeTarget:
    unknown = [t for t in config.tiers if t not in deployments]
    if unknown:
        raise ValueError(f"cascade {config.name!r}: unknown tiers {unknown}")
    if len(config.tiers) < 2:
        raise ValueError(f"cascade {config.name!r}: needs at least two tiers")
    return CascadeTarget(
        config, [deployments[t] for t in config.tiers], scorer, build_controller(config, scorer), services
    )
