"""The quality bound's arithmetic and the threshold choice, by tables."""

from __future__ import annotations

import math

import numpy as np
import pytest

from policies.quality import (
    Bound,
    Bounds,
    LastTierQuality,
    Sample,
    TeamVerdicts,
    Traffic,
    cheapest_certified,
    contradicts,
    contributions,
    feedback_quality,
    last_tier_quality,
    loss_per_disagreement,
    outcome,
    pooled,
    ratio_bound,
    wilson_lower,
    worth_trying,
)
from policies.threshold_calibration import Calibration, CurvePoint, calibrate, labelled


@pytest.mark.parametrize(
    "successes, n, confidence, low, high",
    [
        (0, 0, 0.95, 0.0, 0.0),
        (10, 10, 0.95, 0.78, 0.79),  # 10/10 still leaves doubt
        (100, 100, 0.95, 0.973, 0.974),
        (95, 100, 0.95, 0.9, 0.91),
        (50, 100, 0.95, 0.41, 0.42),
    ],
)
def test_wilson_lower(successes: int, n: int, confidence: float, low: float, high: float) -> None:
    assert low <= wilson_lower(successes, n, confidence) <= high


@pytest.mark.parametrize(
    "sample, threshold, expected",
    [
        (Sample((0.9,), (False,)), 0.5, (0, False)),
        (Sample((0.4,), (False,)), 0.5, (1, True)),  # escalated: the last tier agrees with itself
        (Sample((0.4, 0.8), (True, False)), 0.5, (1, False)),
        (Sample((0.6, 0.8), (True, False)), 0.5, (0, True)),
        (Sample((0.9,), (False,)), None, (1, True)),  # None: escalate everything
    ],
)
def test_outcome(sample: Sample, threshold: float | None, expected: tuple[int, bool]) -> None:
    assert outcome(sample, threshold) == expected


@pytest.mark.parametrize(
    "sample",
    [
        Sample((0.3,), (False,)),
        Sample((0.2, 0.7), (True, False)),
        Sample((0.8, 0.1), (False, True)),
        Sample((0.5, 0.5), (True, True)),
    ],
)
def test_contributions_follow_the_outcome_rule(sample: Sample) -> None:
    grid = np.array([0.0, 0.2, 0.5, 0.7, 0.9, 1.0])
    accepted, disagree = contributions(sample, grid)
    for t, a, d in zip(grid, accepted, disagree):
        tier, agrees = outcome(sample, float(t))
        assert (a, d) == (float(tier < len(sample.confidences)), float(not agrees))


@pytest.mark.parametrize(
    "configured, calibration, feedback, expected",
    [
        (None, None, None, (0.5, 0.0, "default")),
        (0.9, None, None, (0.9, 0.0, "config")),
        (None, Calibration(100, 80, ()), None, (0.8, 0.8 * 0.2 / 100, "calibration")),
        (0.9, Calibration(100, 80, ()), None, (0.9, 0.0, "config")),  # the operator's word first
        (0.9, Calibration(100, 80, ()), [TeamVerdicts("t", 60, 100, 100)], (0.6, 0.6 * 0.4 / 100, "feedback")),
        (None, Calibration(100, None, ()), None, (0.5, 0.0, "default")),  # a calibration without labels
    ],
)
def test_where_the_last_tier_quality_comes_from(configured, calibration, feedback, expected) -> None:
    last = last_tier_quality(configured, calibration, feedback)
    assert (last.value, last.source) == (expected[0], expected[2])
    assert last.variance == pytest.approx(expected[1])


@pytest.mark.parametrize(
    "lost, gained, disagree, lam, variance",
    [
        (49, 28, 89, 22 / 90, (78 / 90 - (22 / 90) ** 2) / 90),
        (0, 0, 0, 1.0, 0.0),  # no disagreement seen: lean to 1
        (0, 9, 9, -0.8, (10 / 10 - 0.64) / 10),  # the cheap tier is the better one here
        (30, 0, 30, 1.0, 0.0),  # every disagreement lost
    ],
)
def test_loss_per_disagreement(lost: int, gained: int, disagree: int, lam: float, variance: float) -> None:
    got = loss_per_disagreement(lost, gained, disagree)
    assert got[0] == pytest.approx(lam) and got[1] == pytest.approx(variance)


