"""Circuit breakers per deployment: stop calling an upstream that keeps failing — without
letting one team's failing requests cut the deployment off for the others.

States (the same for each breaker):

    CLOSED     calls pass; outcomes land in a sliding window of `window_s` seconds. When the
               window holds at least `min_requests` outcomes and more than `max_error_rate`
               of them failed, the breaker OPENs.
    OPEN       calls are refused (the caller falls back to the next tier or fallback model)
               until `open_s` has passed; then the next call is let through as a probe.
    HALF_OPEN  one probe at a time. Its success closes the breaker with an empty window; its
               failure opens it again for another `open_s`. A probe that ends without saying
               anything of the deployment (the upstream refused the client's bad request, or the
               request was cancelled) is `release`d: the next call probes. One that never
               reports at all stops blocking after `probe_timeout_s`.

Tenants: a provider can fail one team's requests only (their content makes it answer 500, or
their volume 429), so every deployment has two kinds of breaker (`Breakers`):

- one per team, over that team's own outcomes: a team whose calls keep failing is cut off (its
  calls fall back) by its own failures only;
- one for the whole deployment, which opens only when the rule still trips with the
  `min_failing_teams - 1` teams that failed most left out (and a half-open probe must fail for
  that many distinct teams before it opens again): fewer teams than that cannot cut the others
  off, however many requests they make fail.

An outcome is one call as the caller saw it, after the provider's own capped retries. Only
upstream failures count as errors: a request the upstream rejected as invalid is the client's
fault, not the deployment's. The clock is injected, so the transitions are tested as tables.
"""

from __future__ import annotations

import enum
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field


class BreakerConfig(BaseModel):
    """The `breaker:` section of the config: one breaker per deployment, these rules for all."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    window_s: float = 60.0
    min_requests: int = Field(default=20, ge=1)
    max_error_rate: float = Field(default=0.05, ge=0.0, le=1.0)
    open_s: float = 30.0  # how long an open breaker refuses calls before a half-open probe
    probe_timeout_s: float = 30.0  # a probe that has not reported by then lets another through
    # How many teams' failures it takes to cut a deployment off for every team; fewer failing
    # teams only cut themselves off. 1 is a plain per-deployment breaker.
    min_failing_teams: int = Field(default=2, ge=1)


class State(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


def should_open(outcomes: int, errors: int, min_requests: int, max_error_rate: float) -> bool:
    """The tripping rule: enough evidence, and an error rate strictly above the limit."""
    return outcomes >= min_requests and errors > max_error_rate * outcomes


@dataclass(slots=True)
class Tally:
    """One team's outcomes in a breaker's window."""

    outcomes: int = 0
    errors: int = 0


def should_open_across(tallies: Iterable[Tally], spared: int, min_requests: int, max_error_rate: float) -> bool:
    """The tripping rule over several teams: it must still trip with the `spared` teams that
    failed most left out, so that many teams' failures alone never trip it."""
    kept = sorted(tallies, key=lambda t: t.errors, reverse=True)[spared:]
    return should_open(sum(t.outcomes for t in kept), sum(t.errors for t in kept), min_requests, max_error_rate)


@dataclass(frozen=True, slots=True)
class BreakerView:
    state: State
    outcomes: int
    errors: int
    retry_after_s: float | None  # while open: seconds until a probe is let through
    teams_open: int = 0  # teams cut off from this deployment by their own failures


