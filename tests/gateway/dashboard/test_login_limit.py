"""The dashboard sign-in's attempt limit, as a table over a fake clock."""

from __future__ import annotations

import pytest

from gateway.dashboard.login_limit import LoginLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# (address, event, seconds later): event is "fail", "ok", or the expected retry_after (None: may try)
STEPS_PER_ADDRESS = [
    ("a", "fail", 0),
    ("a", "fail", 10),
    ("a", None, 0),
    ("a", "fail", 10),
    ("a", 80, 0),
    ("b", None, 0),
    ("a", 30, 50),
    ("a", None, 30),
    ("a", "fail", 0),
    ("a", "ok", 0),
    ("a", None, 0),
]
STEPS_OVERALL = [
    ("a", "fail", 0),
    ("b", "fail", 0),
    ("c", "fail", 0),
    ("d", "fail", 0),
    ("e", "fail", 0),
    ("z", 100, 0),
    ("z", 1, 99),
    ("z", None, 1),
]


@pytest.mark.parametrize("steps", [STEPS_PER_ADDRESS, STEPS_OVERALL])
def test_failures_are_limited_per_address_and_overall(steps: list) -> None:
    clock = Clock()
    limiter = LoginLimiter(per_address=3, overall=5, window_s=100, clock=clock)
    for address, event, later in steps:
        clock.now += later
        if event == "fail":
            limiter.failed(address)
        elif event == "ok":
            limiter.succeeded(address)
        else:
            assert limiter.retry_after(address) == event, (address, clock.now)


def test_addresses_are_forgotten_after_the_window() -> None:
    clock = Clock()
    limiter = LoginLimiter(per_address=3, overall=1000, window_s=100, clock=clock)
    for i in range(500):
        limiter.failed(f"10.0.{i // 256}.{i % 256}")
    clock.now += 101
    assert limiter.retry_after("x") is None
    assert not limiter._by_address and not limiter._all
