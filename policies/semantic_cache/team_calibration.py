"""A team's own verifier: the shipped labels plus the pairs the team judged through feedback.

`costgate cache calibrate --team NAME` reads the team's labelled pairs (every semantic hit it
reported wrong or right through POST /v1/feedback, gateway/storage/verdict_store.py) and fits a
verifier as `crossval.calibrate` does, on the base labels (the hand-adjudicated ones the shipped
verifier was fitted on) with the team's pairs added:

- **The fit and the certification simply include them.** A team pair is one more labelled
  candidate, like a base one; where the team judged a pair the base labels judged too, the
  team's verdict replaces the base's (it is the team's traffic and the team's rule). No weight:
  a handful of reports among ~3,000 base labels move the weights little, and a weight would
  count each report as several independent observations in the 95% bound, which they are not.
- **Then the team's own pairs guard each threshold.** For each certified bound, the threshold
  is raised, when needed, until the hits the final verifier would serve among the team's pairs
  are at most that share wrong (`team_threshold`). A pair the team reported wrong is then no
  longer served, unless the team also reported enough served pairs scored above it as right to
  keep the share within the bound. A bound no threshold below 1 can guard is dropped (a team
  asking for it is served only questions with the same words).

Reports are not a random sample of hits: people report a wrong answer far more often than a
right one. So the guard makes a team's verifier stricter than its traffic may need; reporting
right answers too (`verdict: right`) is what loosens it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from policies.semantic_cache.crossval import MIN_CANDIDATES, Calibration, calibrate
from policies.semantic_cache.verifier import Verifier
from policies.semantic_cache.verifier_calibration import RATES, Embed, Labelled, examples, scores

FEW = 20  # fewer team pairs than this: said so (they can only guard the thresholds, not move the fit)


@dataclass(frozen=True)
class TeamCalibration:
    calibration: Calibration  # the verifier certified on base + team pairs, before the team's guard
    verifier: Verifier  # the one to write: thresholds guarded by the team's pairs
    team_pairs: int  # distinct team pairs used
    team_wrong: int
    replaced: int  # base labels the team's verdict replaced
    raised: dict[float, tuple[float, float]]  # bound -> (certified threshold, guarded one), where raised
    dropped: list[float]  # bounds no threshold below 1 could guard
    team_served: dict[float, tuple[int, int]]  # bound -> (team pairs served, of them wrong), guarded


def merge(base: Sequence[Labelled], team: Sequence[Labelled]) -> tuple[list[Labelled], list[Labelled], int]:
    """(all labels, the team's distinct pairs, how many base labels the team replaced). The
    team's latest verdict on a pair wins over an earlier one and over the base's."""
    own: dict[tuple[str, str], Labelled] = {}
    for c in team:
        own[(c.query, c.stored)] = c
    kept = [c for c in base if (c.query, c.stored) not in own]
    return kept + list(own.values()), list(own.values()), len(base) - len(kept)


def team_threshold(score: np.ndarray, wrong: np.ndarray, max_rate: float, at_least: float) -> float | None:
    """The lowest threshold >= at_least at which the team's pairs scoring at or above it are at
    most `max_rate` wrong; None when only a threshold of 1 (nothing but the same words) would do."""
    candidates = sorted({at_least, *(float(np.nextafter(s, 2.0)) for s in score[wrong] if s >= at_least)})
    for t in candidates:
        served = score >= t
        if not served.any() or wrong[served].sum() <= max_rate * served.sum():
            return t if t < 1.0 else None
    return None


def calibrate_for_team(
    base: Sequence[Labelled], team: Sequence[Labelled], embed: Embed, rates: Sequence[float] = RATES
) -> TeamCalibration:
    if not team:
        raise ValueError("no labelled pairs from this team yet")
    labelled, own, replaced = merge(base, team)
    if len(labelled) < MIN_CANDIDATES:
        raise ValueError(
            f"need at least ~{MIN_CANDIDATES} labelled pairs with the base labels; got {len(labelled)} "
            "(give the labels the shipped verifier was fitted on as FILE)"
        )
    result = calibrate(labelled, embed, rates)
    fitted = result.verifier
    team_ex = examples(own, embed)
    # Pairs with the same words are served whatever the threshold: a report on one says the answer
    # was wrong, not the match, so it guards nothing.
    judged = ~team_ex.identical
    score, wrong = scores(team_ex, fitted.weights)[judged], ~team_ex.same[judged]
    kept_rates, kept_thresholds, raised, dropped, served = [], [], {}, [], {}
    for rate, threshold in zip(fitted.rates.tolist(), fitted.thresholds.tolist()):
        guarded = team_threshold(score, wrong, rate, threshold)
        if guarded is None:
            dropped.append(rate)
            continue
        if guarded > threshold:
            raised[rate] = (threshold, guarded)
        hit = score >= guarded
        served[rate] = (int(hit.sum()), int((hit & wrong).sum()))
        kept_rates.append(rate)
        kept_thresholds.append(guarded)
    verifier = Verifier(fitted.weights, np.array(kept_rates), np.array(kept_thresholds), fitted.min_cosine)
    return TeamCalibration(result, verifier, len(own), int((~team_ex.same).sum()), replaced, raised, dropped, served)
