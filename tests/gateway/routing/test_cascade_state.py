"""A cascade's state flows one way (issue 25, item 3): the learning replaces the whole
`CascadeState` (scorer, controller, router) in the cascade's `StateSlot`; a request reads it once,
at its start, and decides by that one value to its end. In-process, through a running gateway:
a swap that lands while a request is being scored is seen by the next request, never half by
the one under way (scored by one scorer, judged by another controller's threshold)."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from gateway.core.context import RequestContext
from gateway.routing.cascade_services import CascadeState
from policies.quality import Sample
from policies.quality_controller import Estimate, Mode, Policy, QualityController, Route
from policies.scorers import Scored
from policies.threshold_calibration import Calibration
from tests.gateway.in_process import chat_answer, http_client, new_key, openai_model, running_app, settings_for


@dataclass
class Scorer:
    """A confidence of 0.7 for every answer; `gate`: held there until the test lets it go."""

    gate: asyncio.Event | None = None
    scoring: asyncio.Event = field(default_factory=asyncio.Event)
    scored: int = 0
    needs_logprobs: bool = False
    calibration: Calibration | None = None

    async def score(self, ctx: RequestContext, item: Scored) -> float:
        self.scored += 1
        self.scoring.set()
        if self.gate is not None:
            await self.gate.wait()
        return 0.7

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        return Decimal(0)


@dataclass
class Certified:
    """A controller certified at `threshold` that never samples (what a refit would hand over)."""

    threshold: float
    mode: Mode = Mode.CERTIFIED
    real: QualityController = field(default_factory=lambda: QualityController(Policy(0.9, shadow_rate=0.0), None))

    def route(self, rng: random.Random) -> Route:
        return Route(True, 1.0)

    def shadow_probability(self) -> float:
        return 0.0

    def add(self, *samples: Sample) -> None:  # an escalated request's sample
        self.real.add(*samples)

    def estimate(self) -> Estimate:
        return self.real.estimate()


async def test_a_swap_while_a_request_is_scored_is_seen_whole_by_the_next_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def upstream(request: httpx.Request) -> httpx.Response:
        model = json.loads(request.content)["model"]
        return httpx.Response(200, json=chat_answer("#### 4", model=model))

    cascade = {"name": "auto", "tiers": ["weak", "strong"], "shadow_rate": 0.0}
    settings = settings_for(tmp_path, [openai_model("weak"), openai_model("strong")], cascades=[cascade])
    async with running_app(settings, transport=httpx.MockTransport(upstream)) as app:
        key = await new_key(app)
        target = app.state.gateway.routing.cascades["auto"]
        old, new = Scorer(gate=asyncio.Event()), Scorer()
        # the test stands in for the learning, the slot's one writer: 0.7 >= 0.6 accepts the cheap answer
        target.slot.replace(CascadeState(old, Certified(0.6)))  # type: ignore[arg-type]
        ask = {"model": "auto", "messages": [{"role": "user", "content": "What is 2 + 2?"}]}
        headers = {"authorization": f"Bearer {key}"}
        async with http_client(app) as client:
            first = asyncio.create_task(client.post("/v1/chat/completions", json=ask, headers=headers))
            await asyncio.wait_for(old.scoring.wait(), 30)  # the first request is being scored by `old`
            # a refit lands: a new scorer with its own controller, whose 0.8 rejects a 0.7
            target.slot.replace(CascadeState(new, Certified(0.8)))  # type: ignore[arg-type]
            assert old.gate is not None
            old.gate.set()
            r = await asyncio.wait_for(first, 30)
            # judged by the threshold of the scorer that rated it (0.6), not the new one's (0.8)
            assert r.status_code == 200 and r.headers["x-costgate-model"] == "weak", r.text
            r = await client.post("/v1/chat/completions", json=ask, headers=headers)
            assert r.status_code == 200 and r.headers["x-costgate-model"] == "strong", r.text
            await target.drain()
        assert (old.scored, new.scored) == (1, 1)  # each request scored by one scorer, its own state's
        # each request was counted once it settled (the pipeline tells the cascade), and nothing of
        # either is left waiting: one answered by the cheap tier, one escalated
        assert (target.tally.answered, target.tally.escalated) == (2, 1) and target.follow_ups == {}
        assert "shadow work failed" not in caplog.text  # the escalated request's sample went to the new controller