class Breaker:
    """One breaker. `spared`: how many of the teams that failed most its rule leaves out (0 for a
    team's own breaker, which only ever sees that team)."""

    def __init__(self, config: BreakerConfig, clock: Callable[[], float] = time.monotonic, spared: int = 0) -> None:
        self.config = config
        self.clock = clock
        self.spared = spared
        self.state = State.CLOSED
        self._window: deque[tuple[float, str, bool]] = deque()  # (time, team, failed)
        self._tallies: dict[str, Tally] = {}
        # Failures in the window, all teams': while there are none the rule cannot trip, and
        # `record` (every upstream call) skips sorting every active team's tally.
        self._errors = 0
        self._opened_at = 0.0
        self._probe_started: float | None = None
        self._failed_probes: set[str] = set()  # teams whose probe failed in this half-open spell

    def admits(self) -> bool:
        """Would a call be let through now? (Claims nothing; `allow` does.)"""
        if not self.config.enabled:
            return True
        now = self.clock()
        if self.state is State.OPEN:
            if now - self._opened_at < self.config.open_s:
                return False
            self.state = State.HALF_OPEN
            self._probe_started = None
        if self.state is State.HALF_OPEN:
            stale = self._probe_started is not None and now - self._probe_started >= self.config.probe_timeout_s
            return self._probe_started is None or stale
        return True

    def allow(self) -> bool:
        """May a call go to this deployment now? (A True in HALF_OPEN makes the call a probe.)"""
        if not self.admits():
            return False
        if self.config.enabled and self.state is State.HALF_OPEN:
            self._probe_started = self.clock()
        return True

    def release(self) -> None:
        """A call `allow`ed ended with no outcome to record: a probe it was frees the slot at
        once, so a team whose requests the upstream rejects cannot hold the probe (and the
        deployment shut) for `probe_timeout_s` each. (A call whose probe had gone stale may free
        a newer probe's slot: at most two probes then run at once.)"""
        if self.state is State.HALF_OPEN:
            self._probe_started = None

    def record(self, ok: bool, team: str) -> None:
        now = self.clock()
        if self.state is State.HALF_OPEN:
            self._probed(ok, team, now)
            return
        if self.state is State.OPEN:
            return  # a call that started before the breaker opened: its outcome is old news
        self._window.append((now, team, not ok))
        tally = self._tallies.setdefault(team, Tally())
        tally.outcomes += 1
        tally.errors += not ok
        self._errors += not ok
        self._expire(now)
        config = self.config
        if self._errors and should_open_across(
            self._tallies.values(), self.spared, config.min_requests, config.max_error_rate
        ):
            self._open(now)

    def view(self) -> BreakerView:
        now = self.clock()
        self._expire(now)
        retry = max(0.0, self.config.open_s - (now - self._opened_at)) if self.state is State.OPEN else None
        outcomes, errors = (
            sum(t.outcomes for t in self._tallies.values()),
            sum(t.errors for t in self._tallies.values()),
        )
        return BreakerView(self.state, outcomes, errors, retry)

    def _probed(self, ok: bool, team: str, now: float) -> None:
        if ok:
            self._close()
            return
        self._failed_probes.add(team)
        if len(self._failed_probes) > self.spared:
            self._open(now)
        else:  # not yet enough teams: let another team's call probe
            self._probe_started = None

    def _expire(self, now: float) -> None:
        while self._window and now - self._window[0][0] > self.config.window_s:
            _, team, failed = self._window.popleft()
            tally = self._tallies[team]
            tally.outcomes -= 1
            tally.errors -= failed
            self._errors -= failed
            if tally.outcomes == 0:
                del self._tallies[team]

    def _open(self, now: float) -> None:
        self.state = State.OPEN
        self._opened_at = now
        self._probe_started = None
        self._failed_probes.clear()

    def _close(self) -> None:
        self.state = State.CLOSED
        self._window.clear()
        self._tallies.clear()
        self._errors = 0
        self._probe_started = None
        self._failed_probes.clear()


class Breakers:
    """Each deployment's breakers, made on first use: the whole deployment's, and each team's own.
    A call passes when both let it through; its outcome lands in both."""

    def __init__(self, config: BreakerConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self._by_name: dict[str, Breaker] = {}
        self._by_team: dict[tuple[str, str], Breaker] = {}

    def __getitem__(self, name: str) -> Breaker:
        """The whole deployment's breaker."""
        breaker = self._by_name.get(name)
        if breaker is None:
            spared = self.config.min_failing_teams - 1
            breaker = self._by_name[name] = Breaker(self.config, self.clock, spared)
        return breaker

    def own(self, name: str, team: str) -> Breaker:
        """`team`'s own breaker on deployment `name`."""
        breaker = self._by_team.get((name, team))
        if breaker is None:
            breaker = self._by_team[(name, team)] = Breaker(self.config, self.clock)
        return breaker

    def admits(self, name: str, team: str) -> bool:
        """Would a call of `team`'s go through now? (For choosing among models; claims no probe.)"""
        return self.own(name, team).admits() and self[name].admits()

    def allow(self, name: str, team: str) -> bool:
        # Both are asked before either claims a probe, so a refusal by one leaves the other's
        # half-open probe free for the next call.
        if not self.admits(name, team):
            return False
        return self.own(name, team).allow() and self[name].allow()

    def record(self, name: str, ok: bool, team: str) -> None:
        self.own(name, team).record(ok, team)
        self[name].record(ok, team)

    def release(self, name: str, team: str) -> None:
        """A call `allow`ed for `team` ended with no outcome for the deployment: see `Breaker.release`."""
        self.own(name, team).release()
        self[name].release()

    def blocking(self, name: str, team: str) -> Breaker:
        """The breaker that refuses `team`'s calls to `name` (its own first): the one whose
        retry time an error reports."""
        own = self.own(name, team)
        return own if own.state is not State.CLOSED else self[name]

    def views(self) -> dict[str, BreakerView]:
        views = {}
        for name, breaker in sorted(self._by_name.items()):
            cut = sum(b.view().state is State.OPEN for (n, _), b in self._by_team.items() if n == name)
            whole = breaker.view()
            views[name] = BreakerView(whole.state, whole.outcomes, whole.errors, whole.retry_after_s, cut)
        return views
