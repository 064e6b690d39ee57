"""The router before the call: from the query alone, will the cheap tier's answer be accepted?

A cascade pays for its cheap tier on every request, also on those whose cheap answer its scorer
will reject, and makes the client wait for it. The router predicts, before any call, the
probability that the cheap answer will be accepted (its confidence at or above the threshold
in use), from what the query alone says: its MiniLM vector on the topic axes and its cheap text
features (length, numbers, percent, fractions; policies/scorers/answer_features.py, the query's part
of the vector every sample stores). It is trained on the cascade's own samples, the same ones
the scorer learns from, each labelled by whether the scorer accepted (or would accept, at the
threshold now) its cheap answer.

When the expected saving of calling the cheap tier does not pay for the call,

    P(accepted) × (last tier's cost − cheap tier's cost) < cheap tier's cost,

the request goes straight to the last tier, except on `explore` of such requests, which are
asked as before (and sampled with weight 1 / explore), so the router keeps seeing what it skips.

**Quality.** A skipped request is answered by the last tier: it can only raise quality. The
quality controller still estimates the cheap tier's disagreements over the requests that call
it, weighted as the traffic, which counts skipped requests as if they had called it: the bound
it certifies is the one without the router, a conservative one for the traffic with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from policies.quality import Sample
from policies.scorers.answer_features import NAMES
from policies.scorers.learned import LearnedModel, LogisticModel, auc, fit_logistic
from policies.scorers.training import Matrix, out_of_fold

QUERY_FEATURES = tuple(
    i
    for i, name in enumerate(NAMES)
    if name.startswith("query_") and name not in ("query_number_coverage", "query_numbers_unused")
)
MIN_ROWS = 40  # samples before a router is trained
MIN_AUC = 0.6  # out-of-fold: a router that ranks worse than this is not used
EXPLORE = 0.1


def query_part(vector: Sequence[float]) -> np.ndarray:
    """The features of a (query, answer) vector that the query alone sets."""
    row = np.asarray(vector, dtype=float)
    return row[list(QUERY_FEATURES)]


@dataclass(frozen=True)
class PrecallRouter:
    model: LogisticModel  # P(the cheap answer is accepted | the query's features)
    auc: float  # out-of-fold, on the samples it was trained on
    rows: int
    explore: float = EXPLORE

    def accept_probability(self, vector: Sequence[float]) -> float:
        return self.model.probability(query_part(vector).tolist())

    def skips(self, vector: Sequence[float], cheap_cost: float, last_cost: float) -> bool:
        """Go straight to the last tier? When the expected saving does not pay for the call."""
        p = self.accept_probability(vector)
        return p * max(0.0, last_cost - cheap_cost) < cheap_cost


def train_router(
    vectors: Sequence[Sequence[float]], accepted: Sequence[bool], l2: float = 10.0
) -> PrecallRouter | None:
    """A router from the samples' feature vectors and whether each cheap answer was (or would now
    be) accepted; None with too few samples of each kind or an out-of-fold AUC under `MIN_AUC`."""
    y = np.asarray(accepted, dtype=bool)
    minority = int(min(y.sum(), len(y) - y.sum()))
    if len(y) < MIN_ROWS or minority < 5:
        return None
    x = np.array([query_part(v) for v in vectors], dtype=float)
    m = Matrix(x, y, y, None)
    folds = max(2, min(10, minority))
    scores = out_of_fold(m, folds, l2, seed=0)
    found = auc(scores.tolist(), y.tolist())
    if found < MIN_AUC:
        return None
    model = replace(fit_logistic(x, y.astype(float), l2), names=tuple(NAMES[i] for i in QUERY_FEATURES))
    return PrecallRouter(model, found, len(y))


def router_at(
    threshold: float, samples: Sequence[tuple[Sample, Sequence[Sequence[float]]]], model: LearnedModel | None
) -> PrecallRouter | None:
    """The router on a cascade's samples (each with its cheap answers' feature vectors; those
    without are left out), each labelled by whether the scorer in use accepts its cheap answer at
    `threshold` now: the learned model's confidence of the vector, or, without a learned model,
    the confidence the sample was taken with."""
    kept = [(sample, vectors[0]) for sample, vectors in samples if vectors]
    confidences = [model.confidence_of(v) if model is not None else s.confidences[0] for s, v in kept]
    return train_router([v for _, v in kept], [c >= threshold for c in confidences])
