"""The early fit of a default cascade (policies/scorers/first_fit.py): from tens of samples, a
learned scorer whose controller counts each sample once, with a confidence from a model that
never saw it; certified when the samples alone prove the target, learning while they may, and
no candidate where the answers cannot be told apart."""

from __future__ import annotations

import random

import numpy as np

from policies.quality_controller import Mode, Policy
from policies.scorers.first_fit import FIRST_FIT, auc_error, first_fit, folds_for
from policies.scorers.refit import rows_of
from tests.policies.test_refit_upgrade import traffic

# The target as agreement with the last tier (A = 1): what a separable traffic can prove from tens.
AGREEMENT = Policy(0.95, last_tier_quality=1.0)


def test_thirty_separable_samples_certify_with_each_sample_counted_once() -> None:
    rows, samples = traffic(random.Random(3), 30, 1.0, 0.0)
    fitted = first_fit(rows, samples, AGREEMENT)
    assert fitted.verdict.replace and fitted.model is not None and fitted.controller is not None, fitted.verdict
    c = fitted.controller
    assert c.mode is Mode.CERTIFIED and c.threshold is not None, c.estimate().reason
    # the 30 samples are the only evidence, counted once: as the out-of-fold calibration, not again as traffic
    assert fitted.model.calibration is not None and fitted.model.calibration.examples == 30
    assert c.calibration is fitted.model.calibration and len(c.samples) == 0
    assert c.shadow_probability() == 1.0  # the first accepted answers are all checked
    assert fitted.verdict.current_auc == 0.5 and fitted.verdict.candidate_auc == 1.0


def test_at_the_default_last_tier_quality_thirty_samples_prove_nothing_yet_but_keep_hope() -> None:
    # A unknown (0.5): 1 - D/0.5 must stay above 95%; thirty samples cannot show it yet
    rows, samples = traffic(random.Random(4), 30, 1.0, 0.0)
    fitted = first_fit(rows, samples, Policy(0.95))
    assert fitted.controller is not None and fitted.controller.mode is Mode.LEARNING


def test_answers_that_cannot_be_told_apart_never_certify() -> None:
    # agreement independent of the answer's shape: a lucky fold may rank a little, never prove
    for seed in range(8):
        rows, samples = traffic(random.Random(seed), 60, 0.6, 0.6)
        fitted = first_fit(rows, samples, AGREEMENT)
        assert fitted.controller is None or fitted.controller.mode is not Mode.CERTIFIED, fitted.verdict


def test_too_few_samples_or_one_kind_only_is_not_fitted() -> None:
    rows, samples = traffic(random.Random(6), FIRST_FIT - 2, 1.0, 0.0)
    assert "too few" in first_fit(rows, samples, AGREEMENT).verdict.reason
    rows, samples = traffic(random.Random(6), 40, 1.0, 1.0)  # every answer agrees
    assert "too few" in first_fit(rows, samples, AGREEMENT).verdict.reason


def test_an_out_of_fold_confidence_is_never_the_in_sample_one() -> None:
    # Thirty samples whose labels are noise: in sample a 30-feature fit separates them, out of
    # fold it must not; a candidate that wins here would be trusting memorised labels.
    rng = random.Random(7)
    rows, samples = traffic(rng, 40, 0.5, 0.5)
    noisy = [rows_of(s, v, None, None)[0] for s, v in samples]
    assert first_fit(noisy, samples, AGREEMENT).model is None


def test_folds_follow_the_rarer_label_and_the_auc_error_shrinks_with_samples() -> None:
    assert folds_for(np.array([True] * 27 + [False] * 3)) == 3
    assert folds_for(np.array([True] * 50 + [False] * 50)) == 10
    assert auc_error(0.8, 10, 10) > auc_error(0.8, 100, 100) > 0
