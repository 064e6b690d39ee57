"""The moving throughput estimate the local price follows (engine/throughput.py): tables."""

from __future__ import annotations

import pytest

from engine.throughput import RateEstimate, Smoothing, observe_rate

S = Smoothing(min_tokens=100, weight=0.5, max_step=1.25)
PRIOR = RateEstimate(50.0)
AT_10 = RateEstimate(10.0, measured=True)


@pytest.mark.parametrize(
    ("before", "tokens", "seconds", "after"),
    [
        # idle windows are no evidence
        (PRIOR, 0, 2.0, PRIOR),
        (AT_10, 0, 2.0, AT_10),
        (AT_10, 5, 0.0, AT_10),
        # under the floor: pooled, the estimate stays
        (PRIOR, 2, 2.0, RateEstimate(50.0, False, 2, 2.0)),
        (RateEstimate(50.0, False, 60, 6.0), 20, 2.0, RateEstimate(50.0, False, 80, 8.0)),
        # the first pooled rate replaces the prior outright: (60 + 40) / (6 + 4) = 10
        (RateEstimate(50.0, False, 60, 6.0), 40, 4.0, RateEstimate(10.0, True)),
        # a short tail window (2 tokens in 2 s = 1 tok/s) is pooled with what follows, not priced alone
        (RateEstimate(10.0, True, 2, 2.0), 98, 8.0, RateEstimate(10.0, True)),  # 100 tokens / 10 s = 10
        # then the average moves half way ...
        (AT_10, 110, 10.0, RateEstimate(10.5, True)),  # pooled 11: 10 -> 10.5
        (AT_10, 180, 20.0, RateEstimate(9.5, True)),  # pooled 9: 10 -> 9.5
        # ... but never more than x1.25 or /1.25 a step
        (AT_10, 200, 2.0, RateEstimate(12.5, True)),  # pooled 100: capped at 12.5
        (AT_10, 100, 100.0, RateEstimate(8.0, True)),  # pooled 1: floored at 8
    ],
)
def test_observe_rate(before: RateEstimate, tokens: float, seconds: float, after: RateEstimate) -> None:
    got = observe_rate(before, tokens, seconds, S)
    assert got.measured == after.measured and got.rate == pytest.approx(after.rate, rel=1e-4)
    assert (got.pending_tokens, got.pending_seconds) == pytest.approx((after.pending_tokens, after.pending_seconds))


def test_a_noisy_stream_of_windows_moves_the_estimate_little() -> None:
    """Windows alternating between a full one (11 tok/s) and a tail (1 tok/s) — the case that
    priced two similar requests 15x apart — keep the estimate within 25 % once measured."""
    estimate, seen = RateEstimate(50.0), []
    for i in range(200):
        estimate = observe_rate(estimate, 22 if i % 2 == 0 else 2, 2.0, Smoothing())
        if estimate.measured:
            seen.append(estimate.rate)
    assert len(seen) > 100 and max(seen) / min(seen) < 1.25
    assert min(seen) == pytest.approx(6.0, rel=0.1)  # the pooled rate: 24 tokens per 4 s


@pytest.mark.parametrize("bad", [dict(min_tokens=0), dict(weight=0), dict(weight=1.5), dict(max_step=0.9)])
def test_smoothing_refuses_settings_that_would_never_move_or_overshoot(bad: dict) -> None:
    with pytest.raises(ValueError):
        Smoothing(**bad)
