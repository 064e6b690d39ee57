"""The circuit breaker's transitions, driven by a fake clock."""

from __future__ import annotations

import pytest

from gateway.settings import BreakerConfig
from policies.breaker import Breaker, State, should_open


@pytest.mark.parametrize(
    "outcomes, errors, min_requests, rate, expected",
    [
        (19, 19, 20, 0.05, False),  # not enough evidence yet
        (20, 1, 20, 0.05, False),  # exactly 5%: not above
        (20, 2, 20, 0.05, True),  # 10%
        (100, 5, 20, 0.05, False),
        (100, 6, 20, 0.05, True),
        (1, 1, 1, 0.0, True),
        (10, 0, 1, 0.0, False),
    ],
)
def test_should_open(outcomes: int, errors: int, min_requests: int, rate: float, expected: bool) -> None:
    assert should_open(outcomes, errors, min_requests, rate) is expected


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


CONFIG = BreakerConfig(window_s=10, min_requests=4, max_error_rate=0.05, open_s=5, probe_timeout_s=3)

# Each step: (advance clock by, action, expected allow() or state after)
SCRIPT = [
    (0, "ok", State.CLOSED),
    (0, "ok", State.CLOSED),
    (0, "ok", State.CLOSED),
    (0, "fail", State.OPEN),  # 1 of 4 = 25% > 5% with 4 outcomes
    (1, "allow", False),  # open: refused
    (3.5, "allow", False),
    (0.5, "allow", True),  # open_s passed: one probe goes through
    (0, "state", State.HALF_OPEN),
    (0, "allow", False),  # a second concurrent probe is refused
    (0, "fail", State.OPEN),  # the probe failed: open again
    (5, "allow", True),
    (0, "ok", State.CLOSED),  # the probe succeeded: closed, window emptied
    (0, "fail", State.CLOSED),  # 1 outcome < min_requests
    (11, "ok", State.CLOSED),  # the old failure left the window
    (0, "ok", State.CLOSED),
    (0, "ok", State.CLOSED),
    (0, "ok", State.CLOSED),
]


def test_breaker_script() -> None:
    clock = Clock()
    breaker = Breaker(CONFIG, clock)
    for step, (advance, action, expected) in enumerate(SCRIPT):
        clock.now += advance
        if action == "allow":
            assert breaker.allow() is expected, step
        elif action == "state":
            assert breaker.state is expected, step
        else:
            breaker.record(ok=action == "ok")
            assert breaker.state is expected, step


def test_stale_probe_lets_another_through() -> None:
    clock = Clock()
    breaker = Breaker(BreakerConfig(min_requests=1, open_s=1, probe_timeout_s=3), clock)
    breaker.record(ok=False)
    clock.now = 2
    assert breaker.allow() is True  # the probe, which never reports (its request was cancelled)
    clock.now = 4
    assert breaker.allow() is False
    clock.now = 5.5
    assert breaker.allow() is True


def test_disabled_breaker_always_allows() -> None:
    breaker = Breaker(BreakerConfig(enabled=False, min_requests=1))
    breaker.record(ok=False)
    assert breaker.allow() is True
