"""How much of the last tier's quality a cascade keeps, with a one-sided bound, and the
cheapest threshold whose bound meets the target (docs/cascades.md, "The quality target").

    A       the last tier's quality: the share of requests it answers right
    D(t)    the share of requests whose cheap answer threshold t accepts and that disagrees
            with the last tier's answer (agreeing answers are equally right: only these matter)
    λ(t)    quality lost per such disagreement: P(cheap wrong, last right) - P(cheap right,
            last wrong) over those disagreements; 1 at most, below 0 where the cheap tier is better
    ratio(t) = 1 - λ(t) · D(t) / A, the cascade's quality over the last tier's

Agreement alone says nothing of A or λ: with A = 0.857, a 5% disagreement rate can cost 5.8%
of the quality, or nothing. So:

    D   comes from the traffic's samples, each weighted by 1 / the probability it was sampled,
        pooled with the calibration's count as `prior_weight` pseudo-samples (so the traffic
        overrules a calibration that does not hold on it), plus one pseudo-sample that
        disagrees (no evidence proves nothing);
    λ   comes from labelled examples (the scorer's calibration); without labels it is 1:
        every disagreement counts as a loss;
    A   comes from labelled feedback, else the config's `last_tier_quality`, else the
        calibration's labels, else DEFAULT_LAST_TIER_QUALITY (`LastTierQuality.source` says which).
        The feedback is the teams' verdicts, each team weighted by its share of the last tier's
        answers (a team without verdicts counts at the value A would have without feedback),
        so no team moves A by more than its share of the traffic: `feedback_quality`.

The bound is ratio - z·SE at the configured one-sided confidence, SE by the delta method over
the three estimates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike

from policies.threshold_calibration import CANDIDATES, Calibration, CurvePoint

DEFAULT_LAST_TIER_QUALITY = 0.5  # unknown: assume the last tier is right half the time (conservative)
REJECT_Z = 3.0  # the traffic overrules a calibration this many standard errors off (checked at every sample)
MIN_CHECK_SAMPLES = 20.0  # samples of accepted answers before the traffic may overrule a calibration


@dataclass(frozen=True, slots=True)
class Sample:
    confidences: tuple[float, ...]  # one per tier but the last, cheapest first
    agrees: tuple[bool, ...]  # did that tier's answer agree with the last tier's?
    weight: float = 1.0  # 1 / the probability that this request became a sample


@dataclass(frozen=True, slots=True)
class LastTierQuality:
    value: float
    variance: float  # of the estimate; 0 for a stated value
    source: str  # feedback | config | calibration | default


@dataclass(frozen=True, slots=True, order=True)
class TeamVerdicts:
    """One team's verdicts on a cascade's last-tier answers, and how many such answers it got."""

    team: str
    right: int
    labelled: int
    answered: int  # the team's last-tier answers, judged or not: its share of the traffic


@dataclass(frozen=True, slots=True)
class Traffic:
    """The traffic's samples at one threshold."""

    accepted: float  # weighted share of requests a cheap tier answers
    disagree: float  # weighted share answered by a cheap tier that disagrees with the last tier
    effective: float  # effective sample size (Kish): what the weighted samples are worth
    accepted_effective: float = 0.0  # ... of the samples a cheap tier answers


@dataclass(frozen=True)
class TrafficCurve:
    """The traffic's samples at every candidate threshold (arrays aligned with the candidates)."""

    accepted: np.ndarray  # weighted share of requests a cheap tier answers
    disagree: np.ndarray  # weighted share answered by a cheap tier that disagrees with the last tier
    accepted_effective: np.ndarray  # effective samples of the answers a cheap tier answers
    effective: float  # effective sample size of all the samples (Kish)

    @classmethod
    def empty(cls, size: int) -> TrafficCurve:
        return cls(np.zeros(size), np.zeros(size), np.zeros(size), 0.0)

    def at(self, index: int) -> Traffic:
        return Traffic(
            float(self.accepted[index]),
            float(self.disagree[index]),
            self.effective,
            float(self.accepted_effective[index]),
        )


@dataclass(frozen=True, slots=True)
class Bound:
    threshold: float
    ratio: float  # estimated quality over the last tier's
    lower: float  # one-sided lower bound at the configured confidence
    upper: float  # the mirror bound: the best the data still allows
    accepted: float  # estimated share of requests a cheap tier answers
    accepted_upper: float  # ... and the most the data still allows, at the same confidence


