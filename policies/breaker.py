"""Circuit breaker per deployment: stop calling an upstream that keeps failing.

States (one `Breaker` per deployment):

    CLOSED     calls pass; outcomes land in a sliding window of `window_s` seconds. When the
               window holds at least `min_requests` outcomes and more than `max_error_rate`
               of them failed, the breaker OPENs.
    OPEN       calls are refused (the caller falls back to the next tier or fallback model)
               until `open_s` has passed; then the next call is let through as a probe.
    HALF_OPEN  one probe at a time. Its success closes the breaker with an empty window; its
               failure opens it again for another `open_s`. A probe that never reports (its
               request was cancelled) stops blocking after `probe_timeout_s`.

An outcome is one call as the caller saw it, after the provider's own capped retries. Only
upstream failures count as errors: a request the upstream rejected as invalid is the client's
fault, not the deployment's. The clock is injected, so the transitions are tested as tables.
"""

from __future__ import annotations

import enum
import time
from collections import deque
from collections.abc import Callable
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


class State(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


def should_open(outcomes: int, errors: int, min_requests: int, max_error_rate: float) -> bool:
    """The tripping rule: enough evidence, and an error rate strictly above the limit."""
    return outcomes >= min_requests and errors > max_error_rate * outcomes


@dataclass(frozen=True, slots=True)
class BreakerView:
    state: State
    outcomes: int
    errors: int
    retry_after_s: float | None  # while open: seconds until a probe is let through


class Breaker:
    def __init__(self, config: BreakerConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self.state = State.CLOSED
        self._window: deque[tuple[float, bool]] = deque()  # (time, failed)
        self._errors = 0
        self._opened_at = 0.0
        self._probe_started: float | None = None

    def allow(self) -> bool:
        """May a call go to this deployment now? (A True in HALF_OPEN makes the call a probe.)"""
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
            if self._probe_started is not None and not stale:
                return False
            self._probe_started = now
        return True

    def record(self, ok: bool) -> None:
        now = self.clock()
        if self.state is State.HALF_OPEN:
            if ok:
                self._close()
            else:
                self._open(now)
            return
        if self.state is State.OPEN:
            return  # a call that started before the breaker opened: its outcome is old news
        self._window.append((now, not ok))
        self._errors += not ok
        self._expire(now)
        if should_open(len(self._window), self._errors, self.config.min_requests, self.config.max_error_rate):
            self._open(now)

    def view(self) -> BreakerView:
        now = self.clock()
        self._expire(now)
        retry = max(0.0, self.config.open_s - (now - self._opened_at)) if self.state is State.OPEN else None
        return BreakerView(self.state, len(self._window), self._errors, retry)

    def _expire(self, now: float) -> None:
        while self._window and now - self._window[0][0] > self.config.window_s:
            _, failed = self._window.popleft()
            self._errors -= failed

    def _open(self, now: float) -> None:
        self.state = State.OPEN
        self._opened_at = now
        self._probe_started = None

    def _close(self) -> None:
        self.state = State.CLOSED
        self._window.clear()
        self._errors = 0
        self._probe_started = None


class Breakers:
    """One breaker per deployment name, made on first use."""

    def __init__(self, config: BreakerConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self._by_name: dict[str, Breaker] = {}

    def __getitem__(self, name: str) -> Breaker:
        breaker = self._by_name.get(name)
        if breaker is None:
            breaker = self._by_name[name] = Breaker(self.config, self.clock)
        return breaker

    def allow(self, name: str) -> bool:
        return self[name].allow()

    def record(self, name: str, ok: bool) -> None:
        self[name].record(ok)

    def views(self) -> dict[str, BreakerView]:
        return {name: b.view() for name, b in sorted(self._by_name.items())}
