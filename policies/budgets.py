"""Budget arithmetic: periods, period keys, which budgets apply to a request, and whether a
reservation fits. Pure functions over integers (pico-dollars, 1e-12 $) and timestamps; the
stores (in-process, Redis) only keep the counters these functions name.

A budget's counter lives under one key per period (`team:team_1:monthly:2026-11`), so a new
period starts from zero by construction: nothing has to be reset at midnight, and two replicas
agree on the period as long as their clocks agree on UTC.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache

Clock = Callable[[], float]  # seconds since the epoch; time.time in production, a fake in tests

DEFAULT_ALERT_AT = (0.5, 0.8, 1.0)


class Period(enum.Enum):
    DAILY = "daily"
    WEEKLY = "weekly"  # ISO weeks: Monday 00:00 UTC to the next Monday
    MONTHLY = "monthly"
    TOTAL = "total"  # never resets


class Scope(enum.Enum):
    TEAM = "team"
    KEY = "key"
    USER = "user"  # OpenAI's `user` field
    TAG = "tag"


@dataclass(frozen=True, slots=True)
class Window:
    """One period of a budget: [start, end) in epoch seconds; `None` bounds for `total`."""

    key: str
    start: float | None
    end: float | None


def window(period: Period, now: float) -> Window:
    """The period containing `now`. Every period is a whole number of UTC days, so the answer
    depends only on the day: cached per day, as it is computed several times per request."""
    return _window_of_day(period, int(now // 86_400))


@lru_cache(maxsize=256)
def _window_of_day(period: Period, day_index: int) -> Window:
    day = datetime.fromtimestamp(day_index * 86_400, UTC)
    if period is Period.DAILY:
        return Window(day.strftime("%Y-%m-%d"), day.timestamp(), (day + timedelta(days=1)).timestamp())
    if period is Period.WEEKLY:
        start = day - timedelta(days=day.weekday())
        year, week, _ = start.isocalendar()
        return Window(f"{year}-W{week:02d}", start.timestamp(), (start + timedelta(days=7)).timestamp())
    if period is Period.MONTHLY:
        start = day.replace(day=1)
        end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
        return Window(start.strftime("%Y-%m"), start.timestamp(), end.timestamp())
    return Window("total", None, None)


@dataclass(frozen=True, slots=True)
class Budget:
    """A spending limit on everything one subject (a team id, key id, user or tag) spends in a period."""

    scope: Scope
    subject: str
    period: Period
    amount_pusd: int
    alert_at: tuple[float, ...] = DEFAULT_ALERT_AT
    id: str | None = None  # the stored definition's id; None for a plan's implicit cap

    def counter(self, now: float) -> str:
        """The key of this budget's counter for the period containing `now`."""
        return f"{self.scope.value}:{self.subject}:{self.period.value}:{window(self.period, now).key}"


@dataclass(frozen=True, slots=True)
class Subjects:
    """Who a request is charged to: every budget on any of these applies."""

    team_id: str | None
    key_id: str | None
    user: str | None
    tags: tuple[str, ...] = ()

    def pairs(self) -> Iterable[tuple[Scope, str]]:
        if self.team_id:
            yield Scope.TEAM, self.team_id
        if self.key_id:
            yield Scope.KEY, self.key_id
        if self.user:
            yield Scope.USER, self.user
        for tag in self.tags:
            yield Scope.TAG, tag


BudgetIndex = Mapping[tuple[Scope, str], tuple[Budget, ...]]


def index(budgets: Iterable[Budget]) -> dict[tuple[Scope, str], tuple[Budget, ...]]:
    by_subject: dict[tuple[Scope, str], list[Budget]] = {}
    for b in budgets:
        by_subject.setdefault((b.scope, b.subject), []).append(b)
    return {k: tuple(v) for k, v in by_subject.items()}


def applicable(budgets: BudgetIndex, who: Subjects) -> list[Budget]:
    """Every budget that must fit for a request from `who` (several may; all must fit)."""
    found: list[Budget] = []
    for pair in who.pairs():
        found.extend(budgets.get(pair, ()))
    return found


def fits(spent: int, reserved: int, amount: int, want: int) -> bool:
    """Whether `want` more fits under `amount` given what is spent and held. Exactly at the
    limit fits: a budget of $1 can be spent to the last pico-dollar."""
    return spent + reserved + want <= amount


def remaining(spent: int, reserved: int, amount: int) -> int:
    return max(0, amount - spent - reserved)


@dataclass(frozen=True, slots=True)
class Hold:
    """What one admitted request holds: its worst case against each budget, from `now`."""

    id: str
    now: float  # the instant the request's counters (periods, rate windows) were chosen by
    budgets: tuple[Budget, ...]
    want_pusd: int
    held: bool = True  # False: admitted uncounted because the store was down (failing open)


def distinct_by_counter(budgets: Iterable[Budget], now: float) -> list[Budget]:
    """One budget per counter: a plan's implicit cap and a stored budget on the same key and
    period share a counter (the same spend), and only the smaller limit matters."""
    best: dict[str, Budget] = {}
    for b in budgets:
        c = b.counter(now)
        if c not in best or b.amount_pusd < best[c].amount_pusd:
            best[c] = b
    return list(best.values())
