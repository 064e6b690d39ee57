"""The circuit breaker's transitions, driven by a fake clock."""

from __future__ import annotations

import pytest

from gateway.config.settings import BreakerConfig
from policies.breaker import Breaker, Breakers, State, Tally, should_open, should_open_across


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
            breaker.record(action == "ok", "team")
            assert breaker.state is expected, step


def test_stale_probe_lets_another_through() -> None:
    clock = Clock()
    breaker = Breaker(BreakerConfig(min_requests=1, open_s=1, probe_timeout_s=3), clock)
    breaker.record(False, "team")
    clock.now = 2
    assert breaker.allow() is True  # the probe, which never reports (its request was cancelled)
    clock.now = 4
    assert breaker.allow() is False
    clock.now = 5.5
    assert breaker.allow() is True


def test_disabled_breaker_always_allows() -> None:
    breaker = Breaker(BreakerConfig(enabled=False, min_requests=1))
    breaker.record(False, "team")
    assert breaker.allow() is True


@pytest.mark.parametrize(
    "tallies, spared, expected",
    [
        ([(40, 40), (10, 0)], 1, False),  # one team's failures: left out, the other team is fine
        ([(40, 40), (10, 0)], 0, True),  # a plain breaker would open
        ([(32, 0), (2, 2)], 1, False),  # the litellm case: 2 failures in 34 calls
        ([(20, 20), (20, 20)], 1, True),  # two teams failing: the provider's fault
        ([(30, 30), (5, 5)], 1, False),  # the second team alone is too little evidence
        ([(20, 20), (20, 20), (20, 0)], 2, False),  # spared 2: it takes three teams
        ([(10, 1), (10, 1), (10, 1)], 1, True),  # failures everywhere, each small: 10% of 20
        ([], 1, False),
    ],
)
def test_should_open_across_teams(tallies: list[tuple[int, int]], spared: int, expected: bool) -> None:
    assert should_open_across([Tally(o, e) for o, e in tallies], spared, 20, 0.05) is expected


TEAMS = BreakerConfig(window_s=60, min_requests=4, max_error_rate=0.05, open_s=5, probe_timeout_s=3)


def test_one_teams_failures_cut_off_that_team_only() -> None:
    breakers = Breakers(TEAMS, Clock())
    for _ in range(40):
        if breakers.allow("m", "hostile"):
            breakers.record("m", False, "hostile")
    assert not breakers.allow("m", "hostile")  # its own breaker
    assert [breakers.allow("m", "other") for _ in range(10)] == [True] * 10
    view = breakers.views()["m"]
    assert (view.state, view.teams_open) == (State.CLOSED, 1)


def test_an_outage_every_team_sees_opens_the_deployment_for_all() -> None:
    breakers = Breakers(TEAMS, Clock())
    for team in ("a", "b", "a", "b", "a", "b", "a", "b"):
        breakers.record("m", False, team)
    assert breakers.views()["m"].state is State.OPEN
    assert not breakers.allow("m", "c")  # a team that never failed is refused too
    assert not breakers.admits("m", "c")


def test_a_half_open_probe_must_fail_for_two_teams_to_open_again() -> None:
    clock = Clock()
    breakers = Breakers(TEAMS, clock)
    for team in ("a", "b") * 4:
        breakers.record("m", False, team)
    clock.now = 6  # open_s passed: probes
    assert breakers.allow("m", "c")
    breakers.record("m", False, "c")  # one team's probe failed: another team's call may probe
    assert breakers.views()["m"].state is State.HALF_OPEN
    assert breakers.allow("m", "d")
    breakers.record("m", False, "d")  # a second team's failed too: the provider is down
    assert breakers.views()["m"].state is State.OPEN


def test_a_refusal_by_one_breaker_leaves_the_others_probe_free() -> None:
    clock = Clock()
    breakers = Breakers(TEAMS, clock)
    for _ in range(4):
        breakers.record("m", False, "a")  # team a's own breaker opens at 0
    clock.now = 3
    for team in ("b", "c") * 2:
        breakers.record("m", False, team)  # the whole deployment's at 3
    clock.now = 6  # a's own is half-open, the deployment's still open: refused, no probe claimed
    assert not breakers.allow("m", "a")
    clock.now = 8  # the deployment's half-open too (and a claimed probe would not be stale yet)
    assert breakers.allow("m", "a")
    breakers.record("m", True, "a")
    assert breakers.views()["m"].state is State.CLOSED
    assert breakers.own("m", "a").state is State.CLOSED


def test_a_released_probe_lets_the_next_call_probe_at_once() -> None:
    clock = Clock()
    breakers = Breakers(TEAMS, clock)
    for team in ("a", "b") * 4:
        breakers.record("m", False, team)
    clock.now = 6  # half-open
    assert breakers.allow("m", "hostile")  # the probe: the upstream will refuse its bad request
    assert not breakers.allow("m", "c")  # while it runs, one probe at a time
    breakers.release("m", "hostile")  # it ended saying nothing of the deployment
    assert breakers.views()["m"].state is State.HALF_OPEN
    assert breakers.allow("m", "c")  # not probe_timeout_s later: now
    breakers.record("m", True, "c")
    assert breakers.views()["m"].state is State.CLOSED


def test_a_release_outside_a_half_open_spell_changes_nothing() -> None:
    clock = Clock()
    breaker = Breaker(TEAMS, clock)
    breaker.release()
    assert breaker.state is State.CLOSED and breaker.allow()
    for _ in range(4):
        breaker.record(False, "a")
    breaker.release()
    assert breaker.state is State.OPEN and not breaker.allow()
