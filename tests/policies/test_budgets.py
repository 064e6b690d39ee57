"""Budget, rate-limit, plan and alert arithmetic: pure functions, parametrized tables."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from policies.alerts import over_rate, reached
from policies.budgets import (
    Budget,
    Period,
    Scope,
    Subjects,
    applicable,
    distinct_by_counter,
    fits,
    index,
    remaining,
    window,
)
from policies.plans import DEFAULT_PLANS, Plan, plans_with
from policies.pricing import Price
from policies.rate_limits import Limit, RateCheck, allows, estimate, estimate_tokens, retry_after

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    "period, at, key, start, end",
    [
        (Period.DAILY, "2026-11-29 15:00:00", "2026-11-29", "2026-11-29 00:00:00", "2026-11-30 00:00:00"),
        (Period.DAILY, "2026-12-31 23:59:59.999", "2026-12-31", "2026-12-31 00:00:00", "2027-01-01 00:00:00"),
        (Period.DAILY, "2027-01-01 00:00:00", "2027-01-01", "2027-01-01 00:00:00", "2027-01-02 00:00:00"),
        (Period.WEEKLY, "2026-11-29 23:00:00", "2026-W48", "2026-11-23 00:00:00", "2026-11-30 00:00:00"),  # a Sunday
        (Period.WEEKLY, "2026-11-30 00:00:00", "2026-W49", "2026-11-30 00:00:00", "2026-12-07 00:00:00"),  # Monday
        (Period.WEEKLY, "2027-01-01 12:00:00", "2026-W53", "2026-12-28 00:00:00", "2027-01-04 00:00:00"),  # ISO year
        (Period.MONTHLY, "2026-02-28 23:59:59", "2026-02", "2026-02-01 00:00:00", "2026-03-01 00:00:00"),
        (Period.MONTHLY, "2026-12-15 00:00:00", "2026-12", "2026-12-01 00:00:00", "2027-01-01 00:00:00"),
        (Period.MONTHLY, "2028-02-29 10:00:00", "2028-02", "2028-02-01 00:00:00", "2028-03-01 00:00:00"),
    ],
)
def test_period_windows_are_utc(period, at, key, start, end):
    w = window(period, ts(at))
    assert (w.key, w.start, w.end) == (key, ts(start), ts(end))


def test_total_never_rolls_over():
    assert window(Period.TOTAL, 0) == window(Period.TOTAL, ts("2099-01-01 00:00:00"))
    assert window(Period.TOTAL, 0).start is None and window(Period.TOTAL, 0).end is None


@pytest.mark.parametrize(
    "before, after, same",
    [
        ("2026-11-29 23:59:59", "2026-11-30 00:00:00", False),
        ("2026-11-29 00:00:00", "2026-11-29 23:59:59", True),
    ],
)
def test_a_daily_counter_changes_exactly_at_midnight(before, after, same):
    b = Budget(Scope.TEAM, "t1", Period.DAILY, 100)
    assert (b.counter(ts(before)) == b.counter(ts(after))) is same


TEAM = Budget(Scope.TEAM, "t1", Period.MONTHLY, 10)
TEAM_DAILY = Budget(Scope.TEAM, "t1", Period.DAILY, 5)
KEY = Budget(Scope.KEY, "k1", Period.TOTAL, 3)
USER = Budget(Scope.USER, "alice", Period.WEEKLY, 2)
TAG = Budget(Scope.TAG, "proj=x", Period.DAILY, 1)
OTHER = Budget(Scope.TEAM, "t2", Period.MONTHLY, 99)
ALL = index([TEAM, TEAM_DAILY, KEY, USER, TAG, OTHER])


@pytest.mark.parametrize(
    "who, expected",
    [
        (Subjects("t1", "k1", None), [TEAM, TEAM_DAILY, KEY]),
        (Subjects("t1", "k2", "alice"), [TEAM, TEAM_DAILY, USER]),
        (Subjects("t2", "k9", "bob", ("proj=x", "other")), [OTHER, TAG]),
        (Subjects("t3", "k3", None, ("nope",)), []),
    ],
)
def test_which_budgets_apply(who, expected):
    assert applicable(ALL, who) == expected


@pytest.mark.parametrize(
    "spent, reserved, amount, want, ok",
    [
        (0, 0, 100, 100, True),  # exactly at the limit fits
        (0, 0, 100, 101, False),
        (60, 40, 100, 0, True),
        (60, 40, 100, 1, False),
        (0, 0, 0, 0, True),
    ],
)
def test_fits(spent, reserved, amount, want, ok):
    assert fits(spent, reserved, amount, want) is ok


def test_remaining_never_negative():
    assert remaining(90, 20, 100) == 0 and remaining(10, 20, 100) == 70


def test_a_plan_cap_and_a_stored_budget_on_one_counter_keep_the_smaller_limit():
    stored = Budget(Scope.KEY, "k1", Period.TOTAL, 5_000, id="bud_1")
    cap = Budget(Scope.KEY, "k1", Period.TOTAL, 1_000, ())
    assert distinct_by_counter([stored, cap, TEAM], 0) == [cap, TEAM]


@pytest.mark.parametrize(
    "spent, amount, thresholds, expected",
    [
        (499, 1000, (0.5, 0.8, 1.0), []),
        (500, 1000, (0.5, 0.8, 1.0), [0.5]),
        (800, 1000, (1.0, 0.8, 0.5), [0.5, 0.8]),
        (1200, 1000, (0.5, 0.8, 1.0), [0.5, 0.8, 1.0]),
        (10**12 * 3 // 10, 10**12, (0.3,), [0.3]),  # 0.3 is not exact in binary: compared exactly anyway
        (10**12 * 3 // 10 - 1, 10**12, (0.3,), []),
    ],
)
def test_alert_thresholds_reached(spent, amount, thresholds, expected):
    assert reached(spent, amount, thresholds) == expected


@pytest.mark.parametrize("spent, limit, over", [(10, None, False), (9, 10, False), (10, 10, True)])
def test_spend_rate(spent, limit, over):
    assert over_rate(spent, limit) is over


@pytest.mark.parametrize(
    "current, previous, at, sliding, used",
    [
        (3, 10, 60 * 100 + 0, True, 13.0),  # the start of a minute: all of the previous counts
        (3, 10, 60 * 100 + 30, True, 8.0),  # half way: half of it
        (3, 10, 60 * 100 + 59.999, True, 3.0 + 10 * (1 - 59.999 / 60)),
        (3, 10, 60 * 100 + 30, False, 3.0),  # a fixed window (the daily quota)
    ],
)
def test_sliding_window_estimate(current, previous, at, sliding, used):
    assert estimate(current, previous, 60, at, sliding) == pytest.approx(used)


@pytest.mark.parametrize(
    "limit, at, seconds",
    [
        (Limit.REQUESTS_PER_MINUTE, 60 * 7 + 10, 50),
        (Limit.REQUESTS_PER_MINUTE, 60 * 7 + 59.5, 1),
        (Limit.TOKENS_PER_DAY, ts("2026-11-29 23:00:00"), 3600),
    ],
)
def test_retry_after(limit, at, seconds):
    assert retry_after(RateCheck(limit, "key:k", 10, 1), at) == seconds


def test_allows_counts_the_new_request():
    check = RateCheck(Limit.TOKENS_PER_MINUTE, "key:k", 100, 30)
    assert allows(check, 70, 0, 0) and not allows(check, 71, 0, 0)


def test_rate_window_counters_name_the_window():
    check = RateCheck(Limit.REQUESTS_PER_MINUTE, "team:t", 10, 1)
    assert check.counter(120.5) == "rl:rpm:team:t:2" and check.counter(120.5, previous=True) == "rl:rpm:team:t:1"


@pytest.mark.parametrize(
    "body, tokens",
    [
        ({"messages": [{"role": "user", "content": "x" * 400}]}, 104),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": "abcd" * 10}]}]}, 14),
        ({"prompt": "abcdefgh"}, 2),
        ({"input": ["abcd", "efgh"]}, 2),
        ({}, 1),
    ],
)
def test_token_estimate(body, tokens):
    assert estimate_tokens(body) == tokens


CHEAP = Price.per_million(Decimal("0.15"), Decimal("0.60"))
DEAR = Price.per_million(Decimal("2.5"), Decimal("10"))


@pytest.mark.parametrize(
    "plan, model, price, allowed",
    [
        ("free", "small", CHEAP, True),
        ("free", "large", DEAR, False),
        ("free", "auto", None, False),  # a cascade has no single price: free keys need an allowlist
        ("pro", "large", DEAR, True),
        ("enterprise", "auto", None, True),
    ],
)
def test_plan_model_rules(plan, model, price, allowed):
    assert DEFAULT_PLANS[plan].allows_model(model, price) is allowed


def test_free_keys_have_a_one_dollar_cap_and_quotas_by_default():
    free = DEFAULT_PLANS["free"]
    assert free.dollar_cap == Decimal("1") and free.tokens_per_day and free.requests_per_minute
    assert DEFAULT_PLANS["enterprise"] == Plan("enterprise")


def test_config_overrides_a_plan_field_by_field():
    plans = plans_with({"free": {"tarpit_s": 0.5, "models": ["auto"], "dollar_cap": None}})
    free = plans["free"]
    assert free.tarpit_s == 0.5 and free.dollar_cap is None
    assert free.requests_per_minute == DEFAULT_PLANS["free"].requests_per_minute
    assert free.allows_model("auto", None) and not free.allows_model("small", CHEAP)
