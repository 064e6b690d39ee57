"""Learning from a cascade's own traffic: refit the learned scorer from its stored samples, and
keep the new one only when it beats the current one on samples neither was fitted on.

The samples (gateway/storage/cascade_samples.py) hold each cheap answer's feature vector, whether it
agreed with the last tier and its weight (1 / the probability it was sampled). The newest
`held_back` share is kept aside; a candidate is fitted on the rest (labels: agreement, the
only label traffic gives), and both scorers are ranked on the held-back samples by weighted
AUC, so the comparison is on the traffic as it is now. A candidate trained on agreement alone
carries a calibration without correctness labels (every disagreement counted as a loss), so it
does not replace a scorer whose calibration has them unless the traffic has set that
calibration aside: a better ranking would not pay for the far more conservative bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from policies.scorers.learned import LearnedModel
from policies.scorers.training import Matrix, train_matrix

MIN_GAIN = 0.01  # AUC points a candidate must gain: refits on noise should not churn the scorer
MIN_HELD_BACK = 50  # held-back samples, of each class together, before a comparison counts


@dataclass(frozen=True, slots=True)
class TrainingRow:
    """One stored cheap answer, as the learned scorer trains on it."""

    features: tuple[float, ...]
    agrees: bool  # with the last tier's answer
    weight: float  # 1 / the probability its request was sampled


@dataclass(frozen=True, slots=True)
class Verdict:
    replace: bool
    current_auc: float | None
    candidate_auc: float | None
    held_back: int
    reason: str


def weighted_auc(scores: Sequence[float], labels: Sequence[bool], weights: Sequence[float]) -> float | None:
    """AUC with each sample counted `weight` times (ties half); None without both classes."""
    s, y, w = np.asarray(scores, float), np.asarray(labels, bool), np.asarray(weights, float)
    pos, neg = w[y].sum(), w[~y].sum()
    if pos <= 0 or neg <= 0:
        return None
    order = np.argsort(s, kind="mergesort")
    s, y, w = s[order], y[order], w[order]
    starts = np.unique(s, return_index=True)[1]  # tied scores form one group
    pos_at = np.add.reduceat(np.where(y, w, 0.0), starts)
    neg_at = np.add.reduceat(np.where(~y, w, 0.0), starts)
    wins = (pos_at * (np.cumsum(neg_at) - neg_at + 0.5 * neg_at)).sum()
    return float(wins / (pos * neg))


def decide(
    current_auc: float | None,
    candidate_auc: float | None,
    held_back: int,
    current_labelled: bool,
    current_rejected: bool,
    min_gain: float = MIN_GAIN,
    min_held_back: int = MIN_HELD_BACK,
) -> Verdict:
    """Replace the current scorer with the candidate? A pure decision on held-back evidence."""
    if held_back < min_held_back or candidate_auc is None or current_auc is None:
        return Verdict(
            False,
            current_auc,
            candidate_auc,
            held_back,
            f"too few held-back samples of both kinds ({held_back} of {min_held_back})",
        )
    if current_labelled and not current_rejected:
        return Verdict(
            False,
            current_auc,
            candidate_auc,
            held_back,
            "the current scorer's calibration has correctness labels and holds on this traffic",
        )
    if candidate_auc < current_auc + min_gain:
        return Verdict(
            False,
            current_auc,
            candidate_auc,
            held_back,
            f"the candidate does not beat the current scorer by {min_gain} AUC on held-back samples",
        )
    return Verdict(
        True, current_auc, candidate_auc, held_back, f"held-back AUC {candidate_auc:.3f} against {current_auc:.3f}"
    )


def refit(
    rows: Sequence[TrainingRow],
    current: LearnedModel,
    current_rejected: bool = False,
    held_back: float = 0.3,
    folds: int = 10,
    l2: float = 1.0,
) -> tuple[LearnedModel | None, Verdict]:
    """A new scorer fitted on every row (with its calibration) when it wins, else None."""
    cut = int(len(rows) * (1 - held_back))
    test = rows[cut:]
    labelled = current.calibration is not None and current.calibration.last_right is not None
    agrees = np.array([r.agrees for r in rows], dtype=bool)
    if cut < 2 or agrees[:cut].all() or not agrees[:cut].any():
        return None, decide(None, None, len(test), labelled, current_rejected)
    m = Matrix(np.array([r.features for r in rows], float), agrees, agrees, None)
    candidate = train_matrix(m.rows(np.arange(cut)), folds=1, l2=l2).model
    labels, weights = [r.agrees for r in test], [r.weight for r in test]
    verdict = decide(
        weighted_auc([current.confidence_of(r.features) for r in test], labels, weights),
        weighted_auc([candidate.confidence_of(r.features) for r in test], labels, weights),
        len(test),
        labelled,
        current_rejected,
    )
    if not verdict.replace:
        return None, verdict
    return train_matrix(m, folds=folds, l2=l2).model, verdict
