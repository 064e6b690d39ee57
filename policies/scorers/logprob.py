"""Logprob confidence: the geometric mean of the answer's token probabilities."""

from __future__ import annotations

import math

from policies.scorers import Scored


def mean_token_probability(logprobs: tuple[float, ...] | None) -> float | None:
    """exp(mean logprob): 1.0 for a certain answer, lower as tokens get less likely."""
    if not logprobs:
        return None
    return math.exp(sum(logprobs) / len(logprobs))


class LogprobScorer:
    """Asks the tier for logprobs. An upstream that sends none gets `missing` (default 0: escalate)."""

    needs_logprobs = True
    calibration = None  # no labelled data: the cascade learns from its traffic

    def __init__(self, missing: float = 0.0) -> None:
        self.missing = missing

    def score(self, item: Scored) -> float:
        value = mean_token_probability(item.logprobs)
        return self.missing if value is None else value
