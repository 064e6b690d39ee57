"""Refitting the learned scorer from a cascade's samples replaces it only when it is better."""

from __future__ import annotations

import random

import pytest

from policies.quality import Sample
from policies.quality_controller import Policy
from policies.scorers.answer_features import features
from policies.scorers.learned import LearnedModel, auc
from policies.scorers.refit import (
    Incumbent,
    TrainingRow,
    controller_for,
    decide,
    refit,
    rescored,
    rows_of,
    traffic_auc,
    weighted_auc,
)
from policies.scorers.training import Matrix, TrainingExample, train_matrix
from tests.policies.test_scorers import synthetic

POLICY = Policy(0.95)  # the default cascade's target; the last tier's quality from labels or 0.5


@pytest.mark.parametrize(
    "scores, labels, weights, expected",
    [
        ([0.9, 0.8, 0.1], [True, True, False], [1, 1, 1], 1.0),
        ([0.1, 0.9], [True, False], [1, 1], 0.0),
        ([0.5, 0.5], [True, False], [1, 1], 0.5),
        ([0.9, 0.2, 0.5], [True, True, False], [1, 1, 1], 0.5),
        ([0.9, 0.2, 0.5], [True, True, False], [3, 1, 1], 0.75),  # the winning pair counts three times
        ([0.9, 0.8], [True, True], [1, 1], None),  # one class only
    ],
)
def test_weighted_auc(scores, labels, weights, expected) -> None:
    assert weighted_auc(scores, labels, weights) == expected


def test_weighted_auc_with_unit_weights_is_the_auc() -> None:
    rng = random.Random(1)
    scores = [rng.choice([0.1, 0.2, 0.3, 0.5]) for _ in range(200)]
    labels = [rng.random() < s + 0.3 for s in scores]
    assert weighted_auc(scores, labels, [1.0] * 200) == pytest.approx(auc(scores, labels))


@pytest.mark.parametrize(
    "current, candidate, held_back, labelled, rejected, replace",
    [
        (0.60, 0.70, 200, False, False, True),
        (0.60, 0.605, 200, False, False, False),  # within MIN_GAIN: keep, no churn
        (0.70, 0.60, 200, False, False, False),  # worse
        (0.60, 0.70, 20, False, False, False),  # too few held-back samples to tell
        (0.60, 0.70, 200, True, False, False),  # the current one's labels are worth more than the ranking
        (0.60, 0.70, 200, True, True, True),  # ...unless the traffic set its calibration aside
        (None, 0.70, 200, False, False, False),
    ],
)
def test_decide(current, candidate, held_back, labelled, rejected, replace) -> None:
    assert decide(current, candidate, held_back, labelled, rejected).replace is replace


def rows(rng: random.Random, n: int) -> list[TrainingRow]:
    return [TrainingRow(tuple(features(e.item)), e.label, rng.choice([1.0, 1.0, 10.0])) for e in synthetic(rng, n)]


def model_of(data: list[TrainingRow], labels: list[bool]) -> LearnedModel:
    import numpy as np

    x = np.array([r.features for r in data])
    y = np.array(labels)
    return train_matrix(Matrix(x, y, y, None), folds=1).model


def test_refit_replaces_a_scorer_that_ranks_badly() -> None:
    rng = random.Random(2)
    data = rows(rng, 400)
    blind = model_of(data, [not r.agrees for r in data])  # fitted on inverted labels: ranks backwards
    new, verdict = refit(data, blind)
    assert verdict.replace and new is not None and verdict.candidate_auc > verdict.current_auc + 0.1
    assert new.calibration is not None and new.calibration.examples == 400
    held_out = synthetic(rng, 200)
    assert auc([new.confidence(e.item) for e in held_out], [e.label for e in held_out]) > 0.9


def test_refit_keeps_a_scorer_that_is_as_good() -> None:
    rng = random.Random(3)
    good = train_matrix(Matrix.of([TrainingExample(e.item, e.label) for e in synthetic(rng, 400)]), folds=1).model
    new, verdict = refit(rows(rng, 400), good)
    assert not verdict.replace and new is None and "does not beat" in verdict.reason


def test_refit_keeps_a_labelled_calibration_that_holds() -> None:
    rng = random.Random(4)
    data = rows(rng, 400)
    blind = model_of(data, [not r.agrees for r in data])
    labelled = LearnedModel(
        blind.accept,
        None,
        train_matrix(
            Matrix.of([TrainingExample(e.item, e.label, True) for e in synthetic(rng, 100)])
        ).model.calibration,
    )
    assert labelled.calibration is not None and labelled.calibration.last_right is not None
    assert refit(data, labelled)[1].replace is False
    assert refit(data, labelled, current_rejected=True)[1].replace is True


def test_a_teams_verdicts_are_the_labels_where_they_exist() -> None:
    # Agreement says nothing here (a coin flip); the teams' verdicts say the truth on a third of
    # the answers. Refitted on those, the scorer ranks right answers first.
    rng = random.Random(5)
    examples = synthetic(rng, 900)
    data = [
        TrainingRow(tuple(features(e.item)), rng.random() < 0.5, 1.0, e.label if i % 3 == 0 else None)
        for i, e in enumerate(examples)
    ]
    blind = model_of(data, [not e.label for e in examples])  # ranks backwards
    new, verdict = refit(data, blind)
    assert verdict.replace and new is not None
    held_out = synthetic(rng, 200)
    assert auc([new.confidence(e.item) for e in held_out], [e.label for e in held_out]) > 0.8