def test_loss_per_disagreement_is_elementwise() -> None:
    lam, variance = loss_per_disagreement(np.array([49, 0]), np.array([28, 9]), np.array([89, 9]))
    assert lam == pytest.approx([22 / 90, -0.8]) and variance[1] == pytest.approx(0.036)


@pytest.mark.parametrize(
    "prior, prior_n, traffic, traffic_n, pseudo, value",
    [
        (0.0, 0, 0.0, 0.0, 1.0, 1.0),  # no evidence at all: everything disagrees
        (0.0, 0, 0.0, 0.0, 0.0, 1.0),
        (0.2, 200, 0.0, 0.0, 0.0, 0.2),  # the calibration alone
        (0.2, 100, 0.4, 100, 0.0, 0.3),  # equal say
        (0.2, 100, 0.4, 300, 0.0, 0.35),  # the traffic outweighs the calibration
        (0.0, 0, 0.4, 99, 1.0, 0.406),  # traffic alone, plus the pseudo-sample
    ],
)
def test_pooled(prior, prior_n, traffic, traffic_n, pseudo, value) -> None:
    got, variance = pooled(prior, prior_n, traffic, traffic_n, pseudo)
    assert got == pytest.approx(value)
    n = prior_n + traffic_n + pseudo
    assert variance == pytest.approx(got * (1 - got) / n if n else 0.0)


@pytest.mark.parametrize(
    "lam, d, last, z, ratio, se",
    [
        # agreement is not quality: 5% disagreement, all lost, of a last tier right 85.7% of the time
        ((1.0, 0.0), (0.05, 0.0), LastTierQuality(0.857, 0.0, "config"), 1.0, 1 - 0.05 / 0.857, 0.0),
        # the same at a quarter loss per disagreement (measured on labels)
        ((0.25, 0.0), (0.05, 0.0), LastTierQuality(0.857, 0.0, "config"), 1.0, 1 - 0.0125 / 0.857, 0.0),
        (
            (0.25, 0.01),
            (0.2, 0.0004),
            LastTierQuality(0.8, 0.0001, "calibration"),
            1.645,
            1 - 0.0625,
            math.sqrt(0.0625 * 0.01 + 0.3125**2 * 0.0004 + 0.078125**2 * 0.0001),
        ),
        ((-0.5, 0.0), (0.1, 0.0), LastTierQuality(0.5, 0.0, "config"), 1.0, 1.1, 0.0),  # the cascade is better
    ],
)
def test_ratio_bound(lam, d, last, z, ratio, se) -> None:
    got = ratio_bound(lam, d, last, z)
    assert got == pytest.approx((ratio, ratio - z * se, ratio + z * se))


def bound(t: float, lower: float, upper: float = 1.0, accepted: float = 0.5) -> Bound:
    return Bound(t, (lower + upper) / 2, lower, upper, accepted, accepted)


@pytest.mark.parametrize(
    "lowers, target, expected",
    [
        ([0.90, 0.94, 0.96, 0.97, 0.99], 0.95, 0.5),
        ([0.96, 0.94, 0.96, 0.97, 0.99], 0.95, 0.5),  # a lone lucky low threshold is not trusted
        ([0.90, 0.94, 0.96, 0.94, 0.99], 0.95, 1.0),  # every threshold above the choice must hold
        ([0.90, 0.91, 0.92, 0.93, 0.94], 0.95, None),  # nothing proven: escalate every request
        ([0.96, 0.96, 0.96, 0.97, 0.99], 0.95, 0.0),
    ],
)
def test_cheapest_certified(lowers: list[float], target: float, expected: float | None) -> None:
    found = Bounds.of([bound(t, lo) for t, lo in zip([0.0, 0.25, 0.5, 0.75, 1.0], lowers)])
    assert cheapest_certified(found, target) == expected


@pytest.mark.parametrize(
    "uppers, accepted, expected",
    [
        ([0.99, 0.97], [0.5, 0.2], True),
        ([0.90, 0.94], [0.5, 0.2], False),  # even the optimistic end misses the target
        ([0.90, 0.99], [0.5, 0.05], False),  # only a threshold that accepts next to nothing could
        ([0.90, 0.99], [0.5, (0.05, 0.12)], True),  # ... unless the share's upper bound reaches it
    ],
)
def test_worth_trying(uppers, accepted, expected) -> None:
    shares = [a if isinstance(a, tuple) else (a, a) for a in accepted]
    found = Bounds.of([Bound(t, 0.0, 0.0, u, a, au) for t, u, (a, au) in zip([0.5, 0.9], uppers, shares)])
    assert worth_trying(found, 0.95, min_accept=0.1) is expected


