"""Fitting the verifier and choosing its thresholds from labelled question pairs.

Pairs are `{"a", "b", "duplicate"}` records. They are split by a hash of their text (so the
split is the same on every run and machine) into a training part (the logistic weights), a
calibration part (the thresholds) and a held-out part that neither sees (the benchmark's).

Calibration replays how the cache is used: every `a` is stored, every `b` looks up its nearest
stored question, and a served hit is wrong unless the two are labelled duplicates or are the
same text up to case and punctuation. For each false-hit-rate bound the threshold is the
lowest one whose Clopper-Pearson upper confidence bound on the wrong share of hits is still
within the bound — a threshold that merely looks good on a few hundred pairs is not taken.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from policies.semantic_cache.features import Parsed, pair_features
from policies.semantic_cache.verifier import Verifier, same_text

RATES = (0.005, 0.01, 0.02, 0.03, 0.05, 0.1)
CONFIDENCE = 0.95
Embed = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True, slots=True)
class Pair:
    a: str
    b: str
    duplicate: bool

    @property
    def part(self) -> str:
        bucket = int(hashlib.sha256(f"{self.a}\x00{self.b}".encode()).hexdigest()[:8], 16) % 10
        return "train" if bucket < 5 else "calibration" if bucket < 7 else "heldout"


def split(pairs: Sequence[Pair]) -> dict[str, list[Pair]]:
    parts: dict[str, list[Pair]] = {"train": [], "calibration": [], "heldout": []}
    for p in pairs:
        parts[p.part].append(p)
    return parts


def _log_binom_pmf(k: int, n: int, p: float) -> float:
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
            + k * math.log(p) + (n - k) * math.log1p(-p))


def binomial_cdf(k: int, n: int, p: float) -> float:
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 1.0 if k >= n else 0.0
    return min(1.0, sum(math.exp(_log_binom_pmf(i, n, p)) for i in range(k + 1)))


def upper_bound(wrong: int, n: int, confidence: float = CONFIDENCE) -> float:
    """Clopper-Pearson one-sided upper bound on a rate seen as `wrong` out of `n`."""
    if n == 0:
        return 1.0
    if wrong >= n:
        return 1.0
    lo, hi = wrong / n, 1.0
    for _ in range(60):  # bisection: cdf(wrong; n, p) falls as p grows
        mid = (lo + hi) / 2
        if binomial_cdf(wrong, n, mid) > 1 - confidence:
            lo = mid
        else:
            hi = mid
    return hi


def choose_threshold(scores: np.ndarray, wrong: np.ndarray, max_rate: float,
                     confidence: float = CONFIDENCE) -> float | None:
    """The lowest threshold (most hits) whose upper bound on the wrong share of hits at or
    above it is <= max_rate; None when no threshold is that safe."""
    order = np.argsort(-scores, kind="stable")
    sorted_scores, errors = scores[order], np.cumsum(wrong[order].astype(np.int64))
    best: float | None = None
    for i in range(len(order)):
        if i + 1 < len(order) and sorted_scores[i + 1] == sorted_scores[i]:
            continue  # a threshold takes every candidate with an equal score
        if upper_bound(int(errors[i]), i + 1, confidence) <= max_rate:
            best = float(sorted_scores[i])
    return best


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, iterations: int = 30) -> np.ndarray:
    """L2-regularised logistic regression by Newton's method (the bias, column 0, unpenalised)."""
    w = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], l2)
    penalty[0] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ w, -50, 50)))
        gradient = x.T @ (p - y) + penalty * w
        hessian = (x * (p * (1 - p))[:, None]).T @ x + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


@dataclass(frozen=True)
class Lookups:
    """The verifier's inputs as the cache meets them: each query against its nearest stored
    question, with whether serving that question's answer would be right."""

    features: np.ndarray
    cosines: np.ndarray
    right: np.ndarray
    duplicates: np.ndarray  # the query has a true duplicate stored (its own pair's `a`)


def nearest_lookups(pairs: Sequence[Pair], embed: Embed) -> Lookups:
    stored, asked = embed([p.a for p in pairs]), embed([p.b for p in pairs])
    parsed_a, parsed_b = [Parsed.of(p.a) for p in pairs], [Parsed.of(p.b) for p in pairs]
    best = np.argmax(asked @ stored.T, axis=1)
    rows, cosines, right = [], [], []
    for i, j in enumerate(best):
        cosine = float(asked[i] @ stored[j])
        rows.append(pair_features(parsed_b[i], parsed_a[j], cosine))
        cosines.append(cosine)
        right.append((j == i and pairs[i].duplicate) or same_text(pairs[i].b, pairs[j].a))
    return Lookups(np.array(rows), np.array(cosines), np.array(right, dtype=bool),
                   np.array([p.duplicate for p in pairs], dtype=bool))


def pair_rows(pairs: Sequence[Pair], embed: Embed) -> tuple[np.ndarray, np.ndarray]:
    """Each pair as a training example of its own (the hard negatives live here)."""
    va, vb = embed([p.a for p in pairs]), embed([p.b for p in pairs])
    x = np.array([pair_features(Parsed.of(p.b), Parsed.of(p.a), float(va[i] @ vb[i]))
                  for i, p in enumerate(pairs)])
    y = np.array([p.duplicate or same_text(p.a, p.b) for p in pairs], dtype=float)
    return x, y


@dataclass(frozen=True)
class Calibration:
    verifier: Verifier
    train_pairs: int
    calibration_pairs: int


def calibrate(pairs: Sequence[Pair], embed: Embed, rates: Sequence[float] = RATES,
              confidence: float = CONFIDENCE) -> Calibration:
    parts = split(pairs)
    train, held = parts["train"], parts["calibration"]
    if len(train) < 50 or len(held) < 50:
        raise ValueError(f"need at least ~250 labelled pairs to calibrate; got {len(pairs)}")
    x_pairs, y_pairs = pair_rows(train, embed)
    train_lookups = nearest_lookups(train, embed)
    x = np.vstack([x_pairs, train_lookups.features])
    y = np.concatenate([y_pairs, train_lookups.right.astype(float)])
    weights = fit_logistic(x, y)
    cal = nearest_lookups(held, embed)
    scores = 1.0 / (1.0 + np.exp(-np.clip(cal.features @ weights, -50, 50)))
    chosen = [(r, choose_threshold(scores, ~cal.right, r, confidence)) for r in rates]
    kept = [(r, t) for r, t in chosen if t is not None]
    loosest = min((t for _, t in kept), default=1.0)
    served = cal.cosines[scores >= loosest]
    min_cosine = float(max(0.5, served.min() - 0.02)) if len(served) else 1.0
    verifier = Verifier(weights, np.array([r for r, _ in kept]), np.array([t for _, t in kept]), min_cosine)
    return Calibration(verifier, len(train), len(held))
