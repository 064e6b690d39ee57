"""A learned scorer from a cascade's first tens of samples, and the controller it would certify.

A cascade on the general default (`rules`: it ranks nothing) escalates every request while it
learns, and each escalated request is a labelled example at no extra call: the cheap answer's
features, and whether it agreed with the last tier. `first_fit` turns the samples a cascade has
so far, from `FIRST_FIT` on, into a candidate learned scorer, built for so few:

- **Regularisation chosen by cross-validation.** The L2 strength is the one of `L2_GRID` whose
  out-of-fold log-loss is lowest (few samples: strong shrinkage usually wins; many: weak).
- **Each sample scored by a model that never saw it.** The folds are as many as the rarer class
  allows (at most 10), and every sample's confidence is out-of-fold.
- **Counted once.** The candidate's controller starts from the calibration those out-of-fold
  confidences make (without correctness labels: every disagreement a loss) and no traffic: the
  samples are the only evidence, so they are not counted twice (once as a calibration, again as
  traffic), and the bound (policies/quality.py) is what the samples alone prove. The traffic
  that follows is pooled with it, as with any calibrated scorer: shadow samples start at 100%
  and thin out as they accumulate, and a calibration the traffic contradicts is set aside.
- **Compared.** The candidate's out-of-fold AUC must beat what the scorer in use said of the same
  answers (the stored confidences; `rules` gives every answer 1: AUC 0.5) by `MIN_GAIN` and by
  one standard error (Hanley and McNeil), so a lucky fold on thirty samples does not count.

The caller (gateway/routing/scorer_candidates.py `early_candidate`) has the candidate swapped in
when its controller certifies a threshold, keeps the cascade learning while the candidate's
controller is still `learning` (a threshold that accepts enough may yet be proven), and lets it
skip the cheap tier when the candidate says the target is out of reach.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from policies.quality import Sample, TeamVerdicts
from policies.quality_controller import Policy, QualityController
from policies.scorers.learned import LearnedModel
from policies.scorers.refit import MIN_GAIN, TrainingRow, Vectors, Verdict, weighted_auc
from policies.scorers.training import Matrix, calibration_of, fit, out_of_fold

FIRST_FIT = 20  # samples before the first fit
MIN_MINORITY = 4  # samples of the rarer label (agrees or not) before a fit is tried
MAX_FOLDS = 10
L2_GRID = (1.0, 3.0, 10.0, 30.0, 100.0)


@dataclass(frozen=True)
class FirstFit:
    """A candidate and what it would do: `model` fitted on every sample (its calibration from the
    out-of-fold confidences), `controller` built on those confidences. Both None when no fit was
    possible or the candidate does not rank better than the scorer in use."""

    model: LearnedModel | None
    controller: QualityController | None
    verdict: Verdict


def folds_for(labels: np.ndarray) -> int:
    """As many folds as the rarer label allows, so every fold can hold one of each; 2 to 10."""
    minority = int(min(labels.sum(), len(labels) - labels.sum()))
    return max(2, min(MAX_FOLDS, minority))


def log_loss(scores: np.ndarray, labels: np.ndarray) -> float:
    p = np.clip(scores, 1e-4, 1 - 1e-4)
    return float(-np.mean(np.where(labels, np.log(p), np.log(1 - p))))


def chosen_l2(m: Matrix, folds: int, seeds: int = 2) -> float:
    """The grid's L2 strength with the lowest out-of-fold log-loss (averaged over `seeds` splits)."""
    losses = [np.mean([log_loss(out_of_fold(m, folds, l2, s), m.acceptable) for s in range(seeds)]) for l2 in L2_GRID]
    return L2_GRID[int(np.argmin(losses))]


def auc_error(auc: float, positives: float, negatives: float) -> float:
    """Hanley and McNeil's standard error of an AUC."""
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    var = (auc * (1 - auc) + (positives - 1) * (q1 - auc * auc) + (negatives - 1) * (q2 - auc * auc)) / max(
        1.0, positives * negatives
    )
    return math.sqrt(max(0.0, var))


def first_fit(
    rows: Sequence[TrainingRow],
    samples: Sequence[tuple[Sample, Vectors]],
    policy: Policy,
    last_tier_feedback: tuple[TeamVerdicts, ...] | None = None,
) -> FirstFit:
    """A candidate from `rows` (`rows_of` each of `samples`, in order: one row per cheap tier),
    with the controller its out-of-fold confidences give `policy` (see the module's docstring)."""
    label = np.array([r.label for r in rows], dtype=bool)
    minority = int(min(label.sum(), len(label) - label.sum()))
    if len(rows) < FIRST_FIT or minority < MIN_MINORITY:
        why = f"too few samples of both kinds to fit ({len(rows)} rows, {minority} of the rarer kind)"
        return FirstFit(None, None, Verdict(False, None, None, 0, why))
    m = Matrix(np.array([r.features for r in rows], float), label, np.array([r.agrees for r in rows], bool), None)
    folds = folds_for(label)
    l2 = chosen_l2(m, folds)
    scores = out_of_fold(m, folds, l2, seed=0)
    weights = [r.weight for r in rows]
    current = weighted_auc([1.0 if r.confidence is None else r.confidence for r in rows], label.tolist(), weights)
    candidate = weighted_auc(scores.tolist(), label.tolist(), weights)
    if current is None or candidate is None:
        return FirstFit(None, None, Verdict(False, current, candidate, len(rows), "no rows of both kinds"))
    error = auc_error(candidate, float(label.sum()), float((~label).sum()))
    if candidate < current + max(MIN_GAIN, error):
        why = (
            f"the candidate's out-of-fold AUC {candidate:.3f} does not beat the scorer in use ({current:.3f}) "
            f"by {MIN_GAIN} and one standard error ({error:.3f}) on {len(rows)} samples"
        )
        return FirstFit(None, None, Verdict(False, current, candidate, len(rows), why))
    whole = fit(m, l2)
    model = LearnedModel(whole.accept, None, calibration_of(m, scores))
    controller = QualityController(policy, model.calibration)
    if last_tier_feedback is not None:
        controller.last_tier_feedback(last_tier_feedback)
    reason = (
        f"out-of-fold AUC {candidate:.3f} against {current:.3f} on {len(rows)} samples "
        f"({folds} folds, L2 {l2:g}); {controller.estimate().reason}"
    )
    return FirstFit(model, controller, Verdict(True, current, candidate, len(rows), reason))
