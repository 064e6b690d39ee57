"""Fitting the verifier and choosing its thresholds from labelled candidate hits.

A labelled candidate is a query, a stored question and a person's verdict: would the stored
question's answer fully answer the query? (`Labelled`; the shipped verifier's come from
../shared/data/qqp_dev_adjudicated.jsonl, a team's own from `costgate cache calibrate`.)

The logistic weights are fitted on every candidate. The thresholds are chosen on scores the
fitted model never saw: the candidates are cut into folds *by query* (a query and all its
candidates stay in one fold), each fold is scored by a model fitted on the others, and for each
false-hit bound the threshold is the lowest one whose Clopper-Pearson upper confidence bound on
the wrong share of hits is still within the bound. Hits are counted as the cache meets them:
each query's nearest candidate (`lookups`). `crossval.cross_validate` replays the whole procedure
inside each fold to say how the thresholds hold on queries that neither the fit nor the
choice saw.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from policies.semantic_cache.differences import Parsed
from policies.semantic_cache.pair_features import NAMES, normalise, pair_features, same_words, vetoed
from policies.semantic_cache.verifier import Verifier

RATES = (0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.15, 0.2, 0.25)
FLOOR = 0.85  # candidates below this cosine are never scored: the cache does not look that far
CONFIDENCE = 0.95
FOLDS = 5
L2 = 1.0
Embed = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True, slots=True)
class Labelled:
    """One candidate hit and its verdict: does the stored question's answer answer the query?"""

    query: str
    stored: str
    same: bool


@dataclass(frozen=True)
class Examples:
    """Labelled candidates as the verifier sees them, with the query each belongs to."""

    features: np.ndarray  # one row of pair_features.NAMES per candidate
    same: np.ndarray  # bool: the verdict
    identical: np.ndarray  # bool: the same words (served without asking the model)
    vetoed: np.ndarray  # bool: refused before the model is asked
    group: np.ndarray  # uint64: a hash of the query's text up to case and punctuation

    def subset(self, rows: np.ndarray) -> Examples:
        return Examples(self.features[rows], self.same[rows], self.identical[rows], self.vetoed[rows], self.group[rows])

    @property
    def cosine(self) -> np.ndarray:
        return self.features[:, NAMES.index("cosine")]

    def folds(self, level: int = 0) -> np.ndarray:
        """Each candidate's fold, by its query: level 0 for the outer folds, 1 for folds
        inside an outer fold's training part (another cut of the same hash)."""
        return ((self.group >> np.uint64(12 * level)) % np.uint64(FOLDS)).astype(np.int64)


def query_hash(query: str) -> int:
    """The same for a query on every run and machine, and for its case/punctuation twins."""
    return int(hashlib.sha256(normalise(query).encode()).hexdigest()[:15], 16)


def examples(labelled: Sequence[Labelled], embed: Embed) -> Examples:
    texts = sorted({t for c in labelled for t in (c.query, c.stored)})
    vectors = dict(zip(texts, embed(texts))) if texts else {}
    parsed = {t: Parsed.of(t) for t in texts}
    rows = [
        pair_features(parsed[c.query], parsed[c.stored], float(vectors[c.query] @ vectors[c.stored])) for c in labelled
    ]
    return Examples(
        np.array(rows).reshape(len(labelled), len(NAMES)),
        np.array([c.same for c in labelled]),
        np.array([same_words(parsed[c.query], parsed[c.stored]) for c in labelled], dtype=bool),
        np.array([vetoed(parsed[c.query], parsed[c.stored]) for c in labelled], dtype=bool),
        np.array([query_hash(c.query) for c in labelled], dtype=np.uint64),
    )


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


def within(wrong: int, n: int, max_rate: float, confidence: float = CONFIDENCE) -> bool:
    """Whether `upper_bound(wrong, n)` <= max_rate, with one cdf instead of a bisection: the bound
    is the rate at which cdf(wrong; n, rate) falls to 1 - confidence, and the cdf falls as the
    rate grows."""
    return wrong < n and binomial_cdf(wrong, n, max_rate) <= 1 - confidence


