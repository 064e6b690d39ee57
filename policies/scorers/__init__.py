"""Scorers: how confident is a cascade that a tier's answer is good enough to return?

Every scorer implements one small protocol (`Scorer`): given one tier's answer reduced to
what scorers read (`Scored`), return a confidence in [0, 1]. The cascade accepts the answer
when the confidence reaches the tier's threshold, and otherwise asks the next tier.

    rules      policies/scorers/rules.py    1.0 unless a rule check fails (always applied first)
    logprob    policies/scorers/logprob.py  the answer's mean token probability (asks for logprobs)
    learned    policies/scorers/learned.py  a small logistic regression on (query, answer) features
    judge      gateway/routing/judge.py     a cheap model asked to grade the answer (a real, charged
                                            call, so it lives with the calls, above the policies)

The rule checks (empty, refusal, truncated, invalid JSON when JSON was demanded) gate every
scorer: an answer that fails one scores 0 whatever the scorer says. Scorers here are pure:
they read a `Scored`, never a request or a body.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from policies.threshold_calibration import Calibration


@dataclass(frozen=True, slots=True)
class Scored:
    """One tier's answer, reduced to what scorers read."""

    query: str  # the request's text (the last user turn, or the prompt)
    answer: str
    finish_reason: str | None = None
    logprobs: tuple[float, ...] | None = None  # per generated token, when the upstream sent them
    wants_json: bool = False  # response_format demanded a JSON object
    has_tool_calls: bool = False
    query_vector: np.ndarray | None = field(default=None, compare=False)  # MiniLM's, for the query's topic


class Scorer(Protocol):
    @property
    def needs_logprobs(self) -> bool:
        """The cascade asks the tier for logprobs when set."""
        ...

    @property
    def calibration(self) -> Calibration | None:
        """What its thresholds did on labelled data (the learned scorer's file), if known."""
        ...

    def score(self, item: Scored) -> float:
        """Confidence in [0, 1] that `item.answer` is good enough."""
        ...
