"""A cascade's samples: what its quality controller and its learner learn from.

Every request that reached the last tier is a sample at no extra cost (`record_after`); an
accepted answer becomes one with the probability the quality controller sets
(policies/quality_controller.py, `shadow_after`): once the request has settled, a background
task calls the tiers the request did not reach (the last one always) as a side request
(gateway/pipeline.py `SideLane`): its worst case held against every budget the
request hit, its real cost charged to them and to a ledger row of its own (request id
`<id>-shadow`, the same user, trace id and tags plus `cascade-shadow`); a budget that cannot
hold it refuses it, and no sample is taken. Each sample weighs 1 / the probability it was
drawn; it goes to the controller, to the database (with each cheaper answer's features, and
the text when `log_prompts` is on) and to the cascade's learner.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from gateway.core.asked import Asked
from gateway.core.bodies import answer_text
from gateway.core.context import Decisions, RequestContext
from gateway.routing.cascade_services import Learner, Services, StateSlot, Tally
from gateway.routing.confidence import QueryVector, TierAnswer
from gateway.routing.tier_call import TierCaller
from gateway.storage.cascade_samples import SampleRecord
from gateway.upstream.deployments import Deployment
from gateway.upstream.worst_case import worst_case
from policies.agreement import answers_agree
from policies.quality import Sample
from policies.quality_controller import QualityController
from policies.scorers.answer_features import features

log = logging.getLogger("costgate.cascade")
SHADOW_TAG = "cascade-shadow"


@dataclass(frozen=True, slots=True)
class ShadowDraw:
    """A shadow sample drawn for a request: the tiers' answers it had, what it weighs."""

    tried: list[TierAnswer]
    weight: float


