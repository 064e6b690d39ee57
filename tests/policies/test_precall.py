"""The router before the call (policies/precall.py): trained on what the query alone says, it
sends a request straight to the last tier when the cheap answer is not expected to be accepted.
A skipped request gets the last tier's answer, so the router can only raise quality: with a
scorer that cannot separate, the cascade with a router never goes below the target."""

from __future__ import annotations

import random

import numpy as np

from policies.precall import MIN_ROWS, router_at, train_router
from policies.quality import Sample
from policies.quality_controller import Mode, Policy, QualityController
from policies.scorers import Scored
from policies.scorers.answer_features import NAMES, features
from policies.scorers.learned import LearnedModel, LogisticModel

POLICY = Policy(0.95, last_tier_quality=1.0)  # quality: agreement with the last tier
CHEAP, LAST = 1.0, 10.0  # the tiers' prices


def question(rng: random.Random, hard: bool) -> Scored:
    """Hard questions (with a percent, many numbers) and easy ones, told apart from the query alone."""
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    if hard:
        return Scored(f"A shop marks {a}% off {b} items at {a + b} and {b + 3} each; what is saved over {a} days?", "")
    return Scored(f"How many pens in {a} boxes?", "")


def trained_router(rng: random.Random):
    items = [question(rng, hard=i % 2 == 0) for i in range(4 * MIN_ROWS)]
    accepted = [i % 2 == 1 for i in range(len(items))]  # easy questions' answers are accepted
    router = train_router([features(q) for q in items], accepted)
    assert router is not None and router.auc > 0.9
    return router


def replay(n: int, confidence, agrees, router, rng: random.Random) -> tuple[float, QualityController]:
    """Quality (agreement with the last tier; the last tier's own answer agrees) over n requests,
    through the quality controller as the cascade runs it, with the router before the call."""
    controller, kept = QualityController(POLICY, None), 0
    for i in range(n):
        q = question(rng, hard=i % 3 == 0)
        route = controller.route(rng)
        if not route.call_cheap or (
            router is not None and controller.threshold is not None and router.skips(features(q), CHEAP, LAST)
        ):
            kept += 1  # the last tier answers
            continue
        c, ok = confidence(q, rng), agrees(q, rng)
        if controller.threshold is not None and c >= controller.threshold:
            kept += ok
            continue
        kept += 1
        controller.add(Sample((c,), (ok,), route.weight))
    return kept / n, controller


def test_with_a_scorer_that_cannot_separate_a_router_never_brings_quality_below_the_target() -> None:
    router = trained_router(random.Random(1))
    for seed in range(5):
        quality, controller = replay(
            600, lambda q, r: r.random(), lambda q, r: r.random() < 0.6, router, random.Random(seed)
        )
        assert controller.mode is not Mode.CERTIFIED
        assert quality >= POLICY.target, (seed, quality)


def test_a_router_only_sends_requests_to_the_last_tier_so_quality_never_drops() -> None:
    # A scorer that separates: easy questions' answers agree (and score high), hard ones do not.
    router = trained_router(random.Random(2))

    def confidence(q: Scored, r: random.Random) -> float:
        return 0.9 if "%" not in q.query else r.random() * 0.5

    def agrees(q: Scored, r: random.Random) -> bool:
        return "%" not in q.query or r.random() < 0.3

    without, _ = replay(600, confidence, agrees, None, random.Random(9))
    routed, controller = replay(600, confidence, agrees, router, random.Random(9))
    assert controller.mode is Mode.CERTIFIED
    assert routed >= without >= POLICY.target
    hard = question(random.Random(3), hard=True)
    easy = question(random.Random(3), hard=False)
    assert router.skips(features(hard), CHEAP, LAST) and not router.skips(features(easy), CHEAP, LAST)


def test_too_few_samples_or_no_signal_train_no_router() -> None:
    rng = random.Random(4)
    items = [question(rng, hard=i % 2 == 0) for i in range(MIN_ROWS - 1)]
    assert train_router([features(q) for q in items], [i % 2 == 1 for i in range(len(items))]) is None
    items = [question(rng, hard=i % 2 == 0) for i in range(200)]
    noise = [rng.random() < 0.5 for _ in items]
    assert train_router([features(q) for q in items], noise) is None  # out-of-fold AUC under MIN_AUC


def test_a_router_on_samples_is_labelled_by_the_scorer_in_use_at_the_threshold() -> None:
    """Without a learned model each sample's own confidence labels it (a rule violation's 0 is a
    rejection); with one, the model's confidence of its vector does; samples without a vector are
    left out."""
    rng = random.Random(3)
    items = [question(rng, hard=i % 2 == 0) for i in range(4 * MIN_ROWS)]
    samples = [(Sample((0.0 if i % 2 == 0 else 0.9,), (True,)), (tuple(features(q)),)) for i, q in enumerate(items)]
    samples.append((Sample((0.9,), (True,)), ()))  # stored without features
    router = router_at(0.5, samples, None)
    assert router is not None and router.auc > 0.9 and router.rows == len(items)
    assert router.accept_probability(features(question(rng, hard=False))) > 0.5
    assert router.accept_probability(features(question(rng, hard=True))) < 0.5
    n = len(NAMES)
    zeros = [0.0] * n
    always = LearnedModel(LogisticModel(NAMES, np.array(zeros), np.ones(n), np.array(zeros), 5.0))  # accepts all
    assert router_at(0.5, samples, always) is None  # every sample accepted: nothing to tell apart