@pytest.mark.parametrize(
    "agrees, answered_by, right, expected",
    [
        ((True, False), None, None, [None, None]),  # no verdict: agreement alone
        ((True, False), 0, False, [False, None]),  # the first tier's answer, judged wrong
        ((True, False), 1, True, [None, True]),  # the second tier's answer, judged right
        ((True, False), 2, True, [True, False]),  # the last tier right: agreeing right, disagreeing wrong
        ((True, False), 2, False, [False, None]),  # the last tier wrong: agreeing wrong, disagreeing unknown
    ],
)
def test_rows_of_a_sample_with_a_verdict(agrees, answered_by, right, expected) -> None:
    sample = Sample((0.4, 0.6), agrees, 2.0)
    out = rows_of(sample, [(1.0,), (2.0,)], answered_by, right)
    assert [r.acceptable for r in out] == expected
    assert [r.features for r in out] == [(1.0,), (2.0,)] and all(r.weight == 2.0 for r in out)


def test_traffic_auc_ranks_every_cheap_answer_by_its_samples_weight() -> None:
    samples = [Sample((0.9,), (True,)), Sample((0.2,), (False,)), Sample((0.8,), (False,), 3.0)]
    assert traffic_auc(samples) == pytest.approx(weighted_auc([0.9, 0.2, 0.8], [True, False, False], [1, 1, 3]))
    assert traffic_auc([Sample((0.9,), (True,))]) is None


def test_rescored_keeps_the_rule_checks_zero() -> None:
    rng = random.Random(6)
    data = rows(rng, 200)
    model = model_of(data, [r.agrees for r in data])
    vectors = [data[0].features, data[1].features]
    out = rescored(Sample((0.0, 0.7), (False, True), 4.0), vectors, model)
    assert out.confidences == (0.0, model.confidence_of(vectors[1])) and out.weight == 4.0


def shaped(rng: random.Random, n: int, worked_agree: float) -> tuple[list[TrainingRow], list]:
    """Three shapes of answer, as (is W1, is W2, noise) vectors: a quarter W1, a quarter W2, the
    other half G; W1 and W2 agree with the last tier with probability `worked_agree`, G never."""
    rows, samples = [], []
    for i in range(n):
        kind = ("w1", "w2", "g", "g")[i % 4]
        vectors = ((float(kind == "w1"), float(kind == "w2"), rng.random()),)
        sample = Sample((0.5,), (kind != "g" and rng.random() < worked_agree,), 1.0)
        rows += rows_of(sample, vectors, None, None)
        samples.append((sample, vectors))
    return rows, samples


def w1_only() -> LearnedModel:
    """A labelled scorer that only recognizes W1 (0.88; W2 and G both 0.12), its calibration
    from examples with both tiers' correctness: at 0.88, 90 agreeing answers, and 10 that
    disagree where the cheap tier was right and the last one wrong."""
    import numpy as np

    from policies.scorers.learned import LogisticModel
    from policies.threshold_calibration import calibrate, labelled

    accept = LogisticModel(("w1", "w2", "noise"), np.zeros(3), np.ones(3), np.array([4.0, 0.0, 0.0]), -2.0)
    examples = [labelled(0.88, True, True, True)] * 90 + [labelled(0.88, False, True, False)] * 10
    examples += [labelled(0.12, False, False, True)] * 200 + [labelled(0.12, True, True, True)] * 100
    return LearnedModel(accept, None, calibrate(examples))


def incumbent_of(current: LearnedModel, samples: list) -> Incumbent:
    controller = controller_for(current, POLICY, samples)
    assert not controller.rejected  # the labelled calibration holds on this traffic
    return Incumbent(POLICY, samples, controller.estimate().escalation)


def test_a_labelled_calibration_gives_way_to_a_candidate_that_certifies_the_target_for_less() -> None:
    # The current scorer holds (its threshold accepts W1, which agrees), but knows only W1: it
    # escalates three requests in four. The candidate accepts W1 and W2, bound as if every
    # disagreement were a loss and the last tier right only half the time, and still certifies
    # the target: the same promise on more conservative terms, at half the escalation. Refusing it
    # outright (the rule without an incumbent) keeps paying for the labels' tighter bound.
    rng = random.Random(7)
    rows, samples = shaped(rng, 400, 1.0)
    current = w1_only()
    incumbent = incumbent_of(current, samples)
    assert incumbent.escalation == pytest.approx(0.75, abs=0.01)
    assert refit(rows, current)[0] is None  # without an incumbent: the labels always win
    new, verdict = refit(rows, current, incumbent=incumbent)
    assert verdict.replace and new is not None, verdict.reason
    assert "bound without labels it escalates 50.0% at the target against 75.0%" in verdict.reason
    assert new.calibration is not None and new.calibration.last_right is None
    after = controller_for(new, POLICY, samples)
    assert after.estimate().quality_lower_bound >= POLICY.target


def test_a_labelled_calibration_is_kept_where_the_bound_without_labels_certifies_nothing() -> None:
    # The usual case (the bundled scorer on traffic like its labels): one worked answer in ten
    # disagrees with the last tier, but the labels say the cheap tier was the one that was right.
    # The candidate ranks far better and its ranking is worth nothing at the target: counting
    # those disagreements as losses, no threshold holds 95%. The labelled scorer stays.
    rng = random.Random(8)
    rows, samples = shaped(rng, 400, 0.9)
    current = w1_only()
    incumbent = incumbent_of(current, samples)
    assert incumbent.escalation < 0.8  # the labelled scorer certifies W1
    new, verdict = refit(rows, current, incumbent=incumbent)
    assert new is None and not verdict.replace
    assert verdict.candidate_auc > verdict.current_auc + 0.1  # a better ranking...
    assert "holds on this traffic" in verdict.reason and "certifies no threshold" in verdict.reason