@dataclass
class Sampling:
    """A cascade's sampling, given the values it needs: its name and tiers, the `TierCaller` that
    asks them, the `StateSlot` its decisions are read from (at each use: a refit may have replaced
    them), what it shares with the gateway, the cascade's random draws, the `Tally` a shadow's cost
    is counted in, and the learner each sample is handed to."""

    name: str
    tiers: list[Deployment]
    caller: TierCaller
    slot: StateSlot
    services: Services
    rng: random.Random
    tally: Tally
    learner: Learner | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    # Samples are stored one at a time, in the order they were recorded (asyncio.Lock is
    # first come, first served): the store's row order is the controller's, so a refit's
    # held-back share and folds (which follow the rows' order) do not depend on which of
    # several concurrent inserts committed first.
    _storing: asyncio.Lock = field(default_factory=asyncio.Lock)

    def shadow_draw(
        self, ctx: RequestContext, controller: QualityController, tried: list[TierAnswer], weight: float = 1.0
    ) -> ShadowDraw | None:
        """An answer of `tried[-1]` was accepted: with the probability `controller` (the request's)
        sets, the tiers it skipped are to be asked once the request has settled (`weight`: what
        the request already weighs); None: not this time."""
        # A sample needs every tier's answer; one that failed cannot be asked again afterwards.
        if not tried or [a.tier for a in tried] != list(range(len(tried))):
            return None
        probability = controller.shadow_probability()
        if probability <= 0 or self.rng.random() >= probability:
            return None
        ctx.trace_id = ctx.trace_id or ctx.request_id  # ties the shadow row to this request
        return ShadowDraw(list(tried), weight / probability)  # `weight`: the router's explore share

    def shadow(self, ctx: RequestContext, draw: ShadowDraw) -> None:
        """Start the drawn shadow sample. Called once the request settled: its hold is released
        and its row written before the shadow's own hold is taken, so the two never compete for
        one budget."""
        self._spawn(self._shadow(ctx, draw.tried, draw.weight))

    def record_after(self, ctx: RequestContext, tried: list[TierAnswer], last_text: str, weight: float) -> None:
        """The last tier answered after every cheaper one: a sample, at no extra cost."""
        self._spawn(self.record(ctx.request_id, tried, last_text, weight))

    async def record_after_stream(
        self, relay: AsyncIterator[bytes], ctx: RequestContext, tried: list[TierAnswer], weight: float
    ) -> AsyncIterator[bytes]:
        """The last tier's stream, passed on; a sample once it has ended well."""
        async for chunk in relay:
            yield chunk
        if ctx.outcome.error is None:
            self.record_after(ctx, tried, "".join(ctx.completion_text), weight)

    async def record(self, request_id: str, tried: list[TierAnswer], last_text: str, weight: float) -> None:
        sample = Sample(
            tuple(a.confidence for a in tried), tuple(answers_agree(a.item.answer, last_text) for a in tried), weight
        )
        self.slot.current.controller.add(sample)  # the controller in use now: a refit's, once swapped
        vectors = tuple(tuple(features(a.item)) for a in tried)
        texts = None
        if self.services.log_prompts:
            texts = {
                "query": tried[0].item.query if tried else "",
                "answers": [a.item.answer for a in tried] + [last_text],
            }
        async with self._storing:
            await self.services.store.add(SampleRecord(self.name, request_id, sample, vectors, texts))
            if self.learner is not None:  # once stored: the refit it may start reads it back
                self.learner.sampled(request_id, sample, vectors)

    def worst_case(self, ctx: RequestContext, reached: int) -> Decimal:
        """The most a shadow sample that starts at tier `reached` can cost."""
        tiers, scorer = self.tiers, self.slot.current.scorer
        cost = sum((worst_case(ctx, dep) for dep in tiers[reached:]), Decimal(0))
        return cost + sum((scorer.worst_case_cost(ctx) for _ in tiers[reached:-1]), Decimal(0))

    async def drain(self) -> None:
        """Let in-flight shadow work finish (at shutdown), so its calls reach the ledger."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=30)

    async def _shadow(self, ctx: RequestContext, tried: list[TierAnswer], weight: float) -> None:
        """After an accepted cheaper answer: ask the tiers it skipped, as a side request of its own
        (its own ledger row and budget hold, the same team, user, tags and trace)."""
        body = {k: v for k, v in ctx.sent_body.items() if k not in ("stream", "stream_options")}
        shadow = RequestContext(
            request_id=f"{ctx.request_id}-shadow",
            endpoint=ctx.endpoint,
            body=body,
            api_key=None,
            headers={},
            principal=ctx.principal,
            asked=Asked(ctx.asked.model, user=ctx.asked.user, tags=tuple(dict.fromkeys((*ctx.asked.tags, SHADOW_TAG)))),
            trace_id=ctx.trace_id,
            # the request's class: a batch request's sample is batch work too
            decided=Decisions(priority=ctx.decided.priority),
        )
        await self.services.side_lane.handle(shadow, ShadowSample(self, ctx.request_id, tried, weight))
        self.tally.count_shadow(shadow.meter.cost)
        status = "ok" if shadow.outcome.error is None else "error"
        self.services.policy_metrics.cascade_shadow_calls.labels(self.name, status).inc()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("cascade %s: shadow work failed", self.name, exc_info=task.exception())


@dataclass(frozen=True, slots=True)
class ShadowSample:
    """The side call of a shadow sample: the tiers an accepted answer skipped, then the last."""

    sampling: Sampling
    request_id: str  # the request the sample belongs to
    tried: list[TierAnswer]
    weight: float

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        return self.sampling.worst_case(ctx, len(self.tried))

    async def run(self, ctx: RequestContext) -> None:
        s, tried = self.sampling, list(self.tried)
        scorer = s.slot.current.scorer  # the one in use now: the rest of the sample is rated by it
        vector = QueryVector.known(tried[0].item.query_vector if tried else None)
        for tier in range(len(tried), len(s.tiers) - 1):
            tried.append(await s.caller.ask(ctx, scorer, tier, s.tiers[tier], vector))
        completion = await s.services.upstream.answer(ctx, s.tiers[-1])
        ctx.outcome.answered(completion.body)  # the last tier's answer, for the side pipeline's settles
        await self.sampling.record(self.request_id, tried, answer_text(completion.body), self.weight)
