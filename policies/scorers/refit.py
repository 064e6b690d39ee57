"""Learning from a cascade's own traffic: refit the learned scorer from its stored samples, and
keep the new one only when it beats the current one on samples neither was fitted on.

The samples (gateway/storage/cascade_samples.py) hold each cheap answer's feature vector, whether it
agreed with the last tier and its weight (1 / the probability it was sampled). The newest
`held_back` share is kept aside; a candidate is fitted on the rest (labels: a team's verdict on
the answer where POST /v1/feedback gave one, else agreement, the only label traffic gives), and
both scorers are ranked on the held-back samples by weighted AUC, so the comparison is on the
traffic as it is now. A candidate trained on agreement alone
carries a calibration without correctness labels (every disagreement counted as a loss, the
last tier's quality from feedback, the config or the default 0.5), so against a scorer whose
calibration has them and holds on the traffic a better ranking is not enough: the candidate must
also certify the target, bound without labels, at a lower estimated escalation than the cascade
has now (`Incumbent`). That bound is the more conservative one (a disagreement never costs more
than a whole answer), so the swap keeps the target and costs less; in the usual case (the
bundled scorer on traffic like its labels) the wider bound escalates more and the labelled
scorer is kept. Without an `Incumbent` such a scorer is always kept. A calibration the traffic
set aside is replaced by the ranking alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from policies.quality import Sample, TeamVerdicts
from policies.quality_controller import Mode, Policy, QualityController
from policies.scorers.learned import LearnedModel
from policies.scorers.training import Matrix, train_matrix

MIN_GAIN = 0.01  # AUC points a candidate must gain: refits on noise should not churn the scorer
MIN_HELD_BACK = 50  # held-back samples, of each class together, before a comparison counts
MIN_SAVING = 0.02  # the share of requests a candidate must escalate less to replace a labelled calibration

Vectors = Sequence[Sequence[float]]


@dataclass(frozen=True, slots=True)
class TrainingRow:
    """One stored cheap answer, as the learned scorer trains on it."""

    features: tuple[float, ...]
    agrees: bool  # with the last tier's answer
    weight: float  # 1 / the probability its request was sampled
    acceptable: bool | None = None  # a team's verdict on this very answer (POST /v1/feedback), if any
    confidence: float | None = None  # what the scorer in use said of it when it was sampled

    @property
    def label(self) -> bool:
        """What the scorer learns: the team's verdict where there is one, else agreement."""
        return self.agrees if self.acceptable is None else self.acceptable


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


@dataclass(frozen=True)
class Incumbent:
    """The cascade as it is, for a candidate to beat at the target: its quality settings, its
    samples (each with its cheap answers' feature vectors, to rescore), the share of requests its
    controller is estimated to escalate now (1: all), and the teams' verdicts on its last tier."""

    policy: Policy
    samples: Sequence[tuple[Sample, Vectors]]
    escalation: float
    last_tier_feedback: tuple[TeamVerdicts, ...] | None = None


def controller_for(
    model: LearnedModel,
    policy: Policy,
    samples: Sequence[tuple[Sample, Vectors]],
    last_tier_feedback: tuple[TeamVerdicts, ...] | None = None,
) -> QualityController:
    """The quality controller a cascade would have on `model`: its calibration, the samples
    rescored by it, the teams' verdicts on the last tier."""
    controller = QualityController(policy, model.calibration)
    if last_tier_feedback is not None:
        controller.last_tier_feedback(last_tier_feedback)
    controller.add(*(rescored(sample, vectors, model) for sample, vectors in samples))
    return controller


def refit(
    rows: Sequence[TrainingRow],
    current: LearnedModel,
    current_rejected: bool = False,
    held_back: float = 0.3,
    folds: int = 10,
    l2: float = 1.0,
    incumbent: Incumbent | None = None,
) -> tuple[LearnedModel | None, Verdict]:
    """A new scorer fitted on every row (with its calibration) when it wins, else None."""
    cut = int(len(rows) * (1 - held_back))
    test = rows[cut:]
    labelled = current.calibration is not None and current.calibration.last_right is not None
    label = np.array([r.label for r in rows], dtype=bool)
    if cut < 2 or label[:cut].all() or not label[:cut].any():
        return None, decide(None, None, len(test), labelled, current_rejected)
    weigh_cost = labelled and not current_rejected and incumbent is not None
    agrees = np.array([r.agrees for r in rows], dtype=bool)
    m = Matrix(np.array([r.features for r in rows], float), label, agrees, None)
    candidate = train_matrix(m.rows(np.arange(cut)), folds=1, l2=l2).model
    labels, weights = [r.label for r in test], [r.weight for r in test]
    verdict = decide(
        weighted_auc([current.confidence_of(r.features) for r in test], labels, weights),
        weighted_auc([candidate.confidence_of(r.features) for r in test], labels, weights),
        len(test),
        labelled and not weigh_cost,
        current_rejected,
    )
    if not verdict.replace:
        return None, verdict
    model = train_matrix(m, folds=folds, l2=l2).model
    if not weigh_cost or incumbent is None:
        return model, verdict
    controller = controller_for(model, incumbent.policy, incumbent.samples, incumbent.last_tier_feedback)
    escalation = controller.estimate().escalation
    certified = controller.mode is Mode.CERTIFIED and controller.threshold is not None and escalation is not None
    if not certified or escalation is None or escalation > incumbent.escalation - MIN_SAVING:
        said = f"escalates {escalation:.1%}" if certified and escalation is not None else "certifies no threshold"
        return None, Verdict(
            False,
            verdict.current_auc,
            verdict.candidate_auc,
            verdict.held_back,
            f"the current scorer's calibration has correctness labels and holds on this traffic; the candidate "
            f"ranks better ({verdict.reason}) but, bound without labels, {said} at the target against "
            f"{incumbent.escalation:.1%} now",
        )
    return model, Verdict(
        True,
        verdict.current_auc,
        verdict.candidate_auc,
        verdict.held_back,
        f"{verdict.reason}; bound without labels it escalates {escalation:.1%} at the target against "
        f"{incumbent.escalation:.1%} with the labelled calibration",
    )