def choose_threshold(
    scores: np.ndarray, wrong: np.ndarray, max_rate: float, confidence: float = CONFIDENCE
) -> float | None:
    """The lowest threshold (most hits) whose upper bound on the wrong share of hits at or
    above it is <= max_rate; None when no threshold is that safe. Tried from the lowest up, so
    the first that is safe is the answer (a bisection per candidate threshold, from the highest
    down, took 70% of `costgate cache calibrate`'s time)."""
    order = np.argsort(-scores, kind="stable")
    sorted_scores, errors = scores[order], np.cumsum(wrong[order].astype(np.int64))
    for i in range(len(order) - 1, -1, -1):
        if i + 1 < len(order) and sorted_scores[i + 1] == sorted_scores[i]:
            continue  # a threshold takes every candidate with an equal score
        if errors[i] / (i + 1) > max_rate:
            continue  # the bound is above the observed rate: no need to compute it
        if within(int(errors[i]), i + 1, max_rate, confidence):
            return float(sorted_scores[i])
    return None


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = L2, iterations: int = 50) -> np.ndarray:
    """L2-regularised logistic regression by Newton's method. Column 0 is the bias (not
    penalised); the others are standardised while fitting, so one penalty suits them all,
    and the weights returned apply to the raw columns."""
    mean, scale = x.mean(axis=0), x.std(axis=0)
    mean[0], scale[0] = 0.0, 1.0
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    w = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], l2)
    penalty[0] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -50, 50)))
        gradient = z.T @ (p - y) + penalty * w
        hessian = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    raw = w / scale
    raw[0] = w[0] - float((mean / scale)[1:] @ w[1:])
    return raw


def fit(ex: Examples) -> np.ndarray:
    """Weights over pair_features.NAMES, from the candidates the verifier would score."""
    usable = ~ex.vetoed & ~ex.identical & (ex.cosine >= FLOOR)
    if usable.sum() < 20 or len(set(ex.same[usable])) < 2:
        raise ValueError(f"too few labelled candidates (cosine >= {FLOOR}, both verdicts) to fit the verifier")
    return fit_logistic(ex.features[usable], ex.same[usable].astype(float))


def scores(ex: Examples, weights: np.ndarray) -> np.ndarray:
    """The verifier's probability per candidate: 1 for the same words, 0 for a candidate it
    refuses before scoring."""
    p = 1.0 / (1.0 + np.exp(-np.clip(ex.features @ weights, -50, 50)))
    return np.where(ex.identical, 1.0, np.where(~ex.vetoed & (ex.cosine >= FLOOR), p, 0.0))


def lookups(ex: Examples) -> np.ndarray:
    """The candidate each query meets in the cache: its nearest (highest cosine)."""
    best: dict[int, int] = {}
    for i, (g, c) in enumerate(zip(ex.group, ex.cosine)):
        if g not in best or c > ex.cosine[best[g]]:
            best[g] = i
    return np.array(sorted(best.values()), dtype=np.int64)


def out_of_fold_scores(ex: Examples, level: int = 0) -> np.ndarray:
    """Each candidate scored by a model fitted on the other folds' queries."""
    out = np.zeros(len(ex.same))
    fold = ex.folds(level)
    for k in np.unique(fold):
        inside = fold == k
        out[inside] = scores(ex.subset(inside), fit(ex.subset(~inside)))
    return out


def thresholds(
    ex: Examples, rates: Sequence[float] = RATES, level: int = 0, confidence: float = CONFIDENCE
) -> list[tuple[float, float]]:
    """(bound, threshold) for each bound some threshold meets on held-out scores."""
    held = out_of_fold_scores(ex, level)
    at = lookups(ex)
    chosen = [(r, choose_threshold(held[at], ~ex.same[at], r, confidence)) for r in rates]
    return [(r, t) for r, t in chosen if t is not None and t < 1.0]


def verifier_from(ex: Examples, rates: Sequence[float] = RATES, level: int = 0) -> Verifier:
    kept = thresholds(ex, rates, level)
    return Verifier(fit(ex), np.array([r for r, _ in kept]), np.array([t for _, t in kept]), FLOOR)
