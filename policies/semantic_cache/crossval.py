"""How a verifier fitted from labelled candidates serves queries it has never seen.

`cross_validate` cuts the candidates into folds by query; for each fold it fits the model and
chooses the thresholds (on inner folds, as `calibration.verifier_from` does on everything)
from the other folds only, then serves the fold's queries as the cache would: each query meets
its nearest candidate, which is served when the verifier accepts it. `calibrate` is what
`costgate cache calibrate` runs: the verifier from all the candidates, and these figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from policies.semantic_cache.verifier import Verifier
from policies.semantic_cache.verifier_calibration import (
    FOLDS,
    RATES,
    Embed,
    Examples,
    Labelled,
    examples,
    lookups,
    scores,
    verifier_from,
)

MIN_CANDIDATES = 100


@dataclass(frozen=True, slots=True)
class FoldResult:
    """One fold's held-out queries at one bound, served by a verifier that never saw them."""

    fold: int
    rate: float
    queries_with_same: int  # the fold's queries that have a candidate judged the same
    hits: int
    right: int


@dataclass(frozen=True, slots=True)
class Summary:
    """The folds of one bound together: pooled, and the spread from fold to fold."""

    rate: float
    hits: int
    right: int
    queries_with_same: int
    precision_range: tuple[float, float]  # the lowest and highest fold's share of hits right
    served_range: tuple[float, float]

    @property
    def precision(self) -> float:
        return self.right / self.hits if self.hits else float("nan")

    @property
    def served(self) -> float:
        return self.right / self.queries_with_same if self.queries_with_same else float("nan")


def fold_result(ex: Examples, accepted: np.ndarray, fold: int, rate: float) -> FoldResult:
    """Hits among `ex`'s lookups; `accepted` says, per candidate of `ex`, whether it is served."""
    at = lookups(ex)
    with_same = len({int(g) for g, s in zip(ex.group, ex.same) if s})
    return FoldResult(fold, rate, with_same, int(accepted[at].sum()), int((accepted[at] & ex.same[at]).sum()))


def accepted_by(verifier: Verifier, ex: Examples, rate: float) -> np.ndarray:
    threshold = verifier.threshold_for(rate)
    return ex.identical.copy() if threshold is None else scores(ex, verifier.weights) >= threshold


def cross_validate(ex: Examples, rates: Sequence[float] = RATES) -> list[FoldResult]:
    out = []
    fold = ex.folds()
    for k in np.unique(fold):
        train, test = ex.subset(fold != k), ex.subset(fold == k)
        verifier = verifier_from(train, rates, level=1)
        out += [fold_result(test, accepted_by(verifier, test, rate), int(k), rate) for rate in rates]
    return out


def summarise(results: Sequence[FoldResult], rate: float) -> Summary:
    rows = [r for r in results if r.rate == rate]
    precision = [r.right / r.hits for r in rows if r.hits]
    served = [r.right / r.queries_with_same for r in rows if r.queries_with_same]
    return Summary(
        rate,
        sum(r.hits for r in rows),
        sum(r.right for r in rows),
        sum(r.queries_with_same for r in rows),
        (min(precision, default=float("nan")), max(precision, default=float("nan"))),
        (min(served, default=float("nan")), max(served, default=float("nan"))),
    )


@dataclass(frozen=True)
class Calibration:
    verifier: Verifier
    candidates: int
    folds: list[FoldResult]


def calibrate(labelled: Sequence[Labelled], embed: Embed, rates: Sequence[float] = RATES) -> Calibration:
    """The verifier fitted on every candidate, with its cross-validated figures."""
    ex = examples(labelled, embed)
    if len(labelled) < MIN_CANDIDATES or len(np.unique(ex.folds())) < FOLDS:
        raise ValueError(
            f"need at least ~{MIN_CANDIDATES} labelled pairs from many different queries; got {len(labelled)}"
        )
    return Calibration(verifier_from(ex, rates), len(labelled), cross_validate(ex, rates))
