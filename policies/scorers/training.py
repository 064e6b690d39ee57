"""Training the learned scorer with its calibration, both from the same labelled examples.

The models are fitted on all the examples; the calibration curve comes from k-fold
cross-validation: each example is scored by models fitted on the other folds, so the curve
says what a threshold does on queries the scorer never saw. That curve is what a cascade
starts from (policies/quality_controller.py), and the cross-validated AUC is what `costgate
cascade train` reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from policies.scorers import Scored
from policies.scorers.answer_features import features
from policies.scorers.learned import LearnedModel, auc, fit_logistic
from policies.threshold_calibration import Calibration, calibrate, labelled

LAST_L2 = 10.0  # the last tier's correctness is harder to predict from the cheap answer: shrink more


@dataclass(frozen=True, slots=True)
class TrainingExample:
    item: Scored
    acceptable: bool  # the cheap answer may be returned: it is right (or agrees with the last tier)
    last_right: bool | None = None  # the last tier was right; None: not known
    agrees: bool | None = None  # the cheap answer agrees with the last tier's; None: taken as `acceptable`


@dataclass(frozen=True, slots=True)
class Trained:
    model: LearnedModel  # fitted on every example, carrying the cross-validated calibration
    auc: float | None  # cross-validated AUC of the confidence against acceptability; None: too few


@dataclass(frozen=True)
class Matrix:
    """Examples as arrays: feature vectors and labels."""

    x: np.ndarray
    acceptable: np.ndarray  # bool
    agrees: np.ndarray  # bool
    last_right: np.ndarray | None  # bool; None unless every example says

    @classmethod
    def of(cls, examples: Sequence[TrainingExample]) -> Matrix:
        last = [e.last_right for e in examples]
        return cls(
            np.array([features(e.item) for e in examples], dtype=float),
            np.array([e.acceptable for e in examples], dtype=bool),
            np.array([e.acceptable if e.agrees is None else e.agrees for e in examples], dtype=bool),
            None if any(v is None for v in last) else np.array(last, dtype=bool),
        )

    def __len__(self) -> int:
        return len(self.acceptable)

    def rows(self, index: np.ndarray) -> Matrix:
        return Matrix(
            self.x[index],
            self.acceptable[index],
            self.agrees[index],
            None if self.last_right is None else self.last_right[index],
        )


def fit(m: Matrix, l2: float) -> LearnedModel:
    accept = fit_logistic(m.x, m.acceptable.astype(float), l2)
    last = None
    if m.last_right is not None and 0 < m.last_right.sum() < len(m):
        last = fit_logistic(m.x, m.last_right.astype(float), max(l2, LAST_L2))
    return LearnedModel(accept, last)


def out_of_fold(m: Matrix, folds: int, l2: float, seed: int) -> np.ndarray:
    """Each example's confidence from a model fitted on the other folds."""
    order = np.random.default_rng(seed).permutation(len(m))
    scores = np.zeros(len(m))
    for part in np.array_split(order, folds):
        model = fit(m.rows(np.setdiff1d(order, part)), l2)
        scores[part] = [model.confidence_of(row) for row in m.x[part]]
    return scores


def calibration_of(m: Matrix, scores: np.ndarray) -> Calibration:
    last = m.last_right if m.last_right is not None else [None] * len(m)
    return calibrate(
        [
            labelled(float(s), bool(a), bool(ok), None if r is None else bool(r))
            for s, a, ok, r in zip(scores, m.agrees, m.acceptable, last)
        ]
    )


def train_matrix(m: Matrix, folds: int = 10, l2: float = 1.0, seed: int = 0) -> Trained:
    """Fit on everything; calibrate on out-of-fold scores (`folds` < 2: no calibration)."""
    if len(m) < 2 or m.acceptable.all() or not m.acceptable.any():
        raise ValueError(
            f"training needs both acceptable and unacceptable examples "
            f"(got {len(m)}, {int(m.acceptable.sum())} acceptable)"
        )
    model = fit(m, l2)
    if folds < 2 or len(m) < 2 * folds:
        return Trained(model, None)
    scores = out_of_fold(m, folds, l2, seed)
    calibrated = LearnedModel(model.accept, model.last, calibration_of(m, scores))
    return Trained(calibrated, auc(scores.tolist(), m.acceptable.tolist()))


def train_scorer(examples: Sequence[TrainingExample], folds: int = 10, l2: float = 1.0, seed: int = 0) -> Trained:
    return train_matrix(Matrix.of(examples), folds, l2, seed)
