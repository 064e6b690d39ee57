"""When a cascade's learning fits (policies/scorers/fit_schedule.py), as counts: the schedule the
gateway's learning and the what-if replay share."""

from __future__ import annotations

import pytest

from policies.scorers.fit_schedule import EARLY_ROWS, FitSchedule


def starts(schedule: FitSchedule, samples: int) -> list[int]:
    """The samples at which a fit starts, each started as soon as it is due."""
    found = []
    for n in range(1, samples + 1):
        schedule.sampled()
        if schedule.due:
            schedule.started()
            found.append(n)
    return found


@pytest.mark.parametrize(
    ("every", "early", "expected"),
    [
        # from tens, half as many again; then every 200 from the last start
        (200, True, [20, 30, 45, 67, 100, 150, 350]),
        (200, False, [200, 400]),  # a learned or judge cascade: every `refit_every` only
        (40, True, [20, 30, 70, 110, 150, 190, 230, 270, 310, 350, 390]),  # early fits only below `every`
    ],
)
def test_fits_start_early_then_every_refit_every_samples(every: int, early: bool, expected: list[int]) -> None:
    assert starts(FitSchedule.of(every, early), 400) == expected


def test_samples_a_previous_run_stored_move_the_early_fits_on_and_may_be_fitted_at_once() -> None:
    waiting = FitSchedule.of(200, early=True)
    waiting.stored(50, fit_on_them=False)  # past 20, 30, 45: the next early fit is at 67
    assert waiting.early_at == 67 and not waiting.due
    at_once = FitSchedule.of(200, early=True)
    at_once.stored(50, fit_on_them=True)  # not yet upgraded: fit on them at the next sample
    at_once.sampled()
    assert at_once.due
    few = FitSchedule.of(200, early=True)
    few.stored(19, fit_on_them=True)  # fewer than FIRST_FIT: nothing to fit on yet
    few.sampled()
    assert few.due  # 20 samples now: the first early fit
    few = FitSchedule.of(200, early=True)
    few.stored(10, fit_on_them=True)
    few.sampled()
    assert not few.due


def test_a_held_back_comparison_waits_for_early_rows() -> None:
    schedule = FitSchedule.of(200, early=True)
    schedule.stored(EARLY_ROWS - 1, fit_on_them=False)
    assert schedule.before_held_back
    schedule.sampled()
    assert not schedule.before_held_back
