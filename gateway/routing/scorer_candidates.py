"""A candidate for a cascade's scorer, fitted on its samples and judged, three ways; the cascade's
learning (gateway/routing/learning.py) picks the one due, then swaps a winner in and keeps it.

- `early_candidate`: a rules or logprob cascade's first fits, from its 20th sample on, before
  there are enough to hold any back (policies/scorers/first_fit.py). It wins when the controller
  its out-of-fold confidences build certifies a threshold.
- `upgrade_candidate`: past those, a learned scorer in place of the rules or logprob one
  (policies/scorers/refit.py `upgrade`): it must rank the held-back samples better, then certify.
- `refit_candidate`: a learned scorer refitted (policies/scorers/refit.py `refit`): it must rank
  the held-back samples better, and against a labelled calibration also escalate less.

Each runs its pure fit in a worker thread, off the event loop, and logs why a loser lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from gateway.config.settings import CascadeConfig
from gateway.routing.cascade import policy_of
from policies.quality import Sample, TeamVerdicts
from policies.quality_controller import Mode, QualityController
from policies.scorers.first_fit import first_fit
from policies.scorers.learned import LearnedModel
from policies.scorers.refit import Incumbent, TrainingRow, Vectors, controller_for, refit, upgrade
from policies.scorers.refit import Verdict as RefitVerdict

log = logging.getLogger("costgate.cascade")


@dataclass(frozen=True, slots=True)
class FitData:
    """What a fit learns from: the cascade's stored samples that have feature vectors, their
    training rows (the teams' verdicts on the requests as labels), and the teams' verdicts on its
    last tier."""

    rows: Sequence[TrainingRow]
    samples: Sequence[tuple[Sample, Vectors]]
    feedback: tuple[TeamVerdicts, ...] | None


@dataclass(frozen=True, slots=True)
class KeepLearning:
    """What a losing fit says of the cascade's learning phase (every request escalated, each a
    sample): go on, for `why`; or, with None, let the controller decide alone."""

    why: str | None


@dataclass(frozen=True, slots=True)
class Candidate:
    """A learned scorer fitted and judged. A winner comes with `model` and the `controller` built
    on it, to be swapped in together; a loser with neither. `verdict` says why."""

    verdict: RefitVerdict
    upgrades: bool  # it would replace a rules or logprob scorer (else: a learned one, refitted)
    model: LearnedModel | None = None
    controller: QualityController | None = None
    replaced: str = ""  # what the log says of a winner
    learning: KeepLearning | None = None  # a loser's word on the learning phase, for the cascade to apply

    def news(self) -> str:
        """What the log says once the winner is swapped in: a refit names the threshold its
        controller holds then, with the samples taken while the fit ran."""
        if self.upgrades or self.controller is None:
            return self.replaced
        threshold = self.controller.threshold
        return f"{self.replaced}; threshold now {'escalate all' if threshold is None else f'{threshold:.2f}'}"


# A fit: given the cascade's config, the controller in use (read, never changed) and what to fit
# on, its candidate.
Fit = Callable[[CascadeConfig, QualityController, FitData], Awaitable[Candidate]]


async def early_candidate(config: CascadeConfig, controller: QualityController, data: FitData) -> Candidate:
    """A candidate from the samples so far; one that does not win yet but whose controller says a
    threshold may yet be proven asks the cascade to keep learning (every request escalated, each a
    sample) rather than skip, and once one says none can, the controller decides alone."""
    rows = data.rows
    result = await asyncio.to_thread(first_fit, rows, data.samples, policy_of(config), data.feedback)
    candidate = result.controller
    if candidate is not None and candidate.mode is Mode.CERTIFIED and result.model is not None:
        replaced = f"a learned scorer fitted early replaced {config.scorer} ({result.verdict.reason})"
        return Candidate(result.verdict, upgrades=True, model=result.model, controller=candidate, replaced=replaced)
    hopeful = candidate is not None and candidate.mode is Mode.LEARNING
    learning = KeepLearning(f"an early fit may yet certify ({result.verdict.reason})" if hopeful else None)
    log.info("cascade %s: early fit on %d samples: %s", config.name, len(rows), result.verdict.reason)
    return Candidate(result.verdict, upgrades=True, learning=learning)


async def upgrade_candidate(config: CascadeConfig, controller: QualityController, data: FitData) -> Candidate:
    """A learned scorer in place of a rules or logprob one: fitted, compared, certified."""
    rows = data.rows
    result = await asyncio.to_thread(upgrade, rows, data.samples, policy_of(config), data.feedback)
    if result.model is None or result.controller is None:
        log.info(
            "cascade %s: a learned scorer trained on %d samples does not replace %s: %s",
            config.name,
            len(rows),
            config.scorer,
            result.verdict.reason,
        )
        # the early fits' hope ends with the first full attempt
        return Candidate(result.verdict, upgrades=True, learning=KeepLearning(None))
    replaced = f"a learned scorer trained on {len(rows)} samples replaced {config.scorer} ({result.verdict.reason})"
    return Candidate(result.verdict, upgrades=True, model=result.model, controller=result.controller, replaced=replaced)


async def refit_candidate(
    config: CascadeConfig, controller: QualityController, data: FitData, current: LearnedModel
) -> Candidate:
    """The learned scorer in use (`current`) refitted: fitted, compared with it, and a winner
    given a controller rebuilt on the samples it rescores."""
    rows, samples, feedback = data.rows, data.samples, data.feedback
    escalation = controller.estimate().escalation
    incumbent = Incumbent(policy_of(config), samples, 1.0 if escalation is None else escalation, feedback)
    new, verdict = await asyncio.to_thread(refit, rows, current, controller.rejected, incumbent=incumbent)
    if new is None:
        log.info("cascade %s: refit on %d samples kept the current scorer: %s", config.name, len(rows), verdict.reason)
        return Candidate(verdict, upgrades=False)
    rebuilt = await asyncio.to_thread(controller_for, new, policy_of(config), samples, feedback)
    replaced = f"refit on {len(rows)} samples replaced the scorer ({verdict.reason})"
    return Candidate(verdict, upgrades=False, model=new, controller=rebuilt, replaced=replaced)