@dataclass(frozen=True)
class Bounds:
    """`Bound`s at every candidate threshold, as arrays aligned with the candidates."""

    threshold: np.ndarray
    ratio: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    accepted: np.ndarray
    accepted_upper: np.ndarray

    @classmethod
    def of(cls, found: Sequence[Bound]) -> Bounds:
        return cls(
            *(
                np.array([getattr(b, name) for b in found], dtype=float)
                for name in ("threshold", "ratio", "lower", "upper", "accepted", "accepted_upper")
            )
        )

    def at(self, index: int) -> Bound:
        return Bound(
            float(self.threshold[index]),
            float(self.ratio[index]),
            float(self.lower[index]),
            float(self.upper[index]),
            float(self.accepted[index]),
            float(self.accepted_upper[index]),
        )


def z_of(confidence: float) -> float:
    return NormalDist().inv_cdf(confidence)


def wilson_lower(successes: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Wilson score lower bound on a proportion (0 when there is no data)."""
    if n == 0:
        return 0.0
    z = z_of(confidence)
    p = successes / n
    centre = p + z * z / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - margin) / (1 + z * z / n))


def outcome(sample: Sample, threshold: float | None) -> tuple[int, bool]:
    """(tier that answers, does the answer agree with the last tier) under `threshold`."""
    if threshold is not None:
        for tier, (conf, agrees) in enumerate(zip(sample.confidences, sample.agrees)):
            if conf >= threshold:
                return tier, agrees
    return len(sample.confidences), True


def contributions(sample: Sample, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(answered by a cheap tier, and disagreeing) under each candidate threshold, as 0/1 rows."""
    accepted = np.zeros(len(candidates))
    disagree = np.zeros(len(candidates))
    open_ = np.ones(len(candidates), dtype=bool)  # no cheaper tier has answered yet
    for conf, agrees in zip(sample.confidences, sample.agrees):
        takes = open_ & (conf >= candidates)
        accepted[takes] = 1.0
        if not agrees:
            disagree[takes] = 1.0
        open_ &= ~takes
    return accepted, disagree


def last_tier_quality(
    configured: float | None, calibration: Calibration | None, feedback: Sequence[TeamVerdicts] | None = None
) -> LastTierQuality:
    """Where A comes from: the teams' verdicts, the config, the calibration, a default."""
    stated = _stated_quality(configured, calibration)
    if feedback is not None and sum(t.labelled for t in feedback) > 0:
        return feedback_quality(feedback, stated)
    return stated


def feedback_quality(teams: Sequence[TeamVerdicts], otherwise: LastTierQuality) -> LastTierQuality:
    """A from the teams' verdicts: each team's own share judged right, weighted by its share of
    the last tier's answers; a team that gave no verdict counts at `otherwise` (A without
    feedback). Pooling every verdict instead would let one team that judges much (45 `wrong`s)
    set A for all; this way a team with a tenth of the traffic moves A by a tenth at most."""
    weights = [max(t.answered, t.labelled) for t in teams]
    total = sum(weights)
    value = variance = 0.0
    for team, weight in zip(teams, weights, strict=True):
        share = weight / total
        if team.labelled:
            q = team.right / team.labelled
            value, variance = value + share * q, variance + share * share * q * (1 - q) / team.labelled
        else:
            value, variance = value + share * otherwise.value, variance + share * share * otherwise.variance
    return LastTierQuality(value, variance, "feedback")


def _stated_quality(configured: float | None, calibration: Calibration | None) -> LastTierQuality:
    """A without feedback: the config, the calibration, a default."""
    if configured is not None:
        return LastTierQuality(configured, 0.0, "config")
    if calibration is not None and calibration.last_right is not None and calibration.examples:
        a = calibration.last_right / calibration.examples
        return LastTierQuality(a, a * (1 - a) / calibration.examples, "calibration")
    return LastTierQuality(DEFAULT_LAST_TIER_QUALITY, 0.0, "default")


def loss_per_disagreement(lost: ArrayLike, gained: ArrayLike, disagree: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """λ and its variance from labelled counts, with one pseudo-disagreement that lost (so few
    labels lean towards 1). Elementwise over arrays of counts."""
    n = np.asarray(disagree, dtype=float) + 1
    lam = np.clip((np.asarray(lost) - np.asarray(gained) + 1) / n, -1.0, 1.0)
    second = np.minimum(1.0, (np.asarray(lost) + np.asarray(gained) + 1) / n)
    return lam, np.maximum(0.0, second - lam * lam) / n


def pooled(
    prior: ArrayLike, prior_n: float, traffic: ArrayLike, traffic_n: float, pseudo: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """A share pooled from the calibration (as `prior_n` pseudo-samples; 0 without one) and the
    traffic (as `traffic_n`), with `pseudo` extra pseudo-samples at 1: (estimate, variance).
    With no evidence at all the share is 1."""
    n = prior_n + traffic_n + pseudo
    if n <= 0:
        return np.ones_like(np.asarray(traffic, dtype=float)), np.zeros_like(np.asarray(traffic, dtype=float))
    value = (np.asarray(prior) * prior_n + np.asarray(traffic) * traffic_n + pseudo) / n
    return value, value * (1 - value) / n


def ratio_bound(
    lam: tuple[ArrayLike, ArrayLike], disagree: tuple[ArrayLike, ArrayLike], last: LastTierQuality, z: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ratio, lower, upper) for ratio = 1 - λ D / A, SE by the delta method. Elementwise."""
    lam_, var_l = np.asarray(lam[0], dtype=float), np.asarray(lam[1], dtype=float)
    d, var_d = np.asarray(disagree[0], dtype=float), np.asarray(disagree[1], dtype=float)
    a = last.value
    loss = lam_ * d / a
    variance = (d / a) ** 2 * var_l + (lam_ / a) ** 2 * var_d + (lam_ * d / a**2) ** 2 * last.variance
    se = np.sqrt(variance)
    return 1 - loss, 1 - loss - z * se, 1 - loss + z * se


def bounds(
    traffic: TrafficCurve,
    calibration: Calibration | None,
    last: LastTierQuality,
    confidence: float,
    prior_weight: float,
    candidates: Sequence[float] = CANDIDATES,
) -> Bounds:
    """The quality bound at every candidate threshold."""
    n = len(candidates)
    if calibration is not None:
        accepted, disagree, lost, gained = calibration.columns(candidates)
        prior_n, share = min(float(calibration.examples), prior_weight), 1.0 / calibration.examples
    else:
        accepted = disagree = lost = gained = np.zeros(n)
        prior_n, share = 0.0, 0.0
    d = pooled(disagree * share, prior_n, traffic.disagree, traffic.effective, pseudo=1.0)
    accepted_share, accepted_var = pooled(accepted * share, prior_n, traffic.accepted, traffic.effective)
    if calibration is not None and calibration.last_right is not None:
        lam = loss_per_disagreement(lost, gained, disagree)
    else:  # no labels: every disagreement counts as a loss
        lam = (np.ones(n), np.zeros(n))
    z = z_of(confidence)
    ratio, lower, upper = ratio_bound(lam, d, last, z)
    accepted_upper = np.minimum(1.0, accepted_share + z * np.sqrt(accepted_var))
    return Bounds(np.asarray(candidates, dtype=float), ratio, lower, upper, accepted_share, accepted_upper)


def cheapest_certified(found: Bounds, target: float) -> float | None:
    """The lowest threshold from which every higher one's bound meets the target (a lone
    lucky threshold below a failing one is not trusted); None: none is proven."""
    order = np.argsort(found.threshold)
    holds = found.lower[order] >= target
    from_here_up = np.logical_and.accumulate(holds[::-1])[::-1]  # this and every higher threshold hold
    if not from_here_up.any():
        return None
    return float(found.threshold[order][int(np.argmax(from_here_up))])


def worth_trying(found: Bounds, target: float, min_accept: float) -> bool:
    """Could any threshold that accepts a useful share still meet the target (both at the
    optimistic end of their bounds)? False: the scorer cannot separate at this target, and
    calling the cheap tier only adds its cost."""
    return bool(np.any((found.upper >= target) & (found.accepted_upper >= min_accept)))


def contradicts(point: CurvePoint, traffic: Traffic) -> bool:
    """Do the answers the calibration's threshold accepts disagree with the last tier
    significantly more often on the traffic than they did in the calibration (a one-sided
    two-sample test at REJECT_Z, on the accepted answers' own samples)? Then the calibration
    does not hold on this traffic, and the cascade must not lean on it."""
    if traffic.accepted_effective < MIN_CHECK_SAMPLES or point.accepted <= 0 or traffic.accepted <= 0:
        return False
    calibrated = point.disagree / point.accepted
    observed = traffic.disagree / traffic.accepted
    p0 = max(calibrated, 1.0 / point.accepted)
    se = math.sqrt(p0 * (1 - p0) * (1.0 / point.accepted + 1.0 / traffic.accepted_effective))
    return observed - calibrated > REJECT_Z * se
