"""A rules or logprob cascade upgraded to a learned scorer trained on its own samples: only when
the candidate ranks held-back samples better than the confidences the scorer in use gave them,
and a controller rebuilt on its cross-validated calibration certifies a threshold."""

from __future__ import annotations

import random

from policies.quality import Sample, TeamVerdicts
from policies.quality_controller import Mode, Policy
from policies.scorers import Scored
from policies.scorers.answer_features import features
from policies.scorers.refit import TrainingRow, rows_of, upgrade

POLICY = Policy(0.95)  # the default cascade: 95% of the last tier's quality, A unknown (0.5)


def agreeing(rng: random.Random) -> Scored:
    """A worked answer whose arithmetic checks out: of the shape the last tier agrees with."""
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    return Scored(f"A box holds {a} rows of {b} pens. How many?", f"{a} * {b} = {a * b}.\n#### {a * b}")


def guessing(rng: random.Random) -> Scored:
    """A hedged guess: of the shape the last tier does not agree with."""
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    return Scored(f"A box holds {a} rows of {b} pens. How many?", f"Maybe about {a * b + rng.randint(1, 9)}?")


def traffic(
    rng: random.Random, n: int, agree_if_worked: float, agree_if_guess: float, confidence=lambda item: 1.0
) -> tuple[list[TrainingRow], list[tuple[Sample, tuple[tuple[float, ...], ...]]]]:
    """n samples, half of each shape, agreeing with the given probabilities; `confidence` is what
    the scorer in use said (the rule checks pass: 1.0)."""
    rows, samples = [], []
    for i in range(n):
        worked = i % 2 == 0
        item = agreeing(rng) if worked else guessing(rng)
        agrees = rng.random() < (agree_if_worked if worked else agree_if_guess)
        vectors = (tuple(features(item)),)
        sample = Sample((confidence(item),), (agrees,), 1.0)
        rows += rows_of(sample, vectors, None, None)
        samples.append((sample, vectors))
    return rows, samples


def test_a_learnable_pattern_upgrades_the_rules_scorer_and_certifies_a_threshold() -> None:
    rng = random.Random(1)
    rows, samples = traffic(rng, 240, 1.0, 0.0)
    assert all(r.confidence == 1.0 for r in rows)  # the rules scorer's: it cannot rank them
    result = upgrade(rows, samples, POLICY)
    v = result.verdict
    assert v.replace and result.model is not None and result.controller is not None, v.reason
    assert v.current_auc == 0.5 and v.candidate_auc == 1.0 and v.held_back == 72
    assert "certifies threshold" in v.reason
    controller, model = result.controller, result.model
    assert model.calibration is not None and model.calibration.examples == 240
    assert controller.mode is Mode.CERTIFIED and controller.threshold is not None
    assert len(controller.samples) == 240  # rebuilt on every sample, rescored by the new scorer
    e = controller.estimate()
    assert e.quality_lower_bound >= 0.95 and e.escalation < 0.6  # the worked half is accepted
    for _ in range(50):  # on answers it never saw: the worked shape accepted, the guesses escalated
        assert model.confidence(agreeing(rng)) >= controller.threshold
        assert model.confidence(guessing(rng)) < controller.threshold


def test_answers_it_cannot_tell_apart_keep_the_rules_scorer() -> None:
    rng = random.Random(2)
    rows, samples = traffic(rng, 240, 0.5, 0.5)  # agreement is a coin flip whatever the shape
    result = upgrade(rows, samples, POLICY)
    assert not result.verdict.replace and result.model is None and result.controller is None
    assert "does not beat" in result.verdict.reason


def test_a_better_ranking_that_certifies_nothing_keeps_escalating() -> None:
    # The worked shape agrees 75% of the time, the guesses 25%: the candidate ranks far better
    # than the rules scorer, but accepting even the worked half loses 12.5% of the answers to
    # disagreement, where the target allows 2.5% (5% of A = 0.5).
    rng = random.Random(3)
    rows, samples = traffic(rng, 400, 0.75, 0.25)
    result = upgrade(rows, samples, POLICY)
    v = result.verdict
    assert not v.replace and result.model is None and result.controller is None
    assert v.candidate_auc is not None and v.current_auc is not None and v.candidate_auc > v.current_auc + 0.1
    assert "certifies no threshold" in v.reason and "escalating as before" in v.reason


def test_a_logprob_scorer_that_already_ranks_well_is_kept() -> None:
    # The same rule as a refit: the candidate must beat the confidences the scorer in use gave.
    rng = random.Random(4)
    rows, samples = traffic(rng, 240, 1.0, 0.0, confidence=lambda item: 0.9 if "####" in item.answer else 0.3)
    result = upgrade(rows, samples, POLICY)
    assert not result.verdict.replace and result.verdict.current_auc == 1.0
    assert "does not beat" in result.verdict.reason


def test_too_few_samples_decide_nothing() -> None:
    rng = random.Random(5)
    rows, samples = traffic(rng, 100, 1.0, 0.0)  # 30 held back, under the 50 a comparison needs
    result = upgrade(rows, samples, POLICY)
    assert not result.verdict.replace and "too few held-back samples" in result.verdict.reason
    rows, samples = traffic(rng, 240, 1.0, 1.0)  # every answer agrees: nothing to learn
    assert not upgrade(rows, samples, POLICY).verdict.replace


def test_the_teams_verdicts_on_the_last_tier_set_a_for_the_certification() -> None:
    # A = 0.5 by default; teams that judged the last tier right every time make A = 1, so the
    # same evidence certifies the same threshold with a tighter bound.
    rng = random.Random(6)
    rows, samples = traffic(rng, 240, 1.0, 0.0)
    default = upgrade(rows, samples, POLICY).controller
    judged = upgrade(rows, samples, POLICY, last_tier_feedback=(TeamVerdicts("t", 40, 40, 40),)).controller
    assert default is not None and judged is not None
    assert judged.estimate().last_tier_source == "feedback" and default.estimate().last_tier_source == "default"
    assert judged.estimate().quality_lower_bound >= default.estimate().quality_lower_bound
