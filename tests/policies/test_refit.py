"""Refitting the learned scorer from a cascade's samples replaces it only when it is better."""

from __future__ import annotations

import random

import pytest

from policies.quality import Sample
from policies.scorers.features import features
from policies.scorers.learned import LearnedModel, auc
from policies.scorers.refit import TrainingRow, decide, refit, rescored, rows_of, traffic_auc, weighted_auc
from policies.scorers.training import Matrix, TrainingExample, train_matrix
from tests.policies.test_scorers import synthetic


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
