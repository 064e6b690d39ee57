"""What if: a cascade replayed over recorded traffic, without calling a provider.

Each recorded request carries the cheap tier's answer and the last tier's (a JSONL of requests
and answers, or the shadow samples and kept text a gateway stored), and what each call cost.
`replay` runs them, in order, through the same pieces the gateway runs (policies/
quality_controller.py, the early fits of policies/scorers/first_fit.py and the refits of
policies/scorers/refit.py, the router of policies/precall.py), starting from nothing as a new
cascade would, and counts every call: the cheap tier where called, the last tier on every
escalation, skip and shadow sample. No call is made: the answers are at hand.

`estimate` says what to expect from traffic like the recorded one: the replay over `draws`
resamples of the requests (with replacement, in random order), its mean and a two-sided interval
at `level` for the cost against the last tier alone, the dollars saved and the quality (agreement
with the last tier, and accuracy against labels when the rows have them).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from policies.precall import PrecallRouter, router_at
from policies.quality import Sample, z_of
from policies.quality_controller import Mode, Policy, QualityController
from policies.scorers import Scored
from policies.scorers.answer_features import features
from policies.scorers.first_fit import first_fit
from policies.scorers.fit_schedule import FitSchedule
from policies.scorers.learned import LearnedModel
from policies.scorers.refit import TrainingRow, refit, rescored, rows_of, upgrade
from policies.scorers.rules import rule_violation


@dataclass(frozen=True)
class Recorded:
    """One recorded request: the cheap tier's answer (with the query), whether it agrees with the
    last tier's, what each tier's call cost, and, when known, whether each answer was right."""

    item: Scored
    agrees: bool
    cheap_cost: Decimal
    last_cost: Decimal
    cheap_right: bool | None = None
    last_right: bool | None = None


@dataclass
class Outcome:
    requests: int = 0
    cost: Decimal = Decimal(0)
    last_only: Decimal = Decimal(0)
    agreeing: int = 0  # answers that agree with the last tier's (the last tier's own included)
    right: int = 0
    last_right: int = 0
    cheap_calls: int = 0
    accepted: int = 0
    routed: int = 0
    shadow_calls: int = 0
    certified_at: int | None = None
    # requests, cost ratio, agreement, mode, accuracy ratio (None without labels): every 10th request
    curve: list[tuple[int, float, float, str, float | None]] = field(default_factory=list)

    @property
    def cost_ratio(self) -> float:
        return float(self.cost / self.last_only) if self.last_only else 1.0

    @property
    def saved(self) -> Decimal:
        return self.last_only - self.cost

    @property
    def agreement(self) -> float:
        return self.agreeing / self.requests if self.requests else 1.0

    @property
    def accuracy_ratio(self) -> float | None:
        return self.right / self.last_right if self.last_right else None


@dataclass
class Learner:
    """The gateway's learning (gateway/routing/learning.py), on the replay's samples."""

    policy: Policy
    every: int = 200
    router_on: bool = True
    model: LearnedModel | None = None
    controller: QualityController = field(init=False)
    router: PrecallRouter | None = None
    samples: list[tuple[Sample, tuple[tuple[float, ...], ...]]] = field(default_factory=list)
    schedule: FitSchedule = field(init=False)

    def __post_init__(self) -> None:
        self.controller = QualityController(self.policy, None)
        self.schedule = FitSchedule.of(self.every, early=True)  # a new cascade on `rules`

    def confidence(self, vector: Sequence[float]) -> float:
        return 1.0 if self.model is None else self.model.confidence_of(vector)

    def sampled(self, sample: Sample, vector: tuple[float, ...]) -> None:
        self.controller.add(sample)
        self.samples.append((sample, (vector,)))
        self.schedule.sampled()
        if self.schedule.due:
            self.schedule.started()
            self.update()

    def update(self) -> None:
        rows = [r for s, v in self.samples for r in rows_of(s, v, None, None)]
        if self.model is None and self.schedule.before_held_back:
            self._early(rows)
        elif self.model is None:
            result = upgrade(rows, self.samples, self.policy)
            if result.model is not None and result.controller is not None:
                self.model, self.controller = result.model, result.controller
            else:
                self.controller.keep_learning(None)
        else:
            self._refit(rows, self.model)
        self._route()

    def _early(self, rows: list[TrainingRow]) -> None:
        result = first_fit(rows, self.samples, self.policy)
        candidate = result.controller
        if result.model is not None and candidate is not None and candidate.mode is Mode.CERTIFIED:
            self.model, self.controller = result.model, candidate
        else:
            hopeful = candidate is not None and candidate.mode is Mode.LEARNING
            self.controller.keep_learning("an early fit may yet certify" if hopeful else None)

    def _refit(self, rows: list[TrainingRow], current: LearnedModel) -> None:
        new, _ = refit(rows, current, self.controller.rejected)
        if new is not None:
            controller = QualityController(self.policy, new.calibration)
            controller.add(*(rescored(s, v, new) for s, v in self.samples))
            self.model, self.controller = new, controller

    def _route(self) -> None:
        threshold = self.controller.threshold
        if not self.router_on or threshold is None:
            self.router = None
            return
        self.router = router_at(threshold, self.samples, self.model)


def replay(
    rows: Sequence[Recorded], policy: Policy, rng: random.Random, router: bool = True, every: int = 200
) -> Outcome:
    """The rows, in order, through a new cascade (see the module's docstring)."""
    learner, out = Learner(policy, every, router), Outcome()
    for row in rows:
        _request(row, learner, out, rng)
        if out.certified_at is None and learner.controller.mode is Mode.CERTIFIED:
            out.certified_at = out.requests
        if out.requests % 10 == 0:
            mode = learner.controller.mode.value
            out.curve.append((out.requests, out.cost_ratio, out.agreement, mode, out.accuracy_ratio))
    return out


def _request(row: Recorded, learner: Learner, out: Outcome, rng: random.Random) -> None:
    out.requests += 1
    out.last_only += row.last_cost
    out.last_right += bool(row.last_right)
    controller = learner.controller
    route = controller.route(rng)
    vector = tuple(features(row.item))
    weight = route.weight
    if route.call_cheap and learner.router is not None and controller.threshold is not None:
        cheap, last = float(row.cheap_cost) or 1e-12, float(row.last_cost)
        if learner.router.skips(vector, cheap, last):
            if rng.random() >= learner.router.explore:
                route = route.__class__(False, 1.0)
                out.routed += 1
            else:
                weight /= learner.router.explore
    if not route.call_cheap:
        out.cost += row.last_cost
        out.agreeing += 1
        out.right += bool(row.last_right)
        return
    out.cheap_calls += 1
    out.cost += row.cheap_cost
    confidence = 0.0 if rule_violation(row.item) else learner.confidence(vector)
    threshold = controller.threshold
    if threshold is not None and confidence >= threshold:
        out.accepted += 1
        out.agreeing += row.agrees
        out.right += bool(row.cheap_right)
        p = controller.shadow_probability()
        if p > 0 and rng.random() < p:
            out.shadow_calls += 1
            out.cost += row.last_cost
            learner.sampled(Sample((confidence,), (row.agrees,), weight / p), vector)
        return
    out.cost += row.last_cost
    out.agreeing += 1
    out.right += bool(row.last_right)
    learner.sampled(Sample((confidence,), (row.agrees,), weight), vector)


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float


@dataclass(frozen=True)
class Estimate:
    requests: int
    draws: int
    level: float
    cost_ratio: Interval
    saved_usd: Interval  # over as many requests as recorded
    agreement: Interval
    accuracy_ratio: Interval | None
    certified_share: float  # of the draws, those in which a threshold was certified


def interval(values: Sequence[float], level: float) -> Interval:
    mean = statistics.fmean(values)
    spread = z_of(0.5 + level / 2) * (statistics.pstdev(values) if len(values) > 1 else 0.0)
    return Interval(mean, mean - spread, mean + spread)


def estimate(
    rows: Sequence[Recorded],
    policy: Policy,
    draws: int = 20,
    level: float = 0.9,
    router: bool = True,
    seed: int = 0,
    weights: Sequence[float] | None = None,
) -> Estimate:
    """What a cascade would do on traffic like `rows` (see the module's docstring). `weights`:
    what each row stands for (a stored sample's 1 / the probability it was sampled), so that
    the resamples are drawn as the traffic was, not as it was sampled."""
    rng = random.Random(seed)
    outcomes = []
    for _ in range(draws):
        drawn = rng.choices(rows, weights=weights, k=len(rows))
        outcomes.append(replay(drawn, policy, random.Random(rng.random()), router))
    accuracy = [o.accuracy_ratio for o in outcomes]
    return Estimate(
        len(rows),
        draws,
        level,
        interval([o.cost_ratio for o in outcomes], level),
        interval([float(o.saved) for o in outcomes], level),
        interval([o.agreement for o in outcomes], level),
        None if any(a is None for a in accuracy) else interval([a for a in accuracy if a is not None], level),
        sum(o.certified_at is not None for o in outcomes) / draws,
    )


def interval_json(i: Interval) -> dict:
    return {"mean": round(i.mean, 4), "low": round(i.low, 4), "high": round(i.high, 4)}


def report(found: Estimate) -> dict:
    """The estimate as `costgate whatif` prints it and /admin/cascades/{name}/whatif returns it."""
    return {
        "requests": found.requests,
        "draws": found.draws,
        "level": found.level,
        "cost_vs_last_tier": interval_json(found.cost_ratio),
        "saved_usd": interval_json(found.saved_usd),
        "agreement_with_last_tier": interval_json(found.agreement),
        "accuracy_vs_last_tier": None if found.accuracy_ratio is None else interval_json(found.accuracy_ratio),
        "certified_in_share_of_draws": found.certified_share,
    }
