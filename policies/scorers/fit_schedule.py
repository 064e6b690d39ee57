"""When a cascade's learning fits a scorer, and which fit: the one schedule the gateway's learning
(gateway/routing/learning.py) and the what-if replay (policies/whatif.py) both keep.

A fit is due every `every` samples (the cascade's `refit_every`). A cascade that starts on `rules`
or `logprob` also fits early: from `FIRST_FIT` samples on, each time half as many again have come
(20, 30, 45, ...), while that stays below `every`. Until `EARLY_ROWS` samples a held-back
comparison is not possible (`MIN_HELD_BACK` of them in the newest 30%), so until then such a
cascade, not yet upgraded, fits by `first_fit` (policies/scorers/first_fit.py), on
cross-validation; from then on by the held-back `upgrade` (policies/scorers/refit.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.scorers.first_fit import FIRST_FIT
from policies.scorers.refit import MIN_HELD_BACK

EARLY_ROWS = int(MIN_HELD_BACK / 0.3) + 1


@dataclass(slots=True)
class FitSchedule:
    """The counts a cascade's learning keeps to know when its next fit is due."""

    every: int
    early_at: int | None  # the next early fit; None: no more (or none: a learned or judge cascade)
    since: int = 0  # samples since the last fit started
    seen: int = 0  # samples the cascade holds (stored at start, and taken since)

    @classmethod
    def of(cls, every: int, early: bool) -> FitSchedule:
        """`early`: a rules or logprob cascade, which fits early from `FIRST_FIT` samples on."""
        return cls(every, FIRST_FIT if early else None)

    def sampled(self) -> None:
        self.since += 1
        self.seen += 1

    @property
    def due(self) -> bool:
        early = self.early_at is not None and self.seen >= self.early_at
        return self.since >= self.every or early

    def started(self) -> None:
        """A fit starts now: the count since starts again, and the next early fit is half as many
        samples again away."""
        self.since = 0
        if self.early_at is not None:
            self.early_at = self._after(self.seen)

    def stored(self, count: int, fit_on_them: bool) -> None:
        """The samples a previous run stored count towards the early fits' schedule;
        `fit_on_them`: a cascade not yet upgraded fits on them at the next sample, when there are
        `FIRST_FIT` of them."""
        self.seen += count
        while self.early_at is not None and self.early_at <= self.seen:
            self.early_at = self._after(self.early_at)
        if fit_on_them and count >= FIRST_FIT:
            self.early_at = self.seen

    @property
    def before_held_back(self) -> bool:
        """Too few samples for a held-back comparison: a cascade not yet upgraded fits by
        `first_fit`. (Early fits only until the first swap: from then on the accepted answers are
        sampled at the shadow rate, and an unweighted calibration of such samples would
        under-count them.)"""
        return self.seen < EARLY_ROWS

    def _after(self, n: int) -> int | None:
        following = n + max(10, n // 2)
        return following if following < self.every else None
