"""The quality controller of one cascade: what the cascade may accept, what it samples, and why.

Modes (the state says which, and why, for /admin):

    certified  a threshold's bound meets the target (policies/quality.py) and it accepts at
               least `min_accept` of the requests (once certified: until even the upper bound
               of that share is under it, so that a dip of the estimate does not flip the
               mode); answers at or above it are returned, and a share of them is
               shadow-sampled: 1 / (their samples so far) times `shadow_boost`, never below
               `shadow_rate`, so the rate starts at 100% and falls as the evidence, and with it
               the bound, tightens
    learning   nothing is proven yet but something may be: every request is escalated, and each
               is a sample at no extra cost (both answers are at hand)
    skip       nothing can be proven (no threshold that accepts `min_accept` of the requests can
               reach the target even at the optimistic end of both bounds, as with the `rules`
               scorer): the cheap tier is skipped, and called on `probe_rate` of requests only to
               keep watching
    fixed      `adaptive: false`: the configured threshold, with the estimate still reported

A cascade whose scorer ships a calibration starts from the cheapest threshold the calibration
certifies; one without starts learning. Samples weigh 1 / the probability they were drawn, so
the estimate is the traffic's, whatever share of each kind of request was sampled. The
calibration is pooled with the traffic (as at most `prior_weight` samples) and dropped
altogether when the traffic contradicts it at the threshold it promised (policies/quality.py,
`contradicts`).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from policies.quality import (
    Bound,
    Bounds,
    Sample,
    TeamVerdicts,
    TrafficCurve,
    bounds,
    cheapest_certified,
    contradicts,
    contributions,
    last_tier_quality,
    worth_trying,
    z_of,
)
from policies.threshold_calibration import CANDIDATES, Calibration


class Mode(StrEnum):
    CERTIFIED = "certified"
    LEARNING = "learning"
    SKIP = "skip"
    FIXED = "fixed"


@dataclass(frozen=True, slots=True)
class Policy:
    """A cascade's quality settings (CascadeConfig's fields of the same names)."""

    target: float
    confidence: float = 0.7
    adaptive: bool = True
    fixed_threshold: float | None = None  # with adaptive off
    min_samples: int = 30  # samples before traffic alone (no calibration) can certify or give up
    max_samples: int = 5000  # the most recent samples the estimate uses
    shadow_rate: float = 0.02  # the floor of the certified shadow rate; 0: no shadow calls
    shadow_boost: float = 0.25  # the first accepted answers are sampled at boost / samples so far
    prior_weight: float = 200.0  # the calibration counts as at most this many samples
    min_accept: float = 0.2  # a threshold accepting less is not worth calling the cheap tier for
    probe_rate: float = 0.05
    last_tier_quality: float | None = None  # stated by the operator; else from labels or a default
    min_feedback: int = 30  # verdicts on the last tier's answers before they set its quality


@dataclass(frozen=True, slots=True)
class Route:
    call_cheap: bool
    weight: float  # what a sample from this request weighs: 1 / the probability it was drawn


@dataclass(frozen=True, slots=True)
class Estimate:
    mode: Mode
    threshold: float | None  # None: escalate every request
    samples: int
    effective_samples: float
    agreement: float | None  # estimated share of requests whose answer agrees with the last tier
    lower_bound: float | None  # ... its lower bound
    quality: float | None  # estimated quality over the last tier's
    quality_lower_bound: float | None
    escalation: float | None  # estimated share of requests escalated (or skipped to the last tier)
    shadow_rate: float  # the next accepted answer's sampling probability
    last_tier_quality: float
    last_tier_source: str
    calibration: str  # none | in use | rejected (the traffic contradicts it)
    meets_target: bool | None
    reason: str
    adapted: bool


class Evidence:
    """Weighted sums of the samples in the window, per candidate threshold, kept incrementally."""

    def __init__(self, candidates: tuple[float, ...]) -> None:
        self.grid = np.asarray(candidates, dtype=float)
        self.weight = self.weight2 = 0.0
        self.accepted = np.zeros(len(candidates))
        self.accepted2 = np.zeros(len(candidates))  # squared weights of accepted samples
        self.disagree = np.zeros(len(candidates))

    def add(self, sample: Sample, sign: float = 1.0) -> None:
        accepted, disagree = contributions(sample, self.grid)
        w = sample.weight
        self.weight += sign * w
        self.weight2 += sign * w * w
        self.accepted += sign * w * accepted
        self.accepted2 += sign * w * w * accepted
        self.disagree += sign * w * disagree

    def traffic(self) -> TrafficCurve:
        if self.weight <= 0:
            return TrafficCurve.empty(len(self.grid))
        with np.errstate(divide="ignore", invalid="ignore"):
            accepted_effective = np.where(self.accepted2 > 0, self.accepted**2 / self.accepted2, 0.0)
        return TrafficCurve(
            self.accepted / self.weight, self.disagree / self.weight, accepted_effective, self.weight**2 / self.weight2
        )


class QualityController:
    def __init__(
        self, policy: Policy, calibration: Calibration | None, candidates: tuple[float, ...] = CANDIDATES
    ) -> None:
        self.policy, self.calibration, self.candidates = policy, calibration, candidates
        self.samples: deque[Sample] = deque()
        self.evidence = Evidence(candidates)
        self.rejected = False  # the traffic contradicts the calibration, which is set aside
        self.feedback: tuple[TeamVerdicts, ...] | None = None  # each team's verdicts on the last tier's answers
        self.promised: float | None = None  # the threshold the calibration alone certifies
        self.held: str | None = None  # why a cascade that would skip keeps learning (a scorer may yet be fitted)
        self._mode = Mode.LEARNING  # until the first decision
        self._resolve_last()
        self._update()

    def _resolve_last(self) -> None:
        """The last tier's quality with the calibration's labels, and without them; and the
        threshold the calibration alone certifies with it."""
        p, calibration = self.policy, self.calibration
        self._last_with = last_tier_quality(p.last_tier_quality, calibration, self.feedback)
        self._last_without = last_tier_quality(p.last_tier_quality, None, self.feedback)
        self.last = self._last_with
        self.promised = None
        if calibration is not None:
            nothing = TrafficCurve.empty(len(self.candidates))
            alone = bounds(nothing, calibration, self._last_with, p.confidence, p.prior_weight, self.candidates)
            self.promised = cheapest_certified(alone, p.target)

    def last_tier_feedback(self, teams: Sequence[TeamVerdicts]) -> None:
        """Teams' verdicts on the last tier's answers (POST /v1/feedback): once there are
        `min_feedback` of them they set the last tier's quality A (source `feedback`), each team
        weighted by its share of the traffic (policies/quality.py `feedback_quality`), in place of
        the config's, the calibration's or the default."""
        enough = sum(t.labelled for t in teams) >= self.policy.min_feedback
        feedback = tuple(sorted(teams)) if enough else None
        if feedback == self.feedback:
            return
        self.feedback = feedback
        self._resolve_last()
        self._update()

    def keep_learning(self, why: str | None) -> None:
        """Learn (escalate every request, each a sample) rather than skip the cheap tier, while
        the cascade's learner says a scorer fitted on the samples may yet certify (`why`, in
        words); None: the learner says none can, and the controller decides as it would."""
        self.held = why
        self._update()

    @property
    def threshold(self) -> float | None:
        return self._threshold

    @property
    def mode(self) -> Mode:
        return self._mode

    def add(self, *samples: Sample) -> None:
        for s in samples:
            if len(self.samples) >= self.policy.max_samples:
                self.evidence.add(self.samples.popleft(), -1.0)
            self.samples.append(s)
            self.evidence.add(s)
        self._update()

    def route(self, rng: random.Random) -> Route:
        """Call the cheap tier for this request? Skipping, it is called on `probe_rate` of requests."""
        if self._mode is not Mode.SKIP:
            return Route(True, 1.0)
        if self.policy.probe_rate > 0 and rng.random() < self.policy.probe_rate:
            return Route(True, 1.0 / self.policy.probe_rate)
        return Route(False, 1.0)

    def shadow_probability(self) -> float:
        """The probability of shadow-sampling the next accepted answer."""
        p = self.policy
        if p.shadow_rate <= 0 or self._threshold is None:
            return 0.0
        if self._mode is Mode.FIXED:
            return p.shadow_rate
        seen = self._traffic.accepted_effective[self._index(self._threshold)]
        return max(p.shadow_rate, min(1.0, p.shadow_boost / seen if seen > 0 else 1.0))

    def estimate(self) -> Estimate:
        return self._estimate

    def _index(self, threshold: float) -> int:
        return int(np.searchsorted(self.evidence.grid, threshold - 1e-9))

    def _bounds(self, traffic: TrafficCurve) -> Bounds:
        p = self.policy
        calibration = None if self.rejected else self.calibration
        return bounds(traffic, calibration, self.last, p.confidence, p.prior_weight, self.candidates)

    def _update(self) -> None:
        traffic = self._traffic = self.evidence.traffic()
        cal = self.calibration
        self.rejected = False
        if cal is not None and self.promised is not None:
            self.rejected = contradicts(cal.at(self.promised), traffic.at(self._index(self.promised)))
        self.last = self._last_without if self.rejected else self._last_with
        found = self._bounds(traffic)
        self._mode, self._threshold, reason = self._decide(found)
        if self.rejected:
            reason = (
                f"the traffic contradicts the calibration (it disagrees with the last tier more often than "
                f"the calibration said at threshold {self.promised:.2f}), which is set aside; " + reason
            )
        self._estimate = self._describe(found, reason)

    def _decide(self, found: Bounds) -> tuple[Mode, float | None, str]:
        p = self.policy
        if not p.adaptive:
            return Mode.FIXED, p.fixed_threshold, "adaptive is off: the configured threshold applies"
        if (self.calibration is None or self.rejected) and len(self.samples) < p.min_samples:
            return (
                Mode.LEARNING,
                None,
                (
                    f"no calibration: escalating every request while collecting samples "
                    f"({len(self.samples)} of {p.min_samples})"
                ),
            )
        chosen = cheapest_certified(found, p.target)
        b = found.at(self._index(chosen)) if chosen is not None else None
        if chosen is not None and b is not None and self._accepts_enough(b):
            return (
                Mode.CERTIFIED,
                chosen,
                (
                    f"threshold {chosen:.2f} keeps {b.ratio:.1%} of the last tier's quality "
                    f"(lower bound {b.lower:.1%} >= target {p.target:.1%})"
                ),
            )
        best = found.at(int(np.argmax(found.lower)))
        if self.held is not None:
            return Mode.LEARNING, None, f"escalating every request: {self.held}"
        if worth_trying(found, p.target, p.min_accept):
            return (
                Mode.LEARNING,
                None,
                (
                    f"no threshold proven yet: escalating every request (best lower bound "
                    f"{best.lower:.1%} at {best.threshold:.2f}, target {p.target:.1%})"
                ),
            )
        return (
            Mode.SKIP,
            None,
            (
                f"the scorer cannot separate at this target: no threshold accepting at least "
                f"{p.min_accept:.0%} of requests can reach {p.target:.1%} of the last tier's "
                f"quality; skipping the cheap tier (probing {p.probe_rate:.0%})"
            ),
        )

    def _accepts_enough(self, b: Bound) -> bool:
        """Certified from an estimated share of `min_accept` accepted; once certified, until even
        the share's upper bound is under it (not on every dip of the weighted estimate)."""
        share = b.accepted_upper if self._mode is Mode.CERTIFIED else b.accepted
        return share >= self.policy.min_accept

    def _describe(self, found: Bounds, reason: str) -> Estimate:
        p = self.policy
        at = found.at(self._index(self._threshold)) if self._threshold is not None else None
        traffic = self._traffic.at(self._index(self._threshold)) if self._threshold is not None else None
        agreement = lower = None
        if traffic is not None and traffic.effective > 0:
            agreement = 1 - traffic.disagree
            spread = z_of(p.confidence) * (traffic.disagree * (1 - traffic.disagree) / traffic.effective) ** 0.5
            lower = max(0.0, agreement - spread)
        quality = at.ratio if at is not None else 1.0
        quality_lower = at.lower if at is not None else 1.0
        escalation = 1 - at.accepted if at is not None else 1.0
        return Estimate(
            self._mode,
            self._threshold,
            len(self.samples),
            self._traffic.effective,
            None if agreement is None else float(agreement),
            None if lower is None else float(lower),
            float(quality),
            float(quality_lower),
            float(escalation),
            self.shadow_probability(),
            self.last.value,
            self.last.source,
            "none" if self.calibration is None else "rejected" if self.rejected else "in use",
            bool(quality_lower >= p.target),
            reason,
            self._mode is not Mode.FIXED,
        )
