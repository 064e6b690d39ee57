"""The quality target: Wilson bounds, counterfactual agreement, threshold choice."""

from __future__ import annotations

import pytest

from policies.quality import QualityController, Sample, agreement_counts, agreements, choose_threshold, \
    outcome, wilson_lower


@pytest.mark.parametrize("successes, n, confidence, low, high", [
    (0, 0, 0.95, 0.0, 0.0),
    (10, 10, 0.95, 0.78, 0.79),     # 10/10 still leaves doubt
    (100, 100, 0.95, 0.973, 0.974),
    (95, 100, 0.95, 0.9, 0.91),
    (950, 1000, 0.95, 0.937, 0.939),
    (50, 100, 0.95, 0.41, 0.42),
    (0, 10, 0.95, 0.0, 0.0001),
])
def test_wilson_lower(successes: int, n: int, confidence: float, low: float, high: float) -> None:
    assert low <= wilson_lower(successes, n, confidence) <= high


@pytest.mark.parametrize("sample, threshold, expected", [
    (Sample((0.9,), (False,)), 0.5, (0, False)),
    (Sample((0.4,), (False,)), 0.5, (1, True)),         # escalated: the last tier agrees with itself
    (Sample((0.4, 0.8), (True, False)), 0.5, (1, False)),
    (Sample((0.6, 0.8), (True, False)), 0.5, (0, True)),
    (Sample((0.9,), (False,)), None, (1, True)),         # None: escalate everything
])
def test_outcome(sample: Sample, threshold: float | None, expected: tuple[int, bool]) -> None:
    assert outcome(sample, threshold) == expected


def samples(spec: list[tuple[float, bool, int]]) -> list[Sample]:
    return [Sample((conf,), (agrees,)) for conf, agrees, count in spec for _ in range(count)]


MIXED = samples([(0.9, True, 80), (0.7, True, 10), (0.7, False, 5), (0.3, False, 5)])


def test_vectorized_counts_match_the_rule() -> None:
    mixed3 = MIXED + [Sample((0.2, 0.95), (False, True)), Sample((0.2, 0.95), (False, False))]
    candidates = [0.0, 0.25, 0.5, 0.75, 1.0]
    assert list(agreement_counts(mixed3, candidates)) == [agreements(mixed3, t)[0] for t in candidates]


@pytest.mark.parametrize("data, target, expected", [
    (MIXED, 0.80, 0.0),    # 90/100 agree even accepting everything; bound ~0.84
    (MIXED, 0.88, 0.31),   # must escalate the 0.3s: 95/100, bound ~0.90
    (MIXED, 0.93, 0.71),   # must escalate the 0.7s too: 100/100
    (MIXED, 0.99, None),   # 100 samples cannot prove 99%: escalate everything
    (samples([(0.9, True, 500)]), 0.99, 0.0),
])
def test_choose_threshold(data: list[Sample], target: float, expected: float | None) -> None:
    assert choose_threshold(data, target) == expected


def test_controller_waits_for_min_samples_then_moves() -> None:
    controller = QualityController(0.85, 0.8, min_samples=50)
    controller.add(*samples([(0.9, True, 49)]))
    assert controller.threshold == 0.8 and not controller.adapted
    controller.add(*samples([(0.9, True, 1)]))
    assert controller.adapted and controller.threshold == 0.0  # cheaper: accept everything
    controller.add(*samples([(0.2, False, 20)]))
    assert controller.threshold is not None and 0.2 < controller.threshold <= 0.9  # back up
    e = controller.estimate()
    assert e.samples == 70 and e.agreement == 1.0 and e.lower_bound >= 0.85


def test_non_adaptive_controller_keeps_its_threshold() -> None:
    controller = QualityController(0.9, 0.6, adaptive=False, min_samples=1)
    controller.add(*samples([(0.9, False, 10)]))
    assert controller.threshold == 0.6 and controller.estimate().agreement == 0.0