@dataclass(frozen=True)
class Upgrade:
    """What `upgrade` decided: a learned scorer with the controller rebuilt on it, or neither."""

    model: LearnedModel | None  # fitted on every row, with its cross-validated calibration
    controller: QualityController | None  # on `model`'s calibration and the samples it rescored
    verdict: Verdict


def upgrade(
    rows: Sequence[TrainingRow],
    samples: Sequence[tuple[Sample, Vectors]],
    policy: Policy,
    last_tier_feedback: tuple[TeamVerdicts, ...] | None = None,
    held_back: float = 0.3,
    folds: int = 10,
    l2: float = 1.0,
) -> Upgrade:
    """A learned scorer in place of one that is not (`rules`, `logprob`), from the cascade's own
    samples: `rows` (`rows_of`, oldest first, each with the confidence the scorer in use gave
    it) to fit and compare on, `samples` (each with its cheap answers' feature vectors) to
    rebuild the controller on, `policy` the cascade's, `last_tier_feedback` the
    teams' verdicts on its last tier. The candidate must rank the newest `held_back` share
    better than the stored confidences did (`decide`, as a refit); then, fitted on every row with
    a `folds`-fold calibration, its controller must certify a threshold at the target."""
    cut = int(len(rows) * (1 - held_back))
    test = rows[cut:]
    label = np.array([r.label for r in rows], dtype=bool)
    if cut < 2 or label[:cut].all() or not label[:cut].any():
        return Upgrade(None, None, decide(None, None, len(test), False, False))
    agrees = np.array([r.agrees for r in rows], dtype=bool)
    m = Matrix(np.array([r.features for r in rows], float), label, agrees, None)
    candidate = train_matrix(m.rows(np.arange(cut)), folds=1, l2=l2).model
    labels, weights = [r.label for r in test], [r.weight for r in test]
    verdict = decide(
        weighted_auc([1.0 if r.confidence is None else r.confidence for r in test], labels, weights),
        weighted_auc([candidate.confidence_of(r.features) for r in test], labels, weights),
        len(test),
        False,
        False,
    )
    if not verdict.replace:
        return Upgrade(None, None, verdict)
    model = train_matrix(m, folds=folds, l2=l2).model
    controller = controller_for(model, policy, samples, last_tier_feedback)
    if model.calibration is None or controller.mode is not Mode.CERTIFIED or controller.threshold is None:
        why = controller.estimate().reason
        return Upgrade(
            None,
            None,
            Verdict(
                False,
                verdict.current_auc,
                verdict.candidate_auc,
                verdict.held_back,
                f"the candidate ranks held-back samples better ({verdict.reason}) but certifies no threshold "
                f"at the target ({why}): escalating as before",
            ),
        )
    reason = f"{verdict.reason}; its calibration certifies threshold {controller.threshold:.2f}"
    return Upgrade(model, controller, Verdict(True, verdict.current_auc, verdict.candidate_auc, len(test), reason))


def rows_of(
    sample: Sample, vectors: Sequence[Sequence[float]], answered_by: int | None, right: bool | None
) -> list[TrainingRow]:
    """A stored sample's training rows, one per cheap tier. `answered_by` is the tier whose answer
    the client got and a team judged (`right`), None without a verdict. A verdict on a cheap
    answer labels it; one on the last tier's answer labels each cheap answer that agreed with it
    the same, and one that disagreed with a right answer wrong (with a wrong one: not known)."""
    last = len(sample.confidences)
    rows = []
    for tier, (vector, agrees) in enumerate(zip(vectors, sample.agrees)):
        acceptable = None
        if right is not None and answered_by == tier:
            acceptable = right
        elif right is not None and answered_by == last:
            acceptable = right if agrees else (False if right else None)
        rows.append(TrainingRow(tuple(vector), agrees, sample.weight, acceptable, sample.confidences[tier]))
    return rows


def traffic_auc(samples: Sequence[Sample]) -> float | None:
    """How well the confidences a scorer gave rank the cheap answers that agreed with the last
    tier above those that did not, over a cascade's samples (every cheap tier's answer, each
    weighted as its sample); None without both kinds. For a scorer not fitted on these samples
    this is a held-out figure."""
    scores = [c for s in samples for c in s.confidences]
    labels = [a for s in samples for a in s.agrees]
    weights = [s.weight for s in samples for _ in s.confidences]
    return weighted_auc(scores, labels, weights)


def rescored(sample: Sample, vectors: Sequence[Sequence[float]], model: LearnedModel) -> Sample:
    """A stored sample as `model` would have scored it, from its feature vectors. A confidence of
    exactly 0 is the rule checks' (policies/scorers/rules.py: an empty, refused, truncated or
    invalid answer), which no feature says, and stays 0."""
    confidences = tuple(0.0 if old == 0.0 else model.confidence_of(v) for old, v in zip(sample.confidences, vectors))
    return Sample(confidences, sample.agrees, sample.weight)
