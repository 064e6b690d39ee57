"""What the tests of a cascade's learning (gateway/routing/learning.py) share, in-process: the
sample store and the feedback store faked at their methods, the learning built around a slot of
its own, and a stand-in for its update that the test releases, so the event loop is driven by
asyncio events, no sleeps."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry
from sqlalchemy.exc import SQLAlchemyError

from gateway.config.settings import CascadeConfig
from gateway.routing.cascade import initial_state
from gateway.routing.cascade_metrics import PolicyMetrics
from gateway.routing.cascade_services import Services, StateSlot
from gateway.routing.confidence import PureConfidence
from gateway.routing.learning import Learning, learning_for
from gateway.storage.cascade_samples import StoredSample
from gateway.storage.verdict_store import FeedbackRow
from policies.answer_verdict import VerdictCount
from policies.quality import Sample
from policies.scorers.answer_features import NAMES
from policies.scorers.learned import LearnedModel, LearnedScorer, LogisticModel
from policies.scorers.refit import Verdict as RefitVerdict

NAME = "team/cascade"  # written to disk as team_cascade.learned.json
EVERY = 10
VECTOR = tuple(0.0 for _ in NAMES)


def model(bias: float) -> LearnedModel:
    """A learned scorer that gives every answer the same confidence, sigmoid(bias)."""
    n = len(NAMES)
    return LearnedModel(LogisticModel(NAMES, np.zeros(n), np.ones(n), np.zeros(n), bias))


def confidence(m: LearnedModel) -> float:
    return m.confidence_of(VECTOR)


class FakeSamples:
    """The sample store at the two methods learning reads; `stored` may be held at a gate."""

    def __init__(self, stored: list[StoredSample]) -> None:
        self.samples = stored
        self.gate: asyncio.Event | None = None
        self.reading = asyncio.Event()

    async def recent(self, cascade: str, limit: int) -> list[Sample]:
        return [s.sample for s in self.samples]

    async def stored(self, cascade: str, limit: int) -> list[StoredSample]:
        """What was stored when the read began (a database snapshot), after the gate."""
        found = list(self.samples)
        self.reading.set()
        if self.gate is not None:
            await self.gate.wait()
        return found


class FakeFeedback:
    """The feedback store: verdict counts and verdict rows; `verdicts` may be held at a gate
    (it is read after learning starts keeping the samples taken meanwhile aside)."""

    def __init__(self, counts: list[VerdictCount] | None = None, rows: list[FeedbackRow] | None = None) -> None:
        self.counts_list = counts or []
        self.answered: dict[tuple[str, str], dict[str, int]] = {}  # (cascade, tier) -> team -> fresh answers
        self.rows = rows or []
        self.gate: asyncio.Event | None = None
        self.reading = asyncio.Event()
        self.down = False

    async def counts(self) -> list[VerdictCount]:
        if self.down:
            raise SQLAlchemyError("store down")
        return list(self.counts_list)

    async def answered_counts(self, requested_model: str, served_model: str) -> dict[str, int]:
        return dict(self.answered.get((requested_model, served_model), {}))

    async def verdicts(self, requested_model: str | None = None) -> list[FeedbackRow]:
        self.reading.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            raise SQLAlchemyError("store down")
        return [r for r in self.rows if r.request.requested_model == requested_model]


def stored(n: int, agrees: bool = True) -> list[StoredSample]:
    return [StoredSample(f"req_{i}", Sample((0.3,), (agrees,)), (VECTOR,)) for i in range(n)]


def learning(
    tmp_path: Path,
    samples: FakeSamples | None = None,
    feedback: FakeFeedback | None = None,
    scorer: str = "scorers/mine.json",
    current: Any = None,
) -> Learning:
    """A cascade's learning, with the slot it writes (its cascade's request path is not needed)."""
    config = CascadeConfig(name=NAME, tiers=["cheap", "best"], scorer=scorer, refit_every=EVERY, max_samples=1000)
    confidence_ = PureConfidence(LearnedScorer(model(0.0)) if current is None else current)
    store = samples or FakeSamples([])
    services = Services(None, None, None, PolicyMetrics(CollectorRegistry()), store)  # type: ignore[arg-type]
    slot = StateSlot(initial_state(config, confidence_))
    return learning_for(config, services, slot, feedback, tmp_path)  # type: ignore[arg-type]


def refits(learn: Learning, outcome: str) -> float:
    metrics = learn.services.policy_metrics
    return (
        metrics.registry.get_sample_value("costgate_cascade_refits_total", {"cascade": NAME, "outcome": outcome}) or 0
    )


def verdict(replace: bool) -> RefitVerdict:
    return RefitVerdict(replace, 0.6, 0.8 if replace else 0.5, 30, "candidate ranks better" if replace else "no gain")


def scorer_model(learn: Learning) -> LearnedModel:
    """The learned model of the scorer in the slot now."""
    scorer = learn.slot.current.scorer
    assert isinstance(scorer, PureConfidence) and isinstance(scorer.scorer, LearnedScorer)
    return scorer.scorer.model


class Gated:
    """`Learning.update` replaced: each run sets `started` and waits for `release`."""

    def __init__(self, fail_first: bool = False) -> None:
        self.runs = 0
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.fail_first = fail_first

    async def __call__(self) -> None:
        self.runs += 1
        self.started.set()
        await self.release.wait()
        self.release.clear()
        if self.fail_first and self.runs == 1:
            raise RuntimeError("fit blew up")

    async def next_start(self) -> None:
        await asyncio.wait_for(self.started.wait(), 30)
        self.started.clear()
