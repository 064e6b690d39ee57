"""Holding a cascade to its quality target: estimate agreement from shadow samples and pick
the cheapest threshold whose agreement, with a confidence bound, stays at or above the target.

A shadow sample is one request, drawn uniformly from the cascade's traffic, for which every
tier answered: for each tier but the last, its confidence and whether its answer agreed with
the last tier's. Under a threshold `t` the cascade would have returned the first tier whose
confidence reaches `t` (or the last tier's answer, which agrees with itself), so one set of
samples tells the agreement at every candidate threshold without new calls.

Lower thresholds accept more cheap answers, so "cheapest" is the lowest candidate whose
one-sided Wilson lower bound on agreement reaches the target. `None` means "escalate every
request": nothing cheaper is proven to keep the target.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

CANDIDATES = tuple(i / 100 for i in range(101))


@dataclass(frozen=True, slots=True)
class Sample:
    confidences: tuple[float, ...]  # one per tier but the last, cheapest first
    agrees: tuple[bool, ...]  # did that tier's answer agree with the last tier's?


def wilson_lower(successes: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Wilson score lower bound on a proportion (0 when there is no data)."""
    if n == 0:
        return 0.0
    z = NormalDist().inv_cdf(confidence)
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


def agreements(samples: Iterable[Sample], threshold: float | None) -> tuple[int, int]:
    """(agreeing, total) over the samples under `threshold`."""
    agree = total = 0
    for s in samples:
        total += 1
        agree += outcome(s, threshold)[1]
    return agree, total


def agreement_counts(samples: Sequence[Sample], candidates: Sequence[float]) -> np.ndarray:
    """Agreeing samples under each candidate threshold, all at once (same rule as `outcome`)."""
    if not samples:
        return np.zeros(len(candidates), dtype=int)
    width = max(len(s.confidences) for s in samples)
    conf = np.full((len(samples), width), -np.inf)
    agree = np.ones((len(samples), width), dtype=bool)
    for i, s in enumerate(samples):
        conf[i, :len(s.confidences)] = s.confidences
        agree[i, :len(s.agrees)] = s.agrees
    accepts = conf[None, :, :] >= np.asarray(candidates, dtype=float)[:, None, None]  # (t, n, tier)
    first = accepts.argmax(axis=2)  # the first accepting tier (0 when none accepts)
    answered_cheap = accepts.any(axis=2)
    agreed = np.where(answered_cheap, np.take_along_axis(agree[None, :, :].repeat(len(candidates), 0),
                                                         first[:, :, None], axis=2)[:, :, 0], True)
    return agreed.sum(axis=1)


def choose_threshold(samples: Sequence[Sample], target: float, confidence: float = 0.95,
                     candidates: Sequence[float] = CANDIDATES) -> float | None:
    """The lowest candidate whose agreement lower bound reaches `target`; None if none does."""
    ordered = sorted(candidates)
    counts = agreement_counts(samples, ordered)
    for t, agree in zip(ordered, counts):
        if wilson_lower(int(agree), len(samples), confidence) >= target:
            return t
    return None


@dataclass(frozen=True, slots=True)
class Estimate:
    threshold: float | None
    samples: int
    agreement: float | None  # point estimate at the current threshold
    lower_bound: float | None
    adapted: bool  # False while the configured thresholds still apply


class QualityController:
    """The samples of one cascade and the threshold they justify."""

    def __init__(self, target: float, initial: float | None, *, adaptive: bool = True, min_samples: int = 100,
                 confidence: float = 0.95, max_samples: int = 5000) -> None:
        self.target, self.initial = target, initial
        self.adaptive, self.min_samples, self.confidence = adaptive, min_samples, confidence
        self.samples: deque[Sample] = deque(maxlen=max_samples)
        self.threshold = initial
        self.adapted = False

    def add(self, *samples: Sample) -> None:
        self.samples.extend(samples)
        if self.adaptive and len(self.samples) >= self.min_samples:
            self.threshold = choose_threshold(self.samples, self.target, self.confidence)
            self.adapted = True

    def estimate(self) -> Estimate:
        if not self.samples:
            return Estimate(self.threshold, 0, None, None, self.adapted)
        agree, n = agreements(self.samples, self.threshold)
        return Estimate(self.threshold, n, agree / n, wilson_lower(agree, n, self.confidence), self.adapted)
