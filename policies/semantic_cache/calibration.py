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

from policies.semantic_cache.features import NAMES, Parsed, pair_features
from policies.semantic_cache.verifier import Verifier, same_text

RATES = (0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25)
MODEL_FEATURES = ("bias", "cosine", "content_jaccard", "order_agreement")
TRAIN_FLOOR = 0.85  # fit where the cache operates: far pairs teach nothing about the tail
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


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed from the pmf's recurrence in log space."""
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 1.0 if k >= n else 0.0
    log_pmf = n * math.log1p(-p)  # P(X = 0)
    odds = math.log(p) - math.log1p(-p)
    total = math.exp(log_pmf)
    for i in range(1, k + 1):
        log_pmf += math.log(n - i + 1) - math.log(i) + odds
        total += math.exp(log_pmf)
    return min(1.0, total)


def upper_bound(wrong: int, n: int, confidence: float = CONFIDENCE) -> float:
    """Clopper-Pearson one-sided upper bound on a rate seen as `wrong` out of `n`."""
    if n == 0 or wrong >= n:
        return 1.0
    lo, hi = wrong / n, 1.0
    for _ in range(40):  # bisection: cdf(wrong; n, p) falls as p grows
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
        if errors[i] / (i + 1) > max_rate:
            continue  # the bound is above the observed rate: no need to compute it
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
    """Fit on the training part, choose thresholds on the calibration part."""
    parts = split(pairs)
    train, held = parts["train"], parts["calibration"]
    if len(train) < 50 or len(held) < 50:
        raise ValueError(f"need at least ~250 labelled pairs to calibrate; got {len(pairs)}")
    x, y = pair_rows(train, embed)
    cols = [NAMES.index(n) for n in MODEL_FEATURES]
    veto = NAMES.index("veto")
    usable = (x[:, NAMES.index("cosine")] >= TRAIN_FLOOR) & (x[:, veto] == 0)
    if usable.sum() < 20 or len(set(y[usable])) < 2:
        raise ValueError("too few close, labelled pairs (cosine >= 0.85, both labels) to fit the verifier")
    weights = np.zeros(len(NAMES))
    weights[cols] = fit_logistic(x[usable][:, cols], y[usable])
    verifier = Verifier(weights, np.array([]), np.array([]), TRAIN_FLOOR)
    cal = nearest_lookups(held, embed)
    scores = np.where((cal.cosines >= TRAIN_FLOOR) & (cal.features[:, veto] == 0),
                      1.0 / (1.0 + np.exp(-np.clip(cal.features @ weights, -50, 50))), 0.0)
    chosen = [(r, choose_threshold(scores, ~cal.right, r, confidence)) for r in rates]
    kept = [(r, t) for r, t in chosen if t is not None and t > 0]
    verifier = Verifier(weights, np.array([r for r, _ in kept]), np.array([t for _, t in kept]), TRAIN_FLOOR)
    return Calibration(verifier, len(train), len(held))