@pytest.mark.parametrize(
    "point, traffic, expected",
    [
        (CurvePoint(0.5, 300, 60, 30, 10), Traffic(0.5, 0.1, 100, 50), False),  # 20% as calibrated
        (CurvePoint(0.5, 300, 60, 30, 10), Traffic(0.5, 0.25, 100, 50), True),  # 50% of accepted disagree
        (CurvePoint(0.5, 300, 60, 30, 10), Traffic(0.5, 0.25, 100, 10), False),  # too few samples to say
        (CurvePoint(0.5, 300, 60, 30, 10), Traffic(0.5, 0.0, 100, 50), False),  # better than calibrated
        (CurvePoint(0.5, 300, 0, 0, 0), Traffic(0.5, 0.05, 100, 50), True),  # none expected, 10% seen
    ],
)
def test_contradicts(point: CurvePoint, traffic: Traffic, expected: bool) -> None:
    assert contradicts(point, traffic) is expected


@pytest.mark.parametrize(
    "score, agrees, cheap, last, expected",
    [
        (0.9, True, True, True, (True, False, False, True)),
        (0.9, False, False, True, (False, True, False, True)),
        (0.9, False, True, False, (False, False, True, False)),
        (0.9, False, False, False, (False, False, False, False)),  # both wrong: no quality lost
        (0.9, False, False, None, (False, True, False, None)),  # no last-tier label: a loss
        (0.9, False, True, None, (False, False, False, None)),  # right, whatever the last tier said
    ],
)
def test_labelled(score, agrees, cheap, last, expected) -> None:
    e = labelled(score, agrees, cheap, last)
    assert (e.agrees, e.lost, e.gained, e.last_right) == expected


def test_calibration_counts_and_round_trip() -> None:
    examples = [
        labelled(0.2, False, False, True),
        labelled(0.6, True, True, True),
        labelled(0.6, False, True, False),
        labelled(0.9, False, False, True),
    ]
    cal = calibrate(examples, candidates=(0.0, 0.5, 0.6, 1.0))
    assert cal.last_right == 3 and cal.examples == 4
    assert [(p.accepted, p.disagree, p.lost, p.gained) for p in cal.points] == [
        (4, 3, 2, 1),
        (3, 2, 1, 1),
        (3, 2, 1, 1),
        (0, 0, 0, 0),
    ]
    assert cal.at(0.55).threshold == 0.5 and cal.at(0.6).threshold == 0.6
    assert Calibration.from_json(cal.to_json()) == cal


STATED = LastTierQuality(0.5, 0.0, "default")


@pytest.mark.parametrize(
    "teams, expected",
    [
        ([TeamVerdicts("h", 0, 45, 45)], 0.0),  # the only team: its verdicts are all the evidence
        ([TeamVerdicts("h", 0, 45, 45), TeamVerdicts("o", 0, 0, 45)], 0.25),  # half the traffic: half the way
        ([TeamVerdicts("h", 0, 45, 10), TeamVerdicts("o", 0, 0, 90)], 0.5 * 90 / 135),  # answered < verdicts: verdicts
        ([TeamVerdicts("h", 0, 45, 5), TeamVerdicts("o", 30, 40, 95)], 95 * 0.75 / 140),
        ([TeamVerdicts("h", 0, 45, 10), TeamVerdicts("o", 0, 0, 990)], 0.5 * 990 / 1035),
        ([TeamVerdicts("a", 30, 40, 40), TeamVerdicts("b", 10, 20, 20)], (40 * 0.75 + 20 * 0.5) / 60),
    ],
)
def test_a_teams_verdicts_move_the_last_tiers_quality_by_its_share_of_the_traffic(
    teams: list[TeamVerdicts], expected: float
) -> None:
    got = last_tier_quality(None, None, teams)
    assert got.source == "feedback" and got.value == pytest.approx(expected)


def test_without_verdicts_the_last_tiers_quality_is_the_stated_one() -> None:
    assert last_tier_quality(0.8, None, [TeamVerdicts("o", 0, 0, 100)]) == LastTierQuality(0.8, 0.0, "config")
    assert feedback_quality([TeamVerdicts("h", 0, 10, 10), TeamVerdicts("o", 0, 0, 90)], STATED).value == 0.45
